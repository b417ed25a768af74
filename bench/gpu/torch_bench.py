#!/usr/bin/env python3
"""PyTorch baseline for bench/gpu/gpu_bench.cc: the same cases, timed the same way, on the same GPU.

    python3 torch_bench.py CASES.jsonl > torch.jsonl

CASES.jsonl is `gpu_bench --list`. For each case: 3 warm-up calls, then 7 windows of `iters` calls
timed with CUDA events; "ms" is the per-call median over the windows, ms_min/ms_max the spread. One
JSON line per case, {"impl": "torch", "key": ..., "ms": ...} (an "error" field instead when the
case cannot run). Eager PyTorch, no torch.compile: the baseline a user gets by default.

The fp16 GEMM cases: gemm_fp16_nt is F.linear in fp16 with fp32 accumulation (no reduced-precision
reductions), gemm_fp16_nt_hacc the same with torch.backends.cuda.matmul.allow_fp16_accumulation
(PyTorch >= 2.7: cuBLAS accumulates in fp16, as our half_accumulate), set for that case only; an
older torch reports the case as an error naming its version.
"""
import contextlib
import json
import sys

import torch
import torch.nn.functional as F

ITERS = {  # calls per timed window, as gpu_bench.cc
    "gemm_bf16_nt": 20, "gemm_fp16_nt": 20, "gemm_fp16_nt_hacc": 20, "attention_fwd": 3, "attention_fwd_reference": 3, "attention_fwd_bwd": 2,
    "attention_fwd_bwd_reference": 2, "attention_fwd_wmma": 3,
    "layernorm_fwd": 50, "rmsnorm_fwd": 50, "gelu_fwd": 50, "swiglu_fwd": 50, "cross_entropy_fwd_bwd": 5,
    "adamw_step": 10, "copy_d2d": 10, "copy_h2d_pinned": 5, "copy_d2h_pinned": 5,
    "copy_duplex_pinned": 5,
}
NOTES = {}


