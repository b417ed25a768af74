#!/usr/bin/env bash
# Exact vs MIP partitioner solve time (docs/benchmarks.md, "Planner solve time").
#   bench/planner/run.sh [partition_bench args]   e.g. --sizes=32 --gpus=4 --reps=3
# BUILD_DIR picks the build directory (default: build).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
ninja -C "$build" partition_bench >/dev/null
exec "$build/bin/partition_bench" "$@"
