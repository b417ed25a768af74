#!/usr/bin/env python3
"""Writes the chat-template fixtures (test/data/chat_templates/) and their golden token ids from
Hugging Face transformers' own apply_chat_template (a venv with transformers and jinja2; the
PEFT venv of deploy/install-deps.sh has them).

  tokenizer.json            a small byte-level BPE (Llama 3's split regex) trained on the licence
                            texts Debian ships, with every special token the five templates use
  <model>/template.jinja    the model's published template, typed in (README.md: sources);
                            phi4's is chat_template.jinja, the newer layout transformers reads
  <model>/tokenizer_config.json   chat_template (from template.jinja; not phi4's) and the
                            model's special tokens, as the model's tokenizer_config.json has them
  conversations.jsonl       the conversations (system prompts, several turns, unicode, a
                            trailing newline in a reply, a reasoning block, one without an
                            assistant turn)
  golden.json               per case (model + template kwargs) and conversation: the ids of
                            tokenizer.apply_chat_template(messages, tokenize=True, **kwargs), and
                            the texts an assistant turn should train on, written out per template
                            below from what each template renders (an oracle independent of
                            common/data/chat_render.py)

Run: python3 make_chat_golden.py (deterministic).
"""
import json
import os

import transformers
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "chat_templates")
LICENSES = ["GPL-3", "Apache-2.0", "LGPL-2.1", "MPL-2.0", "Artistic", "BSD"]
LLAMA3_PAT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
              r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
            "<|eot_id|>", "<|eom_id|>", "<|python_tag|>", "<|im_start|>", "<|im_end|>",
            "<|im_sep|>", "<|endoftext|>", "<bos>", "<eos>", "<pad>", "<start_of_turn>",
            "<end_of_turn>", "<s>", "</s>", "<unk>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]",
            "[/AVAILABLE_TOOLS]", "[TOOL_CALLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"]
# Not special (Qwen3 marks them so): ordinary added tokens.
ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>"]

# The special tokens of each model's tokenizer_config.json that its template may use.
MODELS = {
    "llama31": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "qwen3": {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "gemma3": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>",
               "unk_token": "<unk>"},
    "mistral_v03": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "phi4": {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>",
             "pad_token": "<|endoftext|>"},
}
CASES = [
    ("llama31", {}), ("qwen3", {}), ("qwen3", {"enable_thinking": False}), ("gemma3", {}),
    ("mistral_v03", {}), ("phi4", {}),
]

CONVERSATIONS = [
    [{"role": "system", "content": "You are a terse assistant."},
     {"role": "user", "content": "Hello!"},
     {"role": "assistant", "content": "Hi. How can I help?"},
     {"role": "user", "content": "What is 2+2? Answer in one word."},
     {"role": "assistant", "content": "Four."}],
    [{"role": "user", "content": "Übersetze: naïve café — ½ 你好 👋"},
     {"role": "assistant", "content": "naive cafe - half, hello 👋\n"}],
    [{"role": "system", "content": "Think first."},
     {"role": "user", "content": "2 + 3?"},
     {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\nThe answer is 5."},
     {"role": "user", "content": "Thanks, and 10 - 4?"},
     {"role": "assistant", "content": "Six."}],
    [{"role": "user", "content": "one"}, {"role": "assistant", "content": "uno"},
     {"role": "user", "content": "two"}, {"role": "assistant", "content": "dos"},
     {"role": "user", "content": "three"}, {"role": "assistant", "content": "  tres  "}],
    [{"role": "user", "content": "a question nobody answers"}],
]


def tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()

    def corpus():
        for name in LICENSES:
            with open(os.path.join("/usr/share/common-licenses", name), encoding="utf-8",
                      errors="replace") as f:
                yield f.read()
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.add_tokens(ADDED)
    return tok


def qwen3_split(content):
    reasoning = ""
    if "</think>" in content:
        reasoning = content.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
        content = content.split("</think>")[-1].lstrip("\n")
    return reasoning, content


def trained_texts(model, kwargs, messages):
    """What each assistant turn should train on: its text as the template renders it (after the
    generation prompt) and its end-of-turn token."""
    out = []
    last_query = max(i for i, m in enumerate(messages) if m["role"] == "user")
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        c = m["content"]
        if model == "llama31":
            out.append(c.strip() + "<|eot_id|>")
        elif model == "gemma3":
            out.append(c.strip() + "<end_of_turn>")
        elif model == "mistral_v03":
            out.append(" " + c.strip() + "</s>")
        elif model == "phi4":
            out.append(c + "<|im_end|>")
        elif model == "qwen3":
            reasoning, content = qwen3_split(c)
            last = i == len(messages) - 1
            if i > last_query and (last or reasoning):
                body = "<think>\n" + reasoning.strip("\n") + "\n</think>\n\n" + content.lstrip("\n")
                if kwargs.get("enable_thinking") is False and body.startswith("<think>\n\n</think>\n\n"):
                    body = body[len("<think>\n\n</think>\n\n"):]  # the prompt's empty think block
            else:
                body = content
            out.append(body + "<|im_end|>")
    return out


def main():
    tok = tokenizer()
    os.makedirs(OUT, exist_ok=True)
    tok_path = os.path.join(OUT, "tokenizer.json")
    tok.save(tok_path, pretty=True)
    with open(os.path.join(OUT, "conversations.jsonl"), "w", encoding="utf-8") as f:
        for c in CONVERSATIONS:
            f.write(json.dumps({"messages": c}, ensure_ascii=False) + "\n")
    fast = {}
    for model, specials in MODELS.items():
        d = os.path.join(OUT, model)
        source = "chat_template.jinja" if model == "phi4" else "template.jinja"
        with open(os.path.join(d, source), encoding="utf-8") as f:
            template = f.read()
        config = {k: v for k, v in specials.items()}
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
        if model != "phi4":
            config["chat_template"] = template
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False, indent=1)
            f.write("\n")
        fast[model] = transformers.PreTrainedTokenizerFast(
            tokenizer_file=tok_path, chat_template=template,
            **{k: v for k, v in specials.items() if v is not None})
    golden = {"transformers": transformers.__version__, "cases": []}
    for model, kwargs in CASES:
        convs = []
        for messages in CONVERSATIONS:
            if not any(m["role"] == "assistant" for m in messages):
                convs.append({"skip": True})
                continue
            ids = fast[model].apply_chat_template(messages, tokenize=True, **kwargs)
            if isinstance(ids, dict):
                ids = ids["input_ids"]
            convs.append({"ids": list(ids), "targets": trained_texts(model, kwargs, messages)})
        golden["cases"].append({"model": model, "kwargs": kwargs, "conversations": convs})
    with open(os.path.join(OUT, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
