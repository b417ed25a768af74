#!/usr/bin/env python3
"""Turns bench/memory/run.sh's raw files into DIR/results.json, DIR/results.md (the table for
docs/benchmarks.md) and DIR/bytes_per_param.png (when matplotlib is there).

  analyze.py DIR
"""
import glob
import json
import os
import re
import sys

GIB = 1 << 30
d = sys.argv[1]
with open(os.path.join(d, "baselines.json")) as f:
    base = json.load(f)


def params_of(model_dir):
    """Every parameter of the model: the element counts of its safetensors header (every family,
    a mixture of experts' experts included)."""
    import struct
    total = 0
    for path in glob.glob(os.path.join(model_dir, "*.safetensors")):
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        for name, t in header.items():
            if name != "__metadata__":
                count = 1
                for dim in t["shape"]:
                    count *= dim
                total += count
    return total


rows = []
for spec in sorted(glob.glob(os.path.join(d, "*-g*.yaml"))):
    tag = os.path.basename(spec)[:-5]
    size, n = tag.split("-g")
    row = {"model": size, "gpus": int(n)}
    row["mode"] = "LoRA" if "adapter:" in open(spec).read() else "full"
    model_dir = os.path.join(d, "model-" + size)
    row["parameters"] = params_of(model_dir)
    with open(os.path.join(d, tag + ".rc")) as f:
        row["exit"] = int(f.read())
    err = open(os.path.join(d, tag + ".err")).read()
    with open(os.path.join(d, tag + ".cache")) as f:
        row["page_cache"] = f.read().strip()
    m = re.search(r"host memory estimate ([0-9.]+) GiB \(store ([0-9.]+) GiB, worker processes "
                  r"([0-9.]+) GiB(?:, emulated GPUs ([0-9.]+) GiB)?\)", err)
    if m:
        row["estimate_gib"] = float(m.group(1))
        row["estimate_emulated_gib"] = float(m.group(4) or 0)
    if row["exit"] != 0:
        row["refused"] = err.strip().splitlines()[-1][:300] if err.strip() else "exit %d" % row["exit"]
        rows.append(row)
        continue
    with open(os.path.join(d, tag + ".pss.json")) as f:
        peak = json.load(f)["peak"]
    row["peak_gib"] = peak["pss_bytes"] / GIB
    row["workers"] = sum(1 for p in peak["processes"] if p["comm"] == "mobius-worker")
    log = open(os.path.join(d, "run-" + tag, "workers.log")).read()
    dev = [float(x) for x in re.findall(r"device memory peak ([0-9.]+) MB", log)]
    row["device_peak_gib"] = sum(dev) * 1e6 / GIB
    fills = [(float(a), float(b)) for a, b in re.findall(r"filled its share [^\n]*?([0-9.]+) MB read in ([0-9.]+) s", log)]
    if fills:
        row["fill_mb"] = sum(a for a, _ in fills)
        row["fill_seconds"] = max(b for _, b in fills)
        row["fill_mb_s"] = row["fill_mb"] / row["fill_seconds"]
    shares = re.findall(r"wrote its share of the step-(\d+) checkpoint: ([0-9.]+) MB in ([0-9.]+) s", log)
    finishes = [float(x) for x in re.findall(r"complete \([0-9.]+ MB; fsync, checksums, rename ([0-9.]+) s\)", log)]
    by_step = {}
    for step, mb, s in shares:
        e = by_step.setdefault(int(step), [0.0, 0.0])
        e[0] += float(mb)
        e[1] = max(e[1], float(s))
    if by_step:
        first = by_step[min(by_step)]
        row["checkpoint_mb"] = first[0]
        row["checkpoint_write_mb_s"] = first[0] / first[1]
        row["checkpoint_write_seconds"] = first[1]
        if finishes:
            row["checkpoint_finish_seconds"] = finishes[0]
    steps = [float(x) for x in re.findall(r"\| ([0-9]+) ms \|", open(os.path.join(d, tag + ".out")).read())]
    row["step_ms"] = steps
    p = row["parameters"]
    row["bytes_per_param"] = peak["pss_bytes"] / p
    row["bytes_per_param_less_devices"] = (peak["pss_bytes"] - sum(dev) * 1e6) / p
    if "estimate_gib" in row:
        row["estimate_ratio"] = row["estimate_gib"] / row["peak_gib"]
    rows.append(row)