def time_it(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    per_call = []
    for _ in range(7):
        start.record()
        for _ in range(iters):
            fn()
        stop.record()
        stop.synchronize()
        per_call.append(start.elapsed_time(stop) / iters)
    per_call.sort()
    return per_call[len(per_call) // 2], per_call[0], per_call[-1]


def bf16(*shape):
    return (torch.rand(*shape, device="cuda") - 0.5).mul_(2).to(torch.bfloat16)


def fp16(*shape):
    return (torch.rand(*shape, device="cuda") - 0.5).mul_(2).to(torch.float16)


@contextlib.contextmanager
def fp16_accumulation(on):
    """torch.backends.cuda.matmul.allow_fp16_accumulation = on for the block (torch >= 2.7)."""
    matmul = torch.backends.cuda.matmul
    if not on:
        yield
        return
    if not hasattr(matmul, "allow_fp16_accumulation"):
        raise RuntimeError(f"torch {torch.__version__} has no "
                           "torch.backends.cuda.matmul.allow_fp16_accumulation (needs >= 2.7)")
    before = matmul.allow_fp16_accumulation
    matmul.allow_fp16_accumulation = True
    try:
        yield
    finally:
        matmul.allow_fp16_accumulation = before


def make(op, p):
    """Returns the callable that does one call of the case."""
    if op == "gemm_bf16_nt":
        x, w = bf16(p["m"], p["k"]), bf16(p["n"], p["k"])
        return lambda: F.linear(x, w)
    if op in ("gemm_fp16_nt", "gemm_fp16_nt_hacc"):  # the accumulation: main's fp16_accumulation
        x, w = fp16(p["m"], p["k"]), fp16(p["n"], p["k"])
        return lambda: F.linear(x, w)
    if op in ("attention_fwd", "attention_fwd_reference", "attention_fwd_wmma",
              "attention_fwd_bwd", "attention_fwd_bwd_reference"):
        b, t, h, kv, hd = p["b"], p["t"], p["h"], p["kv"], p["hd"]
        # Our layout [B, T, H, hd] viewed as torch's [B, H, T, hd].
        q = bf16(b, t, h, hd).transpose(1, 2)
        k = bf16(b, t, kv, hd).transpose(1, 2)
        v = bf16(b, t, kv, hd).transpose(1, 2)
        kwargs = {"is_causal": True}
        if h != kv:
            try:
                F.scaled_dot_product_attention(q[:, :, :8], k[:, :, :8], v[:, :, :8],
                                               is_causal=True, enable_gqa=True)
                kwargs["enable_gqa"] = True
            except TypeError:  # torch < 2.5: repeat the kv heads once, outside the timing
                k = k.repeat_interleave(h // kv, dim=1)
                v = v.repeat_interleave(h // kv, dim=1)
                NOTES[op] = "kv heads repeated outside the timing (torch < 2.5)"
        if not op.startswith("attention_fwd_bwd"):  # our reference forward against SDPA as well
            return lambda: F.scaled_dot_product_attention(q, k, v, **kwargs)
        q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
        dout = bf16(b, h, t, hd)

        def fwd_bwd():  # new gradients each call (ours accumulate into existing buffers)
            out = F.scaled_dot_product_attention(q, k, v, **kwargs)
            out.backward(dout)
            q.grad = k.grad = v.grad = None
        return fwd_bwd
    if op == "layernorm_fwd":
        x, w, bias = bf16(p["n"], p["c"]), bf16(p["c"]), bf16(p["c"])
        return lambda: F.layer_norm(x, (p["c"],), w, bias, 1e-5)
    if op == "rmsnorm_fwd":
        x, w = bf16(p["n"], p["c"]), bf16(p["c"])
        if hasattr(F, "rms_norm"):
            return lambda: F.rms_norm(x, (p["c"],), w, 1e-5)
        NOTES[op] = "LlamaRMSNorm in eager ops (no F.rms_norm in this torch)"

        def rms():
            xf = x.float()
            return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype)
        return rms
    if op == "gelu_fwd":
        x = bf16(p["n"])
        return lambda: F.gelu(x, approximate="tanh")
    if op == "swiglu_fwd":
        g, u = bf16(p["n"]), bf16(p["n"])
        return lambda: F.silu(g) * u
    if op == "cross_entropy_fwd_bwd":
        logits = bf16(p["n"], p["v"]).requires_grad_()
        targets = (torch.arange(p["n"], device="cuda") * 7919) % p["v"]

        def ce():
            F.cross_entropy(logits, targets).backward()
            logits.grad = None
        return ce
    if op == "adamw_step":
        param = torch.nn.Parameter((torch.rand(p["n"], device="cuda") - 0.5) * 2)
        param.grad = (torch.rand(p["n"], device="cuda") - 0.5) * 2
        copy = torch.empty(p["n"], device="cuda", dtype=torch.bfloat16)
        try:
            opt = torch.optim.AdamW([param], lr=1e-4, weight_decay=0.1, fused=True)
        except (TypeError, RuntimeError):
            opt = torch.optim.AdamW([param], lr=1e-4, weight_decay=0.1, foreach=True)
            NOTES[op] = "foreach AdamW (no fused AdamW in this torch)"

        def step():
            opt.step()
            copy.copy_(param.detach())  # the bf16 copy our kernel writes too
        return step
    if op == "copy_d2d":
        a = torch.ones(p["bytes"], dtype=torch.uint8, device="cuda")
        b = torch.empty_like(a)
        return lambda: b.copy_(a)
    if op in ("copy_h2d_pinned", "copy_d2h_pinned"):
        h = torch.ones(p["bytes"], dtype=torch.uint8).pin_memory()
        d = torch.empty(p["bytes"], dtype=torch.uint8, device="cuda")
        if op == "copy_h2d_pinned":
            return lambda: d.copy_(h, non_blocking=True)
        return lambda: h.copy_(d, non_blocking=True)
    if op == "copy_duplex_pinned":  # as gpu_bench: H2D on the current stream, D2H on another
        h_in = torch.ones(p["bytes"], dtype=torch.uint8).pin_memory()
        h_out = torch.empty(p["bytes"], dtype=torch.uint8).pin_memory()
        d_in = torch.empty(p["bytes"], dtype=torch.uint8, device="cuda")
        d_out = torch.ones(p["bytes"], dtype=torch.uint8, device="cuda")
        other = torch.cuda.Stream()

        def duplex():
            main = torch.cuda.current_stream()
            other.wait_stream(main)
            d_in.copy_(h_in, non_blocking=True)
            with torch.cuda.stream(other):
                h_out.copy_(d_out, non_blocking=True)
            main.wait_stream(other)
        return duplex
    raise ValueError("unknown op " + op)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: torch_bench.py CASES.jsonl")
    if not torch.cuda.is_available():
        sys.exit("torch_bench: torch sees no CUDA device")
    # Same arithmetic as ours: fp32 accumulation, no reduced-precision split-K reductions, no TF32
    # (fp16 accumulation only where a case asks for it: gemm_fp16_nt_hacc).
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_tf32 = False
    print(json.dumps({"impl": "torch", "torch": torch.__version__, "cuda": torch.version.cuda,
                      "device": torch.cuda.get_device_name(0)}), flush=True)
    with open(sys.argv[1]) as f:
        cases = [json.loads(line) for line in f if line.strip()]
    for case in cases:
        rec = {"impl": "torch", "key": case["key"], "op": case["op"], "params": case["params"]}
        try:
            fn = make(case["op"], case["params"])
            with fp16_accumulation(case["op"].endswith("_hacc")):
                rec["ms"], rec["ms_min"], rec["ms_max"] = time_it(fn, ITERS[case["op"]])
            if case["op"] in NOTES:
                rec["note"] = NOTES[case["op"]]
        except Exception as e:  # one failing case must not lose the others
            rec["error"] = f"{type(e).__name__}: {e}"
        print(json.dumps(rec), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
