#!/usr/bin/env python3
"""The loss of a model directory, optionally with a PEFT adapter on top, on one batch of a
headerless u16 token file cut into sequences of T+1 tokens with stride T (the loader's packing,
common/data/loader.h): mean cross-entropy of every next token, in float32, as Hugging Face
transformers (and PEFT's PeftModel.from_pretrained for --adapter) computes it.

  peft_roundtrip.py --model DIR [--adapter DIR] [--nf4] --tokens FILE --seq T

--nf4: every linear of the decoder blocks replaced by its NF4 round trip first (QLoRA's base as an
NF4 run trains over it), written here from the definition (Dettmers et al. 2023; blocks of 64,
absmax double-quantised in blocks of 256 around their mean with the signed dynamic map, nearest
levels, ties to the lower) with bitsandbytes' NF4 and dynamic tables as recorded in
golden_nf4/nf4.json; independent of our C++ (common/numeric/nf4.h).

Prints one line: "loss X". Used by test/reference/peft_roundtrip_test.sh.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import transformers


def nf4_round_trip(w):
    """w's values rounded to bf16, quantised to NF4 and dequantised (fp32 arithmetic), as bf16."""
    tables = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                         "golden_nf4", "nf4.json")))
    levels = torch.tensor(tables["nf4_code"], dtype=torch.float32)
    dynamic = torch.tensor(tables["dynamic_code"], dtype=torch.float32)
    x = w.detach().to(torch.bfloat16).float().reshape(-1)
    n = x.numel()
    pad = (-n) % 64
    blocks = torch.cat([x, torch.zeros(pad)]).view(-1, 64)
    absmax = blocks.abs().max(dim=1).values
    full = n // 64
    normed = blocks * (1.0 / absmax.clamp_min(1e-38))[:, None]  # full blocks: the reciprocal
    if pad:
        normed[full] = blocks[full] / absmax[full].clamp_min(1e-38)  # a partial block divides
    mids = (levels[:-1] + levels[1:]) / 2
    codes = torch.bucketize(normed.clamp(-1, 1), mids)  # midpoints strictly below
    offset = absmax.double().mean().float()
    centred = absmax - offset
    scales = torch.zeros(absmax.numel())
    for g in range(0, absmax.numel(), 256):
        scales[g:g + 256] = centred[g:g + 256].abs().max()
    v = torch.where(scales > 0, centred / scales, torch.zeros_like(centred))
    idx = (torch.searchsorted(dynamic, v, right=True) - 1).clamp(0, 254)
    right = (v - dynamic[idx + 1]).abs() < (v - dynamic[idx]).abs()
    idx = torch.where((torch.searchsorted(dynamic, v, right=True) - 1) >= 255,
                      torch.full_like(idx, 255), idx + right.long())
    block_scale = dynamic[idx] * scales + offset
    out = (levels[codes] * block_scale[:, None]).reshape(-1)[:n]
    return out.to(torch.bfloat16).float().view_as(w)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--adapter")
    ap.add_argument("--nf4", action="store_true")
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--seq", type=int, required=True)
    a = ap.parse_args()
    ids = np.fromfile(a.tokens, dtype=np.uint16).astype(np.int64)
    t = a.seq
    n = (len(ids) - 1) // t
    seqs = torch.tensor(np.stack([ids[i * t:i * t + t + 1] for i in range(n)]))
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=torch.float32)
    if a.nf4:
        with torch.no_grad():
            for name, module in model.named_modules():
                if (isinstance(module, torch.nn.Linear) and ".layers." in name
                        and not name.endswith(".gate")):  # a router stays 16-bit
                    module.weight.copy_(nf4_round_trip(module.weight))
    if a.adapter:
        import peft
        model = peft.PeftModel.from_pretrained(model, a.adapter)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=seqs[:, :t]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                                 seqs[:, 1:].reshape(-1))
    print("loss %.6f" % loss.item())
    return 0


if __name__ == "__main__":
    sys.exit(main())
