#!/usr/bin/python3
"""PyTorch side of adamw_bench: a coprocess driven over stdin/stdout, so that the C++ benchmark can
alternate our step, PyTorch's step and the triad in one run.

Protocol (one line each way):
  setup PARAMS TENSORS  -> "ready TORCH_VERSION fused=yes|no"
  step THREADS          -> "STEP_SECONDS COPY_SECONDS"  (torch.set_num_threads(THREADS) first)
  quit
The same work as ours: AdamW (foreach=True) over TENSORS fp32 tensors with grads, then the bf16
copy of every parameter (tensor.copy_ into a preallocated bf16 tensor).
"""
import inspect
import sys
import time

import torch


def main():
    params, bf16, opt = [], [], None
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "setup":
            total, count = int(words[1]), int(words[2])
            per = total // count
            torch.manual_seed(0)
            for i in range(count):
                n = per if i < count - 1 else total - per * (count - 1)
                p = torch.nn.Parameter(torch.randn(n, dtype=torch.float32))
                p.grad = torch.randn(n, dtype=torch.float32)
                params.append(p)
                bf16.append(torch.empty(n, dtype=torch.bfloat16))
            opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                    weight_decay=0.01, foreach=True)
            fused = "fused" in inspect.signature(torch.optim.AdamW.__init__).parameters
            print(f"ready {torch.__version__} fused={'yes' if fused else 'no'}", flush=True)
        elif words[0] == "step":
            torch.set_num_threads(int(words[1]))
            start = time.perf_counter()
            with torch.no_grad():
                opt.step()
                mid = time.perf_counter()
                for b, p in zip(bf16, params):
                    b.copy_(p)
            end = time.perf_counter()
            print(f"{mid - start:.6f} {end - mid:.6f}", flush=True)
        elif words[0] == "quit":
            return


if __name__ == "__main__":
    main()
