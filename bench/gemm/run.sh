#!/bin/sh
# Builds and runs the CPU GEMM benchmark (OpenBLAS sbgemm, convert+sgemm, oneDNN, torch.matmul), ~2 min.
#   bench/gemm/run.sh [gemm_bench arguments, e.g. --threads=1,2 --reps=5]
# BUILD_DIR (default build) is configured as Release if it does not exist yet.
set -eu
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
ninja -C "$BUILD_DIR" gemm_bench
/usr/bin/python3 -c 'import torch' || { echo "needs Debian python3-torch" >&2; exit 1; }
exec "$BUILD_DIR/bin/gemm_bench" --torch="/usr/bin/python3 bench/gemm/gemm_torch.py" "$@"
