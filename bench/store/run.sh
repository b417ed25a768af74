#!/usr/bin/env bash
# Job store ListJobs latency at 10,000 jobs and CreateJob throughput (docs/benchmarks.md, "Job store").
#   bench/store/run.sh [store_bench args]   e.g. --jobs=10000 --queries=500 --creates=1000 --reps=3
# BUILD_DIR picks the build directory (default: build). The database goes to $TMPDIR (or /tmp):
# put it on the file system the daemon's state directory will use.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
ninja -C "$build" store_bench >/dev/null
exec "$build/bin/store_bench" "$@"
