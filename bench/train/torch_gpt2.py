#!/usr/bin/python3
"""PyTorch CPU baseline for bench/train: a plain nn.Module GPT-2 trained with torch.optim.AdamW.

Same shape of work as `mobius-worker train --standalone` on the same config: B sequences of T
tokens per optimizer step (no microbatching), forward + cross-entropy + backward + grad-norm
clipping + AdamW. Prints one line: `torch tok/s MEDIAN (min MIN, max MAX) over N steps, precision`.

Usage: torch_gpt2.py --layers 4 --hidden 256 --heads 8 --vocab 8192 --seq 256 --batch 8
                     --steps 12 --warmup_steps 2 --threads 2 [--precision bf16|fp32]
"""
import argparse
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.ln_1 = nn.LayerNorm(c)
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c)
        self.c_fc = nn.Linear(c, 4 * c)
        self.mlp_proj = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.h))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, layers, c, h, vocab, positions):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(positions, c)
        self.h = nn.ModuleList(Block(c, h) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head, as GPT-2
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    p = argparse.ArgumentParser()
    for name, default in [("layers", 4), ("hidden", 256), ("heads", 8), ("vocab", 8192),
                          ("seq", 256), ("batch", 8), ("steps", 12), ("warmup_steps", 2),
                          ("threads", 2)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    model = GPT2(a.layers, a.hidden, a.heads, a.vocab, a.seq)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=3e-4,
                            betas=(0.9, 0.95), eps=1e-8)
    # bf16 autocast on the CPU where this torch supports it (1.10+): matmuls in bf16, like ours.
    precision = a.precision
    if precision == "bf16":
        try:
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                pass
        except Exception:  # noqa: BLE001 - older torch: fall back and say so
            precision = "fp32"
    rates = []
    for step in range(a.warmup_steps + a.steps):
        idx = torch.randint(0, a.vocab, (a.batch, a.seq + 1))
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16,
                            enabled=precision == "bf16"):
            loss = model(idx[:, :-1], idx[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        elapsed = time.perf_counter() - start
        if step >= a.warmup_steps:
            rates.append(a.batch * a.seq / elapsed)
    print(f"torch tok/s {statistics.median(rates):.0f} (min {min(rates):.0f}, max {max(rates):.0f})"
          f" over {len(rates)} steps, {precision}, {a.threads} threads, torch {torch.__version__}")


if __name__ == "__main__":
    main()
