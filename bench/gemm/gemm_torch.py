#!/usr/bin/python3
"""PyTorch side of gemm_bench: a coprocess driven over stdin/stdout, so that the C++ benchmark can
alternate its GEMM paths and torch.matmul in one run.

Protocol (one line each way):
  version            -> "TORCH_VERSION mkldnn=yes|no"
  setup M N K        -> "ready"   (bf16 and fp32 operands A [M,K], B [K,N], normal(0,1))
  mm bf16|f32 THREADS -> "SECONDS" (torch.set_num_threads(THREADS) first; one torch.matmul)
  quit
"""
import sys
import time

import torch


def main():
    ops = {}
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "version":
            mkldnn = "yes" if torch.backends.mkldnn.is_available() else "no"
            print(f"{torch.__version__} mkldnn={mkldnn}", flush=True)
        elif words[0] == "setup":
            m, n, k = (int(w) for w in words[1:4])
            torch.manual_seed(0)
            a, b = torch.randn(m, k), torch.randn(k, n)
            ops = {"f32": (a, b), "bf16": (a.bfloat16(), b.bfloat16())}
            print("ready", flush=True)
        elif words[0] == "mm":
            a, b = ops[words[1]]
            torch.set_num_threads(int(words[2]))
            start = time.perf_counter()
            torch.matmul(a, b)
            print(f"{time.perf_counter() - start:.6f}", flush=True)
        elif words[0] == "quit":
            return


if __name__ == "__main__":
    main()
