#!/work/venv-peft/bin/python
"""Golden data for `mobius generate`: Hugging Face's own greedy generate() as the oracle.

Runs the real transformers model classes (LlamaForCausalLM, GPT2LMHeadModel; fp32, eager
attention, eval()) on the golden tiny models of test/reference/golden/<base>, alone and with the
PEFT adapters of test/reference/golden_lora/<adapter> (PeftModel.from_pretrained), and records
model.generate(do_sample=False, max_new_tokens=N, output_scores=True) for one prompt per case.
Needs the venv of make_lora_golden.py (deploy/requirements-peft.txt):

  /work/venv-peft/bin/python test/reference/make_generate_golden.py [output_file]

Our engine runs bf16 weights and activations (fp32 accumulation) against HF's fp32, so logits
differ by ~1e-2 and a greedy choice between two near-equal logits could flip. The prompt of each
case is therefore the first of a seeded series of random prompts whose greedy path keeps a top-1
minus top-2 logit margin of at least MIN_MARGIN at every step (recorded as min_margin), so the ids
must match exactly; the per-step logits (HF's scores) are recorded too, for a tolerance check.
Generation stops at N or at the model's eos_token_id (config.json's; the cases carry it), as ours.

Output (default test/reference/golden_generate/generate.json):
  {"cases": [{"name", "base", "adapter" (or null), "prompt": [ids], "max_new_tokens",
              "eos_token_id", "tokens": [new ids, eos included when hit], "min_margin",
              "scores": [[V logits] per new token]}]}
"""
import json
import os
import sys
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import torch
import transformers
from peft import PeftModel
from safetensors.torch import load_file

# PEFT asks the Hub whether the base's config.json changed the vocabulary (offline: it can't).
warnings.filterwarnings("ignore", message="Could not find a config file in")

MIN_MARGIN = 0.15
MAX_NEW = 10
CASES = [  # name, base, adapter, model class
    ("llama_gqa", "llama_gqa", None, transformers.LlamaForCausalLM),
    ("gpt2", "gpt2", None, transformers.GPT2LMHeadModel),
    ("llama_gqa_lora", "llama_gqa", "llama_gqa", transformers.LlamaForCausalLM),
    ("llama_gqa_qv_lora", "llama_gqa", "llama_gqa_qv", transformers.LlamaForCausalLM),
    ("gpt2_lora", "gpt2", "gpt2", transformers.GPT2LMHeadModel),
    ("gpt2_c_attn_lora", "gpt2", "gpt2_c_attn", transformers.GPT2LMHeadModel),
]


def load(base, adapter, cls):
    base_dir = os.path.join("test", "reference", "golden", base)
    # Built from config.json and loaded by hand: this transformers' from_pretrained wants a
    # safetensors "format" metadata entry that make_golden.py's writer does not add.
    config = transformers.AutoConfig.from_pretrained(base_dir)
    config._attn_implementation = "eager"
    model = cls(config).to(torch.float32)
    missing, unexpected = model.load_state_dict(
        load_file(os.path.join(base_dir, "model.safetensors")), strict=False)
    assert not unexpected and all("lm_head" in k or "attn.bias" in k or "masked_bias" in k
                                  for k in missing), (missing, unexpected)
    model.tie_weights()
    if adapter is not None:
        model = PeftModel.from_pretrained(
            model, os.path.join("test", "reference", "golden_lora", adapter))
    model.eval()
    return model, json.load(open(os.path.join(base_dir, "config.json")))


def greedy(model, prompt, eos):
    with torch.no_grad():
        out = model.generate(input_ids=torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             do_sample=False, max_new_tokens=MAX_NEW, output_scores=True,
                             return_dict_in_generate=True, eos_token_id=eos, pad_token_id=eos)
    tokens = out.sequences[0, len(prompt):].tolist()
    scores = [s[0] for s in out.scores]
    top2 = [s.topk(2).values for s in scores]
    margin = min((t[0] - t[1]).item() for t in top2)
    # Independent check: the greedy tokens are the argmax of a full forward each step.
    seq = list(prompt)
    with torch.no_grad():
        for tok in tokens:
            logits = model(input_ids=torch.tensor([seq])).logits[0, -1]
            assert logits.argmax().item() == tok
            seq.append(tok)
    return tokens, scores, margin


def main():
    out_file = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        "test", "reference", "golden_generate", "generate.json")
    cases = []
    for name, base, adapter, cls in CASES:
        model, cfg = load(base, adapter, cls)
        vocab, eos = cfg["vocab_size"], cfg["eos_token_id"]
        gen = torch.Generator().manual_seed(1234)
        for attempt in range(200):
            length = int(torch.randint(3, 7, (1,), generator=gen))
            prompt = torch.randint(3, vocab - 1, (length,), generator=gen).tolist()
            tokens, scores, margin = greedy(model, prompt, eos)
            if margin >= MIN_MARGIN:
                break
        else:
            raise SystemExit(f"{name}: no prompt with margin >= {MIN_MARGIN}")
        print(f"{name}: prompt {prompt} -> {tokens} (min margin {margin:.3f}, attempt {attempt})")
        cases.append({"name": name, "base": base, "adapter": adapter, "prompt": prompt,
                      "max_new_tokens": MAX_NEW, "eos_token_id": eos, "tokens": tokens,
                      "min_margin": round(margin, 4),
                      "scores": [[round(float(x), 5) for x in s] for s in scores]})
    os.makedirs(os.path.dirname(out_file), exist_ok=True)
    with open(out_file, "w") as f:
        json.dump({"generator": "transformers " + transformers.__version__, "cases": cases}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
