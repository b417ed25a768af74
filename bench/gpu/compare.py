#!/usr/bin/env python3
"""Side-by-side table of bench/gpu results: ours (gpu_bench) vs PyTorch (torch_bench.py).

    python3 compare.py RESULTS_DIR > table.md

Reads RESULTS_DIR/mobius_*.jsonl and RESULTS_DIR/torch_*.jsonl, one file per process run (the runs
alternate: mobius, torch, mobius, torch, ...). Per case and implementation: the median over runs
of each run's per-call median, and the spread (min..max of the run medians). ratio = torch ms /
mobius ms: above 1 we are faster. Throughput: TFLOP/s for GEMM and attention, GB/s for the
bandwidth-bound ops (bytes as gpu_bench counts them, for both implementations). One summary line
per GEMM op (bf16; fp16 with fp32 accumulation; fp16 with fp16 accumulation, whose TFLOP/s against
gemm_fp16_nt's shows what the mode buys on that GPU).
"""
import glob
import json
import os
import statistics
import sys


def load(pattern):
    runs, meta = [], []
    for path in sorted(glob.glob(pattern)):
        run = {}
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                rec = json.loads(line)
                if "key" in rec:
                    run[rec["key"]] = rec
                else:
                    meta.append(rec)
        runs.append(run)
    return runs, meta


def summary(runs, key):
    recs = [r[key] for r in runs if key in r]
    ok = [r["ms"] for r in recs if "ms" in r]
    errors = [r["error"] for r in recs if "error" in r]
    notes = sorted({r["note"] for r in recs if "note" in r})
    if not ok:
        return None, errors[0] if errors else "missing", notes
    return (statistics.median(ok), min(ok), max(ok), recs[0]), None, notes


def rate(rec, ms):
    if rec.get("flops"):
        return f"{rec['flops'] / ms / 1e9:.1f} TFLOP/s"
    if rec.get("bytes"):
        return f"{rec['bytes'] / ms / 1e6:.0f} GB/s"
    return ""


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: compare.py RESULTS_DIR")
    d = sys.argv[1]
    ours, ours_meta = load(os.path.join(d, "mobius_*.jsonl"))
    theirs, theirs_meta = load(os.path.join(d, "torch_*.jsonl"))
    for m in ours_meta[:1] + theirs_meta[:1]:
        print("- " + ", ".join(f"{k}: {v}" for k, v in m.items()))
    print(f"- runs: {len(ours)} x gpu_bench, {len(theirs)} x torch_bench, alternating\n")
    print("| case | mobius ms (spread) | torch ms (spread) | torch/mobius | mobius | torch | notes |")
    print("|---|---|---|---|---|---|---|")
    keys = []
    for run in ours + theirs:
        keys += [k for k in run if k not in keys]
    gemm_ratios = {}  # GEMM op -> torch/mobius ratios
    for key in keys:
        a, a_err, _ = summary(ours, key)
        b, b_err, notes = summary(theirs, key)
        cells = [key]
        for s, err in ((a, a_err), (b, b_err)):
            cells.append(f"{s[0]:.4f} ({s[1]:.4f}..{s[2]:.4f})" if s else f"error: {err}")
        ratio = b[0] / a[0] if a and b else None
        cells.append(f"{ratio:.2f}" if ratio else "")
        rec = (a or b or (None, None, None, {}))[3]
        cells.append(rate(rec, a[0]) if a else "")
        cells.append(rate(rec, b[0]) if b else "")
        cells.append("; ".join(notes))
        print("| " + " | ".join(cells) + " |")
        if ratio and key.startswith("gemm_"):
            gemm_ratios.setdefault(key.split()[0], []).append(ratio)
    titles = {
        "gemm_bf16_nt": "bf16 GEMM through cuBLASLt vs torch.matmul (F.linear)",
        "gemm_fp16_nt": "fp16 GEMM (fp32 accumulation) through cuBLASLt vs F.linear",
        "gemm_fp16_nt_hacc": "fp16 GEMM (fp16 accumulation, half_accumulate) through cuBLASLt vs "
                             "F.linear with allow_fp16_accumulation",
    }
    if gemm_ratios:
        print()
    for op, ratios in gemm_ratios.items():
        print(f"{titles.get(op, op)}: geometric-mean ratio {statistics.geometric_mean(ratios):.3f}, "
              f"worst {min(ratios):.3f} (target: >= 0.85)")


if __name__ == "__main__":
    main()
