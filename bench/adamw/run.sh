#!/bin/sh
# Builds and runs the CPU AdamW benchmark (ours vs torch.optim.AdamW vs the triad bound), ~1-2 min.
#   bench/adamw/run.sh [adamw_bench arguments, e.g. --threads=1,2 --reps=5 --params=100000000]
# BUILD_DIR (default build) is configured as Release if it does not exist yet.
set -eu
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
ninja -C "$BUILD_DIR" adamw_bench
/usr/bin/python3 -c 'import torch' || { echo "needs Debian python3-torch" >&2; exit 1; }
exec "$BUILD_DIR/bin/adamw_bench" --torch="/usr/bin/python3 bench/adamw/torch_adamw.py" "$@"
