#!/usr/bin/env python3
"""Writes the tokenizer fixtures and their golden encodings with the Hugging Face `tokenizers`
library (PyPI: pip install tokenizers). Three small byte-level BPE tokenizers, trained on the licence
texts every Debian system ships, configured the way their model families are:

  gpt2/     ByteLevel pre-tokenizer with GPT-2's regex, <|endoftext|>, no BOS
  llama3/   Split(Llama 3 regex, isolated) + ByteLevel(use_regex=False), BOS via TemplateProcessing
  qwen2/    NFC normaliser + Split(Qwen2 regex) + ByteLevel, ChatML special tokens, no BOS

Each directory gets tokenizer.json and golden.json: for every case text, the ids HF produces with
add_special_tokens=True and the text HF decodes back. Run: python3 make_fixtures.py (deterministic).
"""
import json
import os

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
LICENSES = ["GPL-3", "Apache-2.0", "LGPL-2.1", "MPL-2.0", "Artistic", "BSD"]

GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PAT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
              r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2_PAT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
             r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

CASES = [
    "Hello, world! This is Mobius.",
    "  leading and trailing spaces   ",
    "tabs\tand\nnewlines\r\n\n  indented line\n",
    "numbers: 0 7 42 1234567 3.14159 -12e5 1,000,000",
    "Unicode: café naïve Ærøskøbing Straße über — “quotes” … ½",
    "CJK: 你好世界, 日本語のテキスト, 한국어",
    "emoji: 👋🏽 🧑‍💻 🇩🇪 ❤️ 🎉🎉",
    "decomposed: cafe\u0301 and composed: caf\u00e9",
    "special <|endoftext|> in the middle<|endoftext|>",
    "CONTRACTIONS: I'm, you're, it's, we'll, they'd, I'VE",
    "GNU GENERAL PUBLIC LICENSE Version 3, 29 June 2007",
    "",
    " ",
    "\n\n\n",
    "x" * 300,
]


def corpus():
    for name in LICENSES:
        path = os.path.join("/usr/share/common-licenses", name)
        with open(path, encoding="utf-8", errors="replace") as f:
            yield f.read()
    yield "\n".join(CASES)


def train(tok, specials, vocab_size=700):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


def gpt2():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok = train(tok, ["<|endoftext|>"])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def llama3():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok = train(tok, ["<|begin_of_text|>", "<|end_of_text|>"])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
        special_tokens=[("<|begin_of_text|>", bos)])
    return tok


def qwen2():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok = train(tok, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def write(name, tok):
    out = os.path.join(HERE, name)
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"), pretty=True)
    cases = []
    texts = CASES + ["<|im_start|>user\nhi<|im_end|>", "<|begin_of_text|>already<|end_of_text|>"]
    for text in texts:
        ids = tok.encode(text, add_special_tokens=True).ids
        cases.append({"text": text, "ids": ids,
                      "decoded": tok.decode(ids, skip_special_tokens=False)})
    with open(os.path.join(out, "golden.json"), "w", encoding="utf-8") as f:
        json.dump({"vocab_size": tok.get_vocab_size(), "cases": cases}, f, ensure_ascii=False,
                  indent=1)
        f.write("\n")


if __name__ == "__main__":
    write("gpt2", gpt2())
    write("llama3", llama3())
    write("qwen2", qwen2())
