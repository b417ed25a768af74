#!/usr/bin/env bash
# The GPU kit (scripts/gpu-kit.sh, docs/gpu.md) made from this build and run here, where there is
# no GPU: it must fit the size limit, every ELF must find its libraries with only what run.sh
# finds (libcuda.so.1 aside), every GPU test must be reported skipped ("no device") or passed, and
# run.sh must exit 0 with its results file. The bare-root proof of the same kit is
# `scripts/fresh-root.sh --kit DIR` (needs root and debootstrap: run by hand, docs/gpu.md).
#
#   test/gpu/kit_test.sh SOURCE_DIR BUILD_DIR          (ctest gpu_kit_test; 77 = skipped)
set -euo pipefail
SRC=$1 BUILD=$2
command -v patchelf >/dev/null || { echo "SKIP: no patchelf (deploy/install-deps.sh)"; exit 77; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
MOBIUS_BUILD_DIR=$BUILD "$SRC/scripts/gpu-kit.sh" "$WORK/kit" >"$WORK/make.log" 2>&1 \
  || { cat "$WORK/make.log"; echo "FAIL: gpu-kit.sh"; exit 1; }
tail -1 "$WORK/make.log"
export MOBIUS_KIT_WORK=$WORK/unpacked
"$WORK/kit/run.sh" --check-libs
OUT=$WORK/out "$WORK/kit/run.sh" 2>"$WORK/run.err" || { cat "$WORK/run.err"; echo "FAIL: run.sh exit $?"; exit 1; }
R=$WORK/out/gpu_results.md
cat "$R"
n=$(grep -c '^| cuda_' "$R")
(( n >= 12 )) || { echo "FAIL: $n test rows in the results (expected every gpu-labelled test)"; exit 1; }
if grep '^| cuda_' "$R" | grep -q FAILED; then echo "FAIL: a test failed"; exit 1; fi
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  bad=$(grep '^| cuda_' "$R" | grep -vc 'no device' || true)
  (( bad == 0 )) || { echo "FAIL: without a GPU every row must say 'no device'"; exit 1; }
  grep -q 'no device: benchmarks not run' "$R" || { echo "FAIL: no 'benchmarks not run' line"; exit 1; }
fi
echo "PASS"
