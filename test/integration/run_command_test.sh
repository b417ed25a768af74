#!/usr/bin/env bash
# `mobius run job.yaml` (no daemon): a short job completes with one progress line per step and a
# checkpoint; SIGTERM mid-run (Slurm's scancel) stops every worker and leaves no host store (no
# file in /dev/shm, no anonymous store held); a spec that does not fit is refused with exit 2
# before any worker starts.
# Usage: run_command_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail
BIN=$1
SRC=$2
TMP=$(mktemp -d /tmp/mobius-run-it-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$TMP"
"$BIN/mobius-worker" init-model --family gpt2 --preset tiny --vocab 700 --layers 4 --out model >/dev/null 2>&1
python3 -c 'import json; print(json.dumps({"text": open("/usr/share/common-licenses/GPL-2").read()}))' >d.jsonl
"$BIN/mobius" tokenize d.jsonl d.tok --tokenizer "$SRC/test/data/tokenizers/gpt2" >/dev/null
spec() {  # name steps gpus [plan]
  printf 'name: %s\nmodel_dir: model\ndataset: {path: d.tok}\ntraining: {steps: %s, global_batch: 4, microbatch: 2, seq_len: 32, lr: 1e-3}\nresources: {gpus: %s}\nplan: {%s}\n' \
    "$1" "$2" "$3" "${4:-stages: 4}" >"$1.yaml"
}
FIX=$SRC/test/data/topology/paper_testbed_2s_2sw_8x3090.xml

spec short 3 2
"$BIN/mobius" run short.yaml --topology-file "$FIX" --link-scale 0.05 >out.txt 2>err.txt ||
  { cat out.txt err.txt; fail "short run failed"; }
[[ $(grep -c "^step " out.txt) -eq 3 ]] || { cat out.txt; fail "expected 3 step lines"; }
grep -q "done: 3 steps" out.txt || fail "no summary"
[[ -f mobius-run-short/checkpoints/checkpoint-00000003/DONE ]] || fail "no checkpoint"
echo "ok: mobius run completed 3 steps with a checkpoint"

# The round-robin schedule (separate forward/backward partitions) gives the same losses.
spec rr 3 2 "schedule: roundrobin"
"$BIN/mobius" run rr.yaml --topology-file "$FIX" --link-scale 0.05 >out_rr.txt 2>err_rr.txt ||
  { cat out_rr.txt err_rr.txt; fail "roundrobin run failed"; }
losses() { grep -o "loss [0-9.]*" "$1"; }
[[ "$(losses out_rr.txt)" == "$(losses out.txt)" ]] ||
  { paste <(losses out.txt) <(losses out_rr.txt); fail "roundrobin losses differ from mobius"; }
echo "ok: mobius run with schedule roundrobin: same losses as the mobius schedule"

# Gradients over the emulated device transport: same losses; the progress line counts them.
"$BIN/mobius" run short.yaml --topology-file "$FIX" --link-scale 0.05 --transport emulated \
  --run_dir emu >out_emu.txt 2>err_emu.txt || { cat out_emu.txt err_emu.txt; fail "emulated transport run failed"; }
[[ "$(losses out_emu.txt)" == "$(losses out.txt)" ]] ||
  { paste <(losses out.txt) <(losses out_emu.txt); fail "emulated transport losses differ"; }
grep -q "| peer " out_emu.txt || { cat out_emu.txt; fail "no peer bytes in the progress line"; }
echo "ok: mobius run --transport emulated: same losses, gradients over the transport"
# --backend cuda: runs where the workers find their GPUs; elsewhere it fails before any step,
# naming why.
set +e; "$BIN/mobius" run short.yaml --topology-file "$FIX" --backend cuda --run_dir cuda \
  >out_cuda.txt 2>err_cuda.txt; rc=$?; set -e
if [[ $rc -eq 0 ]]; then
  echo "ok: --backend cuda ran on this machine's GPUs"
else
  grep -q "backend cuda" err_cuda.txt || { cat err_cuda.txt; fail "--backend cuda: exit $rc"; }
  ! grep -q "^step " out_cuda.txt || fail "--backend cuda ran steps before failing"
  echo "ok: --backend cuda without a usable GPU is refused: $(grep -o 'backend cuda[^;]*' err_cuda.txt | head -1)"
fi
set +e; "$BIN/mobius" run short.yaml --topology-file "$FIX" --backend tpu --run_dir tpu \
  >out_tpu.txt 2>err_tpu.txt; rc=$?; set -e
[[ $rc -eq 2 ]] && grep -q "backend must be auto, cpu or cuda" err_tpu.txt ||
  { cat err_tpu.txt; fail "--backend tpu: exit $rc"; }
echo "ok: --backend tpu is refused with exit 2"

spec long 100000 2
"$BIN/mobius" run long.yaml --topology-file "$FIX" --link-scale 0.05 >out2.txt 2>err2.txt &
pid=$!
for _ in $(seq 1 100); do grep -q "^step 2/" out2.txt 2>/dev/null && break; sleep 0.2; done
kill -TERM $pid
set +e; wait $pid; rc=$?; set -e
[[ $rc -eq 1 ]] || { cat err2.txt; fail "SIGTERM: exit $rc, want 1"; }
sleep 0.5
pgrep -f "mobius-worker run $TMP" >/dev/null && fail "workers survived SIGTERM"
# The store is an anonymous memory file: freed once no process holds it, and none may (other
# tests' jobs have other names).
if find /proc/[0-9]*/fd -lname "*memfd:mobius-store-long*" 2>/dev/null | grep -q .; then
  fail "a process still holds the run's host store"
fi
[[ -z "$(ls /dev/shm | grep mobius-store-long || true)" ]] || fail "a store file was left in /dev/shm"
echo "ok: SIGTERM stopped the run, no worker or host store left"

spec wide 2 9
set +e; "$BIN/mobius" run wide.yaml --topology-file "$FIX" >out3.txt 2>err3.txt; rc=$?; set -e
[[ $rc -eq 2 ]] && grep -q "resources.gpus" err3.txt || { cat err3.txt; fail "9 GPUs: exit $rc"; }
echo "ok: a job that cannot fit is refused with exit 2: $(cat err3.txt)"
