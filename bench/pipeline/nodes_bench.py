#!/usr/bin/env python3
"""Several nodes (issue 20): step time of 1, 2 and 3 nodes on the emulated paper testbed, each node
a `mobius run` with 2 emulated GPUs (GPUs 0 and 4: one behind each switch) on the CPU backend,
PCIe links and the inter-node link emulated as token buckets scaled by the same link scale, the
same global batch; measured against the plan's prediction (`mobius run` prints the planner's
predicted step, which for N > 1 nodes includes each stage's ring all-reduce on the inter-node link,
server/planner/sim/internode.h). All nodes run on this one machine, as the tests do: each node's
links are its own (its own store), so what is measured is the pipeline with the inter-node
all-reduce, PCIe-bound by construction (compute is small at this link scale).

Usage: nodes_bench.py BIN_DIR SOURCE_DIR [--nodes 1,2,3] [--steps 6] [--warmup 2] [--reps 1]
       [--link-scale 1e-3] [--internode-gbps 100] [--out FILE.json]
Prints a markdown table (docs/benchmarks.md, "Several nodes").
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

p = argparse.ArgumentParser()
p.add_argument("bin")
p.add_argument("src")
p.add_argument("--nodes", default="1,2,3")
p.add_argument("--steps", type=int, default=6)
p.add_argument("--warmup", type=int, default=2)
p.add_argument("--reps", type=int, default=1)
p.add_argument("--link-scale", default="1e-3")
p.add_argument("--internode-gbps", default="100")
p.add_argument("--global-batch", type=int, default=12)
p.add_argument("--out", default="nodes_bench.json")
a = p.parse_args()
BIN, SRC = os.path.abspath(a.bin), os.path.abspath(a.src)
TMP = tempfile.mkdtemp(prefix="mobius-nodes-bench-")
FIX = os.path.join(SRC, "test/data/topology/paper_testbed_2s_2sw_8x3090.xml")


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The pipeline benchmark's model (bench/pipeline/pipeline_bench.cc: Llama-style, 16 layers, C 256,
# 4 heads (2 KV), I 688) with the test tokenizer's vocabulary (V 700): 11.97M parameters.
sh(BIN + "/mobius-worker", "init-model", "--family", "llama", "--preset", "tiny", "--layers", "16",
   "--hidden", "256", "--heads", "4", "--kv_heads", "2", "--intermediate", "688", "--vocab", "700",
   "--out", os.path.join(TMP, "model"))
with open("/usr/share/common-licenses/GPL-3") as f:
    text = f.read()
with open(os.path.join(TMP, "gpl.jsonl"), "w") as f:
    for i in range(4):
        f.write(json.dumps({"text": text}) + "\n")
sh(BIN + "/mobius", "tokenize", os.path.join(TMP, "gpl.jsonl"), os.path.join(TMP, "data.tok"),
   "--tokenizer", os.path.join(SRC, "test/data/tokenizers/gpt2"))
spec = os.path.join(TMP, "bench.yaml")
with open(spec, "w") as f:
    f.write("""name: nodes-bench
model_dir: model
dataset: {path: data.tok}
training: {steps: %d, global_batch: %d, microbatch: 1, seq_len: 32, lr: 1e-4, grad_clip: 0}
resources: {gpus: 2}
plan: {stages: 4, mapper: cross}
""" % (a.steps, a.global_batch))


def run(nodes, rep):
    port = free_port()
    procs = []
    for r in range(nodes):
        env = dict(os.environ, MOBIUS_NODES=str(nodes), MOBIUS_NODE_RANK=str(r),
                   MOBIUS_RENDEZVOUS="127.0.0.1:%d" % port, MOBIUS_JOB_KEY="bench-%d-%d" % (nodes, rep))
        if nodes == 1:
            for k in ("MOBIUS_NODES", "MOBIUS_NODE_RANK", "MOBIUS_RENDEZVOUS"):
                env.pop(k)
        run_dir = os.path.join(TMP, "n%d-r%d-node%d" % (nodes, rep, r))
        procs.append((subprocess.Popen(
            [BIN + "/mobius", "run", spec, "--topology-file", FIX, "--gpus", "0,4", "--run-dir",
             run_dir, "--report-file", run_dir + ".jsonl", "--link-scale", a.link_scale,
             "--internode-gbps", a.internode_gbps],
            cwd=TMP, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), run_dir))
    outs = []
    for proc, run_dir in procs:
        out, err = proc.communicate(timeout=3600)
        if proc.returncode != 0:
            sys.exit("nodes=%d: exit %d\n%s" % (nodes, proc.returncode, err[-3000:]))
        outs.append((err, run_dir))
    err, run_dir = outs[0]
    m = re.search(r"predicted ([0-9.]+) s/step", err)
    with open(run_dir + ".jsonl") as f:
        reps = [json.loads(l) for l in f if l.strip()]
    timed = [r["step_seconds"] for r in reps if r["step"] > a.warmup]
    return {"nodes": nodes, "rep": rep, "predicted_s": float(m.group(1)) if m else None,
            "measured_s": statistics.median(timed), "steps": timed,
            "loss": [r["loss"] for r in reps],
            "internode_mb_per_step": statistics.mean(r.get("internode_bytes", 0) for r in reps) / 1e6,
            "h2d_mb_per_step": statistics.mean(r.get("h2d_bytes", 0) for r in reps) / 1e6}


results = []
for rep in range(a.reps):
    for n in [int(x) for x in a.nodes.split(",")]:
        t0 = time.time()
        results.append(run(n, rep))
        print("nodes %d rep %d: %.3f s measured, %s predicted (%.0f s wall)" %
              (n, rep, results[-1]["measured_s"], results[-1]["predicted_s"], time.time() - t0),
              file=sys.stderr, flush=True)
with open(a.out, "w") as f:
    json.dump({"link_scale": a.link_scale, "internode_gbps": a.internode_gbps,
               "global_batch": a.global_batch, "results": results}, f, indent=1)

one = {r["rep"]: r for r in results if r["nodes"] == 1}
print("| nodes | predicted s | measured s (median of steps) | measured / predicted | "
      "speedup vs 1 node, measured (predicted) | to other nodes MB/step per node |")
print("|---|---|---|---|---|---|")
for n in sorted({r["nodes"] for r in results}):
    rows = [r for r in results if r["nodes"] == n]
    meas = statistics.median(r["measured_s"] for r in rows)
    pred = rows[0]["predicted_s"]
    base = statistics.median(r["measured_s"] for r in one.values()) if one else None
    base_pred = next(iter(one.values()))["predicted_s"] if one else None
    print("| %d | %.3f | %.3f (%.3f-%.3f) | %.2f | %s | %.1f |" % (
        n, pred, meas, min(r["measured_s"] for r in rows), max(r["measured_s"] for r in rows),
        meas / pred, "%.2fx (%.2fx)" % (base / meas, base_pred / pred) if base else "-",
        statistics.mean(r["internode_mb_per_step"] for r in rows)))
