#!/usr/bin/env python3
"""bitsandbytes 4-bit Hugging Face checkpoints, written by bitsandbytes itself on the CPU, for
worker/checkpoint/bnb4bit.h's reader (issue 33: "a bitsandbytes-format checkpoint ... loads and
gives the same weights").

A small Llama (2 layers, hidden 64, MLP 320, GQA 4/2 heads, vocab 64; seeded) in bf16; every
linear of its blocks quantised with bitsandbytes.functional.quantize_4bit and stored under the
names bitsandbytes' Linear4bit._save_to_state_dict gives them (the packed codes under the weight's
name, then QuantState.as_dict(packed=True): absmax, quant_map, nested_absmax, nested_quant_map,
quant_state.bitsandbytes__<type>); embeddings, norms and the head stay bf16, as transformers
keeps them. config.json carries the quantization_config transformers writes. Cases:

  nf4/       QLoRA's configuration: nf4, blocksize 64, double-quantised absmax (blocks of 256)
  fp4_plain/ fp4, blocksize 64, plain fp32 absmax (the general dequantising path; bitsandbytes
             0.50.2's CPU dequantize_4bit is wrong for blocksize 128: each block past the first
             takes the first's scale, 17x the error)

Each case directory: config.json, model.safetensors (the 4-bit checkpoint), dequantized.safetensors
(bitsandbytes' dequantize_4bit of each quantised linear, bf16, by weight name); beside them
original.safetensors, the bf16 weights before quantising (every tensor).

Run with a torch that has a CPU build and bitsandbytes >= 0.46 (its CPU quantiser), e.g.
  pip install --target /tmp/bnb bitsandbytes --no-deps
  PYTHONPATH=/tmp/bnb <peft venv>/bin/python test/reference/make_bnb4bit_golden.py
"""
import json
import os

import bitsandbytes
import bitsandbytes.functional as F
import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64,
    "hidden_size": 64, "intermediate_size": 320, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu", "attention_bias": False,
    "mlp_bias": False, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
    "torch_dtype": "bfloat16",
}
LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]


def model_tensors():
    g = torch.Generator().manual_seed(33)
    h, i, v = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["vocab_size"]
    kv = h // CONFIG["num_attention_heads"] * CONFIG["num_key_value_heads"]
    shapes = {"self_attn.q_proj": (h, h), "self_attn.k_proj": (kv, h),
              "self_attn.v_proj": (kv, h), "self_attn.o_proj": (h, h),
              "mlp.gate_proj": (i, h), "mlp.up_proj": (i, h), "mlp.down_proj": (h, i)}
    t = {"model.embed_tokens.weight": torch.randn(v, h, generator=g) * 0.5,
         "model.norm.weight": 1 + 0.1 * torch.randn(h, generator=g),
         "lm_head.weight": torch.randn(v, h, generator=g) * 0.1}
    for layer in range(CONFIG["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        t[p + "input_layernorm.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
        t[p + "post_attention_layernorm.weight"] = 1 + 0.1 * torch.randn(h, generator=g)
        for name in LINEARS:
            w = torch.randn(*shapes[name], generator=g) * 0.05
            w[0, :5] = torch.tensor([0.4, -0.3, 0.0, 1e-3, -0.5])  # outliers, an exact zero
            t[p + name + ".weight"] = w
    return {k: x.to(torch.bfloat16).contiguous() for k, x in t.items()}


def write_case(name, quant_type, blocksize, nested):
    out = os.path.join(HERE, "golden_bnb4bit", name)
    os.makedirs(out, exist_ok=True)
    original = model_tensors()
    checkpoint, dequantized = {}, {}
    for key, w in original.items():
        if not any(key.endswith(l + ".weight") for l in LINEARS):
            checkpoint[key] = w
            continue
        q, state = F.quantize_4bit(w, blocksize=blocksize, compress_statistics=nested,
                                   quant_type=quant_type)
        checkpoint[key] = q
        for k, v in state.as_dict(packed=True).items():
            checkpoint[key + "." + k] = v.contiguous()
        dequantized[key] = F.dequantize_4bit(q, state).contiguous()
    save_file(checkpoint, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    save_file(original, os.path.join(HERE, "golden_bnb4bit", "original.safetensors"),
              metadata={"format": "pt"})
    save_file(dequantized, os.path.join(out, "dequantized.safetensors"),
              metadata={"bitsandbytes": bitsandbytes.__version__, "torch": torch.__version__})
    config = dict(CONFIG)
    config["quantization_config"] = {
        "_load_in_4bit": True, "_load_in_8bit": False, "bnb_4bit_compute_dtype": "bfloat16",
        "bnb_4bit_quant_storage": "uint8", "bnb_4bit_quant_type": quant_type,
        "bnb_4bit_use_double_quant": nested, "llm_int8_enable_fp32_cpu_offload": False,
        "llm_int8_has_fp16_weight": False, "llm_int8_skip_modules": None,
        "llm_int8_threshold": 6.0, "load_in_4bit": True, "load_in_8bit": False,
        "quant_method": "bitsandbytes"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


def main():
    write_case("nf4", "nf4", 64, True)
    write_case("fp4_plain", "fp4", 64, False)


if __name__ == "__main__":
    main()
