#!/usr/bin/env bash
# The pipeline runtime on the emulated 8-GPU paper testbed, PCIe-bound: measured step time with
# cross vs sequential mapping and measured vs the simulator's prediction (docs/benchmarks.md,
# "Pipeline runtime on the emulated paper testbed"). About 3 minutes on a 2-core machine.
#   bench/pipeline/run.sh [pipeline_bench args]      e.g. --reps=2 --link_scale=2e-3 --plan_only
# BUILD_DIR picks the build directory (default: build); OUT the JSON result file
# (default: pipeline_bench.json in the current directory).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
out="${OUT:-pipeline_bench.json}"
ninja -C "$build" pipeline_bench mobius-worker >/dev/null
echo "load average before the run: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores" >&2
exec "$build/bin/pipeline_bench" --out="$out" "$@"
