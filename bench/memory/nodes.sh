#!/usr/bin/env bash
# Host memory of a job on several nodes at a real size (issue 20): a 0.3B Llama (bench/memory's
# model) on 2 nodes of 2 emulated GPUs each (both nodes on this machine, each its own `mobius run`,
# store and run directory) against the same per-node work on one node, each node's peak PSS of all
# its processes (pss.py: shared memory once) next to the estimate its `mobius run` prints. What
# several nodes add on a node: the rendezvous (node 0), Gloo's connections and buffers per worker.
#
#   bench/memory/nodes.sh [--out DIR]      (memory-heavy: run it alone; ~16 GiB at the peak)
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=$(pwd)
BIN=${MOBIUS_BIN:-$SRC/build/bin}
OUT=/tmp/mobius-bench-memory-nodes
[[ ${1:-} == --out ]] && OUT=$2
mkdir -p "$OUT"
FIX=$SRC/test/data/topology/paper_testbed_2s_2sw_8x3090.xml
python3 "$SRC/bench/memory/tokens.py" "$OUT/data.tok" --vocab 32000 --tokens 100000
model=$OUT/llama-0.3b
[[ -f $model/model.safetensors ]] ||
  "$BIN/mobius-worker" init-model --family llama --layers 4 --hidden 2048 --heads 16 --kv_heads 8 \
    --intermediate 5632 --vocab 32000 --out "$model" >/dev/null
spec() {  # NAME GLOBAL_BATCH
  cat >"$OUT/$1.yaml" <<YAML
name: $1
model_dir: $model
dataset: {path: $OUT/data.tok}
training: {steps: 3, global_batch: $2, microbatch: 1, seq_len: 128, lr: 1e-4}
resources: {gpus: 2, device_memory_bytes: 1GiB}
checkpoint: {dir: $OUT/ckpt-$1, every_steps: 2, keep_last: 1}
YAML
}
run() {  # TAG SPEC [env...]
  local tag=$1 spec=$2; shift 2
  env "$@" python3 "$SRC/bench/memory/pss.py" --out "$OUT/$tag.pss.json" --interval 0.25 -- \
    "$BIN/mobius" run "$OUT/$spec.yaml" --topology-file "$FIX" --gpus 0,4 --run-dir "$OUT/run-$tag" \
    --report-file "$OUT/$tag.jsonl" >"$OUT/$tag.out" 2>"$OUT/$tag.err"
}
rm -rf "$OUT"/ckpt-* "$OUT"/run-* "$OUT"/*.jsonl
cat "$model/model.safetensors" >/dev/null
spec one 2
run one one
spec two 4
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for r in 0 1; do
  run "two-node$r" two MOBIUS_NODES=2 MOBIUS_NODE_RANK=$r MOBIUS_RENDEZVOUS=127.0.0.1:$port &
done
wait
python3 - "$OUT" <<'PY'
import json, re, sys
out = sys.argv[1]
print("| run | peak PSS GiB | estimate GiB | peak / estimate | workers' anonymous PSS MiB (each) | exit |")
print("|---|---|---|---|---|---|")
for tag in ("one", "two-node0", "two-node1"):
    p = json.load(open("%s/%s.pss.json" % (out, tag)))
    err = open("%s/%s.err" % (out, tag)).read()
    est = float(re.search(r"host memory estimate ([0-9.]+) GiB", err).group(1))
    peak = p["peak"]["pss_bytes"] / 2**30
    anon = [q["pss_anon_bytes"] / 2**20 for q in p["peak"]["processes"]
            if "mobius-worker run" in (q.get("cmdline") or "")]
    print("| %s | %.2f | %.2f | %.2f | %s | %d |" % (tag, peak, est, peak / est,
          ", ".join("%.0f" % a for a in anon), p["exit_code"]))
PY
