#!/usr/bin/env python3
"""Golden data for gpt-oss's MXFP4 expert weights (worker/checkpoint/mxfp4.h).

A tiny gpt-oss model whose experts are stored as OpenAI stores them (gate_up_proj_blocks /
_scales, down_proj_blocks / _scales: U8, e2m1 codes and e8m0 scales), its config.json with
quantization_config {"quant_method": "mxfp4"}. The codes come from a seeded float model, encoded
here (scale: the group's largest magnitude over 6, rounded up to a power of two; each value the
nearest e2m1); what they mean comes from transformers' own convert_moe_packed_tensors, which
writes expected.safetensors (the dequantised [E, in, out] tensors) and outputs.safetensors (the
loss of GptOssForCausalLM on those weights, fp32, eager attention, on a fixed batch).

  /tmp/moe-venv/bin/python test/reference/make_mxfp4_golden.py [output_dir]
(the venv of make_moe_golden.py: transformers 4.57.6, torch).
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers.integrations.mxfp4 import FP4_VALUES, convert_moe_packed_tensors

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import IGNORE_INDEX, fixed_batch, write_safetensors  # noqa: E402
from make_moe_golden import GPT_OSS  # noqa: E402

CFG = dict(GPT_OSS, num_hidden_layers=2, hidden_size=64, intermediate_size=32,
           layer_types=["sliding_attention", "full_attention"],
           quantization_config={"quant_method": "mxfp4",
                                "modules_to_not_convert": ["model.layers.*.self_attn",
                                                           "model.layers.*.mlp.router",
                                                           "model.embed_tokens", "lm_head"]})
SEED = 31


def encode(w):
    """w [E, in, out] fp32 -> blocks U8 [E, out, in/32, 16], scales U8 [E, out, in/32]."""
    e, n_in, n_out = w.shape
    x = w.transpose(1, 2).reshape(e, n_out, n_in // 32, 32)
    amax = x.abs().amax(dim=-1).clamp(min=1e-30)
    exp = torch.ceil(torch.log2(amax / 6.0)).clamp(-127, 127)
    scaled = x / torch.pow(2.0, exp)[..., None]
    lut = torch.tensor(FP4_VALUES)
    codes = (scaled[..., None] - lut).abs().argmin(dim=-1).to(torch.uint8)  # [E, out, G, 32]
    blocks = (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)
    scales = (exp + 127).to(torch.uint8)
    return blocks.contiguous(), scales.contiguous()


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "golden_mxfp4", "gpt_oss_mxfp4")
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    keys = {k: v for k, v in CFG.items()
            if k not in ("architectures", "model_type", "torch_dtype", "quantization_config")}
    model = transformers.GptOssForCausalLM(
        transformers.GptOssConfig(**keys, attn_implementation="eager")).float().eval()
    g = torch.Generator().manual_seed(SEED)
    tensors, expected = {}, {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=g))
            if name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj"):
                blocks, scales = encode(p)
                tensors[name + "_blocks"] = blocks
                tensors[name + "_scales"] = scales
                dq = convert_moe_packed_tensors(blocks, scales, dtype=torch.bfloat16).float()
                p.copy_(dq)  # what transformers loads
                expected[name] = dq
            else:
                tensors[name] = p.detach().clone()
    tokens, targets = fixed_batch(CFG["vocab_size"], SEED)
    labels = torch.full_like(targets, IGNORE_INDEX)
    labels[:, 1:] = targets[:, :-1]
    with torch.no_grad():
        loss = model(input_ids=tokens, labels=labels).loss
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(CFG, f, indent=2)
        f.write("\n")
    # The model file keeps each tensor's dtype (U8 codes and scales, F32 values), as HF's does.
    save_file({k: v.contiguous() for k, v in tensors.items()},
              os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    write_safetensors(os.path.join(out_dir, "expected.safetensors"), expected)
    write_safetensors(os.path.join(out_dir, "outputs.safetensors"),
                      {"tokens": tokens.float(), "targets": targets.float(),
                       "loss": loss.reshape(1)})
    os.chmod(os.path.join(out_dir, "model.safetensors"), 0o644)
    print(f"gpt_oss_mxfp4: loss {loss.item():.6f}, {len(expected)} MXFP4 tensors")


if __name__ == "__main__":
    main()