standalone = []
for path in sorted(glob.glob(os.path.join(d, "*-standalone.pss.json"))):
    size = os.path.basename(path).split("-standalone")[0]
    with open(path) as f:
        s = json.load(f)
    p = params_of(os.path.join(d, "model-" + size))
    standalone.append({"model": size, "parameters": p, "exit": s["exit_code"],
                       "peak_gib": s["peak"]["pss_bytes"] / GIB,
                       "bytes_per_param": s["peak"]["pss_bytes"] / p})

with open(os.path.join(d, "results.json"), "w") as f:
    json.dump({"baselines": base, "runs": rows, "standalone": standalone}, f, indent=2)

lines = ["| model | GPUs (workers) | peak PSS GiB | B/param | B/param less emulated GPUs | estimate GiB | estimate / measured | fill MB/s (input) | checkpoint write MB/s | checkpoint complete s |",
         "|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    label = "%s (%.2fB)%s" % (r["model"], r["parameters"] / 1e9,
                              ", LoRA" if r["mode"] == "LoRA" else "")
    if "refused" in r:
        lines.append("| %s | %d | refused before any worker: estimate %s GiB | | | | | | | |" % (
            label, r["gpus"], r.get("estimate_gib", "?")))
        continue
    lines.append("| %s | %d (%d) | %.2f | %.1f | %.1f | %.2f | %.2f | %s | %s | %s |" % (
        label, r["gpus"], r["workers"], r["peak_gib"], r["bytes_per_param"], r["bytes_per_param_less_devices"],
        r.get("estimate_gib", 0), r.get("estimate_ratio", 0),
        "%.0f (%s)" % (r["fill_mb_s"], r["page_cache"]) if "fill_mb_s" in r else "",
        "%.0f" % r["checkpoint_write_mb_s"] if "checkpoint_write_mb_s" in r else "",
        "%.1f + %.1f" % (r["checkpoint_write_seconds"], r.get("checkpoint_finish_seconds", 0))
        if "checkpoint_write_seconds" in r else ""))
lines.append("")
for r in standalone:
    lines.append("Standalone trainer, %s (%.2fB): peak PSS %.2f GiB = %.1f B/param%s." % (
        r["model"], r["parameters"] / 1e9, r["peak_gib"], r["bytes_per_param"],
        "" if r["exit"] == 0 else " (exit %d)" % r["exit"]))
lines.append("")
lines.append("Baselines, same run: fresh memfd pages written %d MB/s (%d MB/s after "
             "MADV_POPULATE_WRITE), page-cache read %d MB/s, write + fdatasync %d MB/s." % (
                 base["memfd_first_write_mb_s"], base["memfd_populate_write_mb_s"],
                 base["read_page_cache_mb_s"], base["write_fdatasync_mb_s"]))
with open(os.path.join(d, "results.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("(no matplotlib: no plot)", file=sys.stderr)
    sys.exit(0)
fig, ax = plt.subplots(figsize=(6, 4))
for model in sorted({r["model"] for r in rows}):
    ok = [r for r in rows if r["model"] == model and "refused" not in r]
    if not ok:
        continue
    g = [r["gpus"] for r in ok]
    ax.plot(g, [r["bytes_per_param"] for r in ok], "o-", label="%s: all processes" % model)
    ax.plot(g, [r["bytes_per_param_less_devices"] for r in ok], "s--",
            label="%s: less emulated GPU memory" % model)
    ax.plot(g, [r["estimate_gib"] * GIB / r["parameters"] for r in ok], "x:",
            label="%s: planner estimate" % model)
ax.axhline(18, color="grey", lw=0.8)
ax.set_xlabel("emulated GPUs (workers)")
ax.set_ylabel("peak host memory, bytes / parameter")
ax.set_xscale("log", base=2)
ax.set_xticks([1, 2, 4, 8])
ax.set_xticklabels(["1", "2", "4", "8"])
ax.legend(fontsize=7)
ax.grid(alpha=0.3)
fig.tight_layout()
fig.savefig(os.path.join(d, "bytes_per_param.png"), dpi=120)
print("plot: " + os.path.join(d, "bytes_per_param.png"), file=sys.stderr)
