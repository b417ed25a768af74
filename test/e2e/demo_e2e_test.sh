#!/usr/bin/env bash
# End-to-end: the README's main-job command (scripts/demo.sh) in a reduced size, on the binaries of
# this build (no apt-get, no rebuild). Asserts: the job SUCCEEDED, the loss fell, a complete
# checkpoint exists and loads (the standalone trainer trains one step from it), and the summary
# lists the bytes per emulated PCIe link and the measured step time next to the planner's
# prediction for the same emulated run.
# Usage: demo_e2e_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD=$1
SRC=$2
TMP=$(mktemp -d /tmp/mobius-e2e-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

set +e
MOBIUS_SKIP_INSTALL=1 MOBIUS_SKIP_BUILD=1 MOBIUS_BUILD_DIR="$BUILD" MOBIUS_DEMO_DIR="$TMP/demo" \
  MOBIUS_DEMO_STEPS=8 MOBIUS_DEMO_LAYERS=4 MOBIUS_DEMO_STAGES=4 MOBIUS_DEMO_GPUS=2 \
  "$SRC/scripts/demo.sh" >"$TMP/out.txt" 2>&1
rc=$?
set -e
cat "$TMP/out.txt"
[[ $rc -eq 0 ]] || fail "demo.sh exited $rc"
grep -q "job j-000001 SUCCEEDED" "$TMP/out.txt" || fail "the job did not succeed"
read -r first last < <(sed -n 's/.*loss \([0-9.]*\) -> \([0-9.]*\) over.*/\1 \2/p' "$TMP/out.txt")
python3 -c "import sys; sys.exit(0 if float('$last') < float('$first') else 1)" ||
  fail "the loss did not fall: $first -> $last"
grep -q "bytes per emulated link (h2d/d2h): uplink" "$TMP/out.txt" || fail "no link bytes in the summary"
# The step time like for like: measured and predicted for the same emulated run, both positive.
measured=$(sed -n 's/^    measured:  \([0-9.]*\) s per step (steps .*/\1/p' "$TMP/out.txt")
predicted=$(sed -n 's/^    predicted: \([0-9.]*\) s per step (mobius plan .*--emulated-gpus$/\1/p' "$TMP/out.txt")
python3 -c "import sys; sys.exit(0 if float('$measured') > 0 and float('$predicted') > 0 else 1)" ||
  fail "no measured ('$measured') and emulated prediction ('$predicted') in the summary"
grep -q "the job's plan for the real GPUs" "$TMP/out.txt" || fail "the real-GPU prediction is not labelled"
ckpt=$(sed -n "s/.*checkpoint: \([^ ]*\) (a Hugging Face.*/\1/p" "$TMP/out.txt")
[[ -f "$ckpt/DONE" && -f "$ckpt/config.json" ]] || fail "no complete checkpoint at '$ckpt'"
"$BUILD/bin/mobius-worker" train --standalone --model "$ckpt" --data "$TMP/demo/data.tok" \
  --steps 1 --batch 2 --seq 32 --threads 1 >"$TMP/load.txt" 2>&1 || { cat "$TMP/load.txt"; fail "the checkpoint does not load"; }
echo "ok: demo succeeded, loss $first -> $last, step $measured s measured / $predicted s predicted (emulated), checkpoint $ckpt loads"
