#!/usr/bin/env python3
"""Checks a directory written by `mobius-worker init-model` (or a checkpoint) with PyTorch alone.

Not a ctest: Debian has torch 1.13 but neither transformers nor safetensors, so this parses the
safetensors header itself and checks every tensor's shape against the shapes transformers' model
classes create from config.json (same formulas as modeling_gpt2 / modeling_llama / qwen2 / qwen3),
then loads each tensor into torch and checks the init statistics.

    /usr/bin/python3 test/worker/checkpoint/check_hf_dir.py DIR
"""
import json
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    assert header.get("__metadata__", {}).get("format") == "pt", "transformers needs format=pt"
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[base + b:base + end]), dtype=DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"])
    return out


def expected_shapes(c):
    if c["model_type"] == "gpt2":
        C, L, V, P = c["n_embd"], c["n_layer"], c["vocab_size"], c["n_positions"]
        I = c.get("n_inner") or 4 * C
        s = {"transformer.wte.weight": [V, C], "transformer.wpe.weight": [P, C],
             "transformer.ln_f.weight": [C], "transformer.ln_f.bias": [C]}
        for i in range(L):
            p = f"transformer.h.{i}."
            s.update({p + "ln_1.weight": [C], p + "ln_1.bias": [C], p + "ln_2.weight": [C],
                      p + "ln_2.bias": [C], p + "attn.c_attn.weight": [C, 3 * C],
                      p + "attn.c_attn.bias": [3 * C], p + "attn.c_proj.weight": [C, C],
                      p + "attn.c_proj.bias": [C], p + "mlp.c_fc.weight": [C, I],
                      p + "mlp.c_fc.bias": [I], p + "mlp.c_proj.weight": [I, C],
                      p + "mlp.c_proj.bias": [C]})
        return s
    C, L, V = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    H, KV, I = c["num_attention_heads"], c["num_key_value_heads"], c["intermediate_size"]
    hd = c.get("head_dim") if c["model_type"] != "qwen2" else None
    hd = hd or C // H
    qkv_bias = c["model_type"] == "qwen2" or c.get("attention_bias", False)
    o_bias = c["model_type"] in ("llama", "qwen3") and c.get("attention_bias", False)
    s = {"model.embed_tokens.weight": [V, C], "model.norm.weight": [C]}
    if not c.get("tie_word_embeddings", False):
        s["lm_head.weight"] = [V, C]
    for i in range(L):
        p = f"model.layers.{i}."
        s.update({p + "input_layernorm.weight": [C], p + "post_attention_layernorm.weight": [C],
                  p + "self_attn.q_proj.weight": [H * hd, C], p + "self_attn.k_proj.weight": [KV * hd, C],
                  p + "self_attn.v_proj.weight": [KV * hd, C], p + "self_attn.o_proj.weight": [C, H * hd],
                  p + "mlp.gate_proj.weight": [I, C], p + "mlp.up_proj.weight": [I, C],
                  p + "mlp.down_proj.weight": [C, I]})
        if qkv_bias:
            s.update({p + "self_attn.q_proj.bias": [H * hd], p + "self_attn.k_proj.bias": [KV * hd],
                      p + "self_attn.v_proj.bias": [KV * hd]})
        if o_bias:
            s[p + "self_attn.o_proj.bias"] = [C]
        if c["model_type"] == "qwen3":
            s.update({p + "self_attn.q_norm.weight": [hd], p + "self_attn.k_norm.weight": [hd]})
    return s


def main(directory):
    with open(f"{directory}/config.json") as f:
        config = json.load(f)
    tensors = read_safetensors(f"{directory}/model.safetensors")
    want = expected_shapes(config)
    assert set(tensors) == set(want), (set(tensors) ^ set(want))
    for name, shape in want.items():
        t = tensors[name].float()
        assert list(t.shape) == shape, (name, list(t.shape), shape)
        assert torch.isfinite(t).all(), name
        if name.endswith(".bias"):
            assert (t == 0).all(), name
        elif t.dim() == 1:
            assert (t == 1).all(), name
        elif t.numel() >= 4096:
            print(f"{name:50s} {shape} std {t.std().item():.4f}")
    print(f"OK: {config['model_type']}, {len(tensors)} tensors, shapes match config.json")


if __name__ == "__main__":
    main(sys.argv[1])
