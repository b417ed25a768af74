#!/usr/bin/python3
"""Writes adamw_golden.txt: torch.optim.AdamW trajectories that adamw_test.cc must reproduce.

Run with Debian's PyTorch (python3-torch, 1.13): /usr/bin/python3 make_adamw_golden.py [OUT]
Floats are written as exact hexadecimal (float.hex of the float32 value), read back with strtof.

File format, one record per line, whitespace separated:
  case NAME LR BETA1 BETA2 EPS WEIGHT_DECAY MAX_NORM N STEPS   (MAX_NORM 0: no clipping)
  init  x[0..N)                      initial parameters
  grad  STEP g[0..N)                 raw gradient of step STEP (1-based), before clipping
  param STEP p[0..N)                 parameters after step STEP
"""
import os
import sys

import torch

CASES = [
    # name, lr, beta1, beta2, eps, weight_decay, max_norm, n, steps, foreach
    ("defaults_wd", 1e-3, 0.9, 0.999, 1e-8, 0.01, 0.0, 37, 10, False),
    ("foreach_high_lr", 5e-2, 0.8, 0.99, 1e-6, 0.1, 0.0, 37, 10, True),
    ("clipped_no_wd", 1e-2, 0.9, 0.95, 1e-8, 0.0, 0.5, 37, 10, True),
]


def hexes(t):
    return " ".join(float(x).hex() for x in t.tolist())


def run_case(out, name, lr, beta1, beta2, eps, wd, max_norm, n, steps, foreach):
    gen = torch.Generator().manual_seed(1234 + len(name))
    param = torch.nn.Parameter(torch.randn(n, generator=gen, dtype=torch.float32))
    opt = torch.optim.AdamW([param], lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=wd,
                            foreach=foreach)
    out.write(f"case {name} {lr!r} {beta1!r} {beta2!r} {eps!r} {wd!r} {max_norm!r} {n} {steps}\n")
    out.write(f"init {hexes(param.detach())}\n")
    for step in range(1, steps + 1):
        grad = torch.randn(n, generator=gen, dtype=torch.float32) * (0.5 + step / 4)
        out.write(f"grad {step} {hexes(grad)}\n")
        param.grad = grad.clone()
        if max_norm > 0:
            torch.nn.utils.clip_grad_norm_([param], max_norm)
        opt.step()
        out.write(f"param {step} {hexes(param.detach())}\n")


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "adamw_golden.txt")
    torch.set_num_threads(1)
    with open(path, "w") as out:
        out.write(f"# torch.optim.AdamW golden values from make_adamw_golden.py, torch {torch.__version__}\n")
        for case in CASES:
            run_case(out, *case)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
