#!/usr/bin/env bash
# The ~1B-parameter check of docs/benchmarks.md ("Host memory at real sizes"): a 0.89B Llama
# trains 3 steps on 4 emulated GPUs of the paper testbed with a checkpoint at step 2,
#   1. through `mobius run`: uninterrupted (A), and resumed from A's step-2 checkpoint (B);
#   2. through mobiusd: uninterrupted (C), and a job whose daemon is SIGKILLed once its step-2
#      checkpoint is complete, then restarted: the job resumes from it (D).
# Each pair's checkpoint-3 must be byte-identical (master, moments, model, trainer state).
# Peak PSS of the mobius run jobs goes to OUT/*.pss.json. About 12 minutes; ~50 GB of disk at peak.
#
#   bench/memory/resume_check.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=$(pwd); BIN=${MOBIUS_BIN:-$SRC/build/bin}
OUT=${1:-/tmp/mobius-resume-check}
FIX=$SRC/test/data/topology/paper_testbed_2s_2sw_8x3090.xml
mkdir -p "$OUT"; rm -rf "$OUT"/ckpt-* "$OUT"/state "$OUT"/run-*
MODEL=$OUT/llama-0.9b
[[ -f $MODEL/model.safetensors ]] || "$BIN/mobius-worker" init-model --family llama --layers 16 \
  --hidden 2048 --heads 16 --kv_heads 8 --intermediate 5632 --vocab 32000 --out "$MODEL" >/dev/null
[[ -f $OUT/data.tok ]] || python3 "$SRC/bench/memory/tokens.py" "$OUT/data.tok" --vocab 32000 --tokens 100000
spec() {  # NAME: a spec checkpointing into OUT/ckpt-NAME
  cat >"$OUT/$1.yaml" <<Y
name: resume-$1
model_dir: $MODEL
dataset: {path: $OUT/data.tok}
training: {steps: 3, global_batch: 2, microbatch: 1, seq_len: 128, lr: 1e-4}
resources: {gpus: 4, device_memory_bytes: 1GiB}
checkpoint: {dir: $OUT/ckpt-$1, every_steps: 2, keep_last: 2}
Y
}
same() {  # DIR_A DIR_B
  for f in master.safetensors model.safetensors optimizer_m.safetensors optimizer_v.safetensors \
           trainer_state.json config.json; do
    cmp "$1/$f" "$2/$f" || { echo "FAIL: $f differs"; exit 1; }
  done
  echo "identical: $1 and $2"
}
for j in a b c d; do spec $j; done

python3 "$SRC/bench/memory/pss.py" --out "$OUT/a.pss.json" -- "$BIN/mobius" run "$OUT/a.yaml" \
  --topology-file "$FIX" --run-dir "$OUT/run-a" >"$OUT/a.out" 2>&1
mkdir -p "$OUT/ckpt-b"; cp -r "$OUT/ckpt-a/checkpoint-00000002" "$OUT/ckpt-b/"
python3 "$SRC/bench/memory/pss.py" --out "$OUT/b.pss.json" -- "$BIN/mobius" run "$OUT/b.yaml" \
  --resume --topology-file "$FIX" --run-dir "$OUT/run-b" >"$OUT/b.out" 2>&1
grep -q "resuming from" "$OUT/b.out" || { echo "FAIL: mobius run --resume did not resume"; exit 1; }
same "$OUT/ckpt-a/checkpoint-00000003" "$OUT/ckpt-b/checkpoint-00000003"
rm -rf "$OUT/ckpt-a" "$OUT/ckpt-b"

SOCK=$OUT/mobiusd.sock
start() {
  "$BIN/mobiusd" --socket "$SOCK" --state-dir "$OUT/state" --topology-file "$FIX" \
    --metrics-address 127.0.0.1:0 >>"$OUT/daemon.log" 2>&1 &
  DAEMON=$!
  for _ in $(seq 100); do
    "$BIN/mobius" --socket "$SOCK" --timeout-seconds 1 health >/dev/null 2>&1 && return
    sleep 0.2
  done
  echo "FAIL: mobiusd did not start"; exit 1
}
start
"$BIN/mobius" --socket "$SOCK" submit "$OUT/c.yaml" --wait >"$OUT/c.out" 2>&1
id=$("$BIN/mobius" --socket "$SOCK" submit "$OUT/d.yaml" | grep -o 'j-[0-9]*' | head -1)
for _ in $(seq 1200); do [[ -f $OUT/ckpt-d/checkpoint-00000002/DONE ]] && break; sleep 0.5; done
kill -9 "$DAEMON"; sleep 1
start
state=""
for _ in $(seq 1200); do
  state=$("$BIN/mobius" --socket "$SOCK" describe "$id" --json |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
  [[ $state == JOB_STATE_SUCCEEDED || $state == JOB_STATE_FAILED ]] && break
  sleep 1
done
kill "$DAEMON"
[[ $state == JOB_STATE_SUCCEEDED ]] || { echo "FAIL: the resumed job is $state"; exit 1; }
grep -q "resuming from .*checkpoint-00000002" "$OUT/daemon.log" || { echo "FAIL: no resume"; exit 1; }
same "$OUT/ckpt-c/checkpoint-00000003" "$OUT/ckpt-d/checkpoint-00000003"
rm -rf "$OUT/ckpt-c" "$OUT/ckpt-d"
for j in a b; do
  python3 -c "import json,sys; p=json.load(open('$OUT/$j.pss.json'))['peak']['pss_bytes']; print('$j: peak PSS %.2f GiB' % (p / 2**30))"
done
echo "ok: resume through mobius run and through the daemon is bit-exact"
