#!/usr/bin/env python3
"""Golden data for the NF4 codec (common/numeric/nf4.h) from bitsandbytes itself, on the CPU.

bitsandbytes.functional.quantize_4bit(bf16 tensor, quant_type="nf4", blocksize=64,
compress_statistics=True): the 4-bit codes packed two per byte, the per-block absmax
double-quantised (offset = their mean, then 8-bit blockwise with the signed dynamic map, blocks
of 256), as QLoRA checkpoints store them. Writes golden_nf4/nf4.json: bitsandbytes' version, the
NF4 and dynamic code tables, and for each case the bf16 input bits, the packed bytes, the absmax
codes, the second-level absmax, the offset and the dequantized values (fp32, and bitsandbytes'
bf16 output bits).

Run (bitsandbytes >= 0.46 runs on the CPU; with a torch that has a CPU build):
  python3 make_nf4_golden.py
"""
import json
import os

import bitsandbytes
import bitsandbytes.functional as F
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def bits(t):
    return t.contiguous().reshape(-1).view(torch.int16).to(torch.int32).bitwise_and(0xFFFF).tolist()


def f32(t):
    return [float(x) for x in t.float().reshape(-1).tolist()]


def case(name, x):
    x = x.to(torch.bfloat16)
    q, s = F.quantize_4bit(x, quant_type="nf4", blocksize=64, compress_statistics=True)
    absmax = F.dequantize_blockwise(s.absmax, s.state2) + s.offset
    out_bf16 = F.dequantize_4bit(q, s)
    return {"name": name, "shape": list(x.shape), "input_bf16": bits(x),
            "packed": q.reshape(-1).tolist(), "absmax_codes": s.absmax.reshape(-1).tolist(),
            "absmax_scales": f32(s.state2.absmax), "offset": float(s.offset),
            "absmax": f32(absmax), "dequantized_bf16": bits(out_bf16)}


def main():
    g = torch.Generator().manual_seed(5)
    cases = [
        case("normal_64x128", torch.randn(64, 128, generator=g) * 0.02),
        case("heavy_tail_300x70", torch.randn(300, 70, generator=g) ** 3),
        case("odd_length_1001", torch.randn(1001, generator=g)),
        case("zero_block_and_outlier", torch.cat([torch.zeros(64), torch.randn(190, generator=g),
                                                  torch.tensor([40.0])])),
        case("two_absmax_blocks_96x256", torch.randn(96, 256, generator=g) * 0.05),
    ]
    out = {"bitsandbytes": bitsandbytes.__version__, "torch": torch.__version__,
           "nf4_code": f32(F.get_4bit_type("nf4", device="cpu")),
           "dynamic_code": f32(F.create_dynamic_map(signed=True)), "cases": cases}
    os.makedirs(os.path.join(HERE, "golden_nf4"), exist_ok=True)
    with open(os.path.join(HERE, "golden_nf4", "nf4.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
