#!/usr/bin/env python3
"""Markdown table of the end-to-end training records (bench == "train") in DIR/*.jsonl.

    python3 train_table.py DIR

Rows from torch_train.py (impl torch / roundpipe) and from the Mobius binary (impl mobius) share
one schema (README.md, "End-to-end training"). Per row: tokens/s, MFU (computed here with
train_flops.py when a record leaves it out but carries layers/hidden and a known GPU), step time
median (min..max), peak device memory / cap, status and reason, and "mobius x": the mobius/mobius
row's tokens/s over this row's for the same model (> 1: ours faster; "-" without both).
Several records of one (model, impl, mode) are all shown, in file order. Stdlib only.
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_flops  # noqa: E402

MODEL_ORDER = ["tiny-gpt2", "tiny-llama", "gpt2-124m", "llama-1b", "llama-long"]
IMPL_ORDER = ["mobius", "torch", "roundpipe"]


def load(d):
    rows = []
    for path in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    print(f"warning: {path}:{n}: not JSON, skipped", file=sys.stderr)
                    continue
                if isinstance(r, dict) and r.get("bench") == "train":
                    rows.append(r)
    return rows


def num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def fill_mfu(r):
    if num(r.get("mfu")) is not None or not num(r.get("tokens_per_s")):
        return num(r.get("mfu"))
    if all(num(r.get(k)) for k in ("params", "layers", "hidden", "seq")):
        m, _ = train_flops.mfu(r["tokens_per_s"], r["params"], r["layers"], r["hidden"],
                               r["seq"], r.get("gpu", ""))
        return m
    return None


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def key(r):
    m, i = r.get("model", ""), r.get("impl", "")
    return (MODEL_ORDER.index(m) if m in MODEL_ORDER else len(MODEL_ORDER), m,
            IMPL_ORDER.index(i) if i in IMPL_ORDER else len(IMPL_ORDER), i, r.get("mode", ""))


def table(rows):
    ours = {}
    for r in rows:
        if (r.get("impl"), r.get("mode"), r.get("status")) == ("mobius", "mobius", "ok") and \
                num(r.get("tokens_per_s")):
            ours.setdefault(r.get("model"), r["tokens_per_s"])
    out = ["| model | impl | mode | B x T (micro) | tokens/s | MFU | step s median (min..max) | "
           "predicted s (profile) | peak GiB / cap | mobius x | status |",
           "|---|---|---|---|---:|---:|---|---|---|---:|---|"]
    for r in sorted(rows, key=key):
        tps = num(r.get("tokens_per_s"))
        mfu = fill_mfu(r)
        med, lo, hi = (num(r.get(k)) for k in ("step_s_median", "step_s_min", "step_s_max"))
        step = "-" if med is None else f"{med:.3f} ({fmt(lo, '.3f')}..{fmt(hi, '.3f')})"
        pred = num(r.get("predicted_step_s"))  # mobius rows: the plan's simulated step
        predicted = "-" if pred is None else f"{pred:.3f} ({r.get('profile', '?')})"
        if pred is not None and med:
            predicted += f", measured/predicted {med / pred:.2f}"
        peak, cap = num(r.get("peak_device_gib")), num(r.get("cap_gib"))
        mem = f"{fmt(peak, '.1f')} / {fmt(cap, 'g') if cap else 'none'}"
        ref = ours.get(r.get("model"))
        ratio = f"{ref / tps:.2f}" if ref and tps and r.get("impl") != "mobius" else "-"
        status = r.get("status", "?")
        reason = str(r.get("reason", "") or "").replace("|", "/").replace("\n", " ")
        if reason:
            status += ": " + reason[:160]
        shape = f"{r.get('batch', '?')} x {r.get('seq', '?')} ({r.get('microbatch', '?')})"
        out.append(f"| {r.get('model', '?')} | {r.get('impl', '?')} | {r.get('mode', '?')} | "
                   f"{shape} | {fmt(tps, ',.0f')} | {fmt(None if mfu is None else 100 * mfu, '.1f')}"
                   f"{'%' if mfu is not None else ''} | {step} | {predicted} | {mem} | {ratio} | {status} |")
    gpus = sorted(set(r.get("gpu", "") for r in rows if r.get("gpu")))
    notes = [f"GPU: {', '.join(gpus) or 'none'}; MFU = tokens/s x (6 params + 12 layers hidden "
             "seq) / bf16 dense peak (train_flops.py); mobius x = mobius tokens/s / row tokens/s "
             "(> 1: ours faster)."]
    return "\n".join(out + [""] + notes)


def main(argv):
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    rows = load(argv[0])
    if not rows:
        print(f"no bench == \"train\" records in {argv[0]}/*.jsonl")
        return 0
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
