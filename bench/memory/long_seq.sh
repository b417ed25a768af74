#!/usr/bin/env bash
# Long sequences on the CPU backend (issue 30): a ~53M-parameter Llama with a 100,000-token
# vocabulary trained at 32,768 tokens per sequence by `mobius run` on 2 emulated GPUs whose memory
# cap is far below what the unchunked head needs, next to the standalone trainer on the same
# model, data and cap (the pipeline's oracle), with the host memory of every process of the job
# (pss.py: PSS, shared memory once) against the planner's estimate.
#
#   bench/memory/long_seq.sh [--seq 32768] [--cap 1536MiB] [--steps 2] [--out DIR]
#
# Steps, in one run: (1) the unchunked path (--chunk_tokens -1) refused at the cap, with the
# bytes it would need; (2) `mobius plan` of the job (its estimate, the longest sequence);
# (3) the standalone trainer, chunked by default; (4) `mobius run` of the same job under pss.py.
# Writes DIR/summary.md (losses side by side, peak PSS, the estimate) and the logs. CPU-heavy
# (2 cores: ~4 minutes per step of 2 x 32K tokens for each trainer); run it alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=$(pwd)
BIN=${MOBIUS_BIN:-$SRC/build/bin}
SEQ=32768
CAP=1536MiB
STEPS=2
OUT=/tmp/mobius-long-seq
while [[ $# -gt 0 ]]; do
  case $1 in
    --seq) SEQ=$2; shift 2 ;;
    --cap) CAP=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
CAP_BYTES=$(python3 -c "
import re, sys
m = re.fullmatch(r'([0-9.]+)(MiB|GiB)?', '$CAP'); v = float(m.group(1))
print(int(v * {'MiB': 2**20, 'GiB': 2**30, None: 1}[m.group(2)]))")
FIX=$SRC/test/data/topology/paper_testbed_2s_2sw_8x3090.xml
MODEL=$OUT/llama-53m
if [[ ! -f $MODEL/model.safetensors ]]; then
  "$BIN/mobius-worker" init-model --family llama --layers 2 --hidden 256 --heads 4 --kv_heads 2 \
    --intermediate 1024 --vocab 100000 --max_positions "$SEQ" --out "$MODEL" >/dev/null
fi
python3 "$SRC/bench/memory/tokens.py" "$OUT/data.tok" --vocab 100000 --tokens $((4 * SEQ + 8))
log() { echo "long_seq: $*" >&2; }
STANDALONE=("$BIN/mobius-worker" train --standalone --model "$MODEL" --data "$OUT/data.tok"
  --steps "$STEPS" --batch 2 --microbatch 1 --seq "$SEQ" --lr 1e-4 --schedule constant
  --device_memory_bytes "$CAP_BYTES" --threads "$(nproc)")

log "1. the unchunked path at the cap"
set +e
"${STANDALONE[@]}" --chunk_tokens -1 >"$OUT/unchunked.out" 2>&1
echo $? >"$OUT/unchunked.rc"
set -e

log "2. mobius plan"
"$BIN/mobius" plan --model "$MODEL" --topology-file "$FIX" --gpus 0,1 --emulated-gpus \
  --gpu-memory-gib "$(python3 -c "print($CAP_BYTES / 2**30)")" --batch 2 --seq "$SEQ" \
  >"$OUT/plan.txt" 2>&1 || true

log "3. the standalone trainer"
python3 "$SRC/bench/memory/pss.py" --out "$OUT/standalone.pss.json" --interval 0.5 -- \
  "${STANDALONE[@]}" >"$OUT/standalone.out" 2>&1

log "4. mobius run on 2 emulated GPUs"
cat >"$OUT/job.yaml" <<YAML
name: long-seq
model_dir: $MODEL
dataset: {path: $OUT/data.tok}
training: {steps: $STEPS, global_batch: 2, microbatch: 1, seq_len: $SEQ, lr: 1e-4, lr_schedule: constant}
resources: {gpus: 2, device_memory_bytes: $CAP_BYTES}
YAML
rm -rf "$OUT/run"
python3 "$SRC/bench/memory/pss.py" --out "$OUT/run.pss.json" --interval 0.5 -- \
  "$BIN/mobius" run "$OUT/job.yaml" --topology-file "$FIX" --run-dir "$OUT/run" \
  >"$OUT/run.out" 2>"$OUT/run.err"

python3 - "$OUT" <<'PY'
import json, re, sys
out = sys.argv[1]
def losses(text):
    return [float(x) for x in re.findall(r"step \d+/\d+ \| loss ([0-9.]+)", text)]
sa = open(f"{out}/standalone.out").read()
run = open(f"{out}/run.out").read() + open(f"{out}/run.err").read()
ls, lr = losses(sa), losses(run)
pss_sa = json.load(open(f"{out}/standalone.pss.json"))
pss_run = json.load(open(f"{out}/run.pss.json"))
est = re.search(r"host memory estimate ([0-9.]+) GiB", run)
unchunked = open(f"{out}/unchunked.out").read()
need = re.search(r"requested (\d+) bytes for ([\w.]+)", unchunked)
plan = open(f"{out}/plan.txt").read()
mem = re.search(r"^Memory: .*$", plan, re.M)
longest = re.search(r"^Longest .*$", plan, re.M)
peak = pss_run["peak"]["pss_bytes"]
lines = ["# Long sequences on the CPU backend", "",
         f"- unchunked at the cap: exit {open(f'{out}/unchunked.rc').read().strip()}"
         + (f", it asks {int(need.group(1)) / 2**30:.2f} GiB for {need.group(2)}" if need else ""),
         f"- plan: {mem.group(0) if mem else '?'}", f"- {longest.group(0) if longest else ''}",
         f"- losses, standalone: {ls}", f"- losses, mobius run:  {lr}",
         f"- bitwise equal: {ls == lr and len(ls) > 0}",
         f"- peak PSS of the run's processes: {peak / 2**30 if peak else float('nan'):.2f} GiB; "
         f"estimate {est.group(1) if est else '?'} GiB"
         + (f" (estimate / measured {float(est.group(1)) / (peak / 2**30):.3f})" if est and peak else ""),
         f"- standalone peak PSS: {pss_sa['peak']['pss_bytes'] / 2**30:.2f} GiB"]
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
