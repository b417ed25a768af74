#!/usr/bin/env bash
# Several nodes (issue 20): step time of 1, 2 and 3 nodes (2 emulated GPUs each) with the same
# global batch, PCIe and inter-node links emulated at one scale, measured against the planner's
# prediction (docs/benchmarks.md, "Several nodes"). About 5 minutes on a 2-core machine.
#   bench/pipeline/run_nodes.sh [nodes_bench args]     e.g. --reps=2 --internode_gbps=25
# BUILD_DIR picks the build directory (default: build); OUT the JSON result file
# (default: nodes_bench.json in the current directory).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
out="${OUT:-nodes_bench.json}"
ninja -C "$build" nodes_bench mobius-worker >/dev/null
echo "load average before the run: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores" >&2
exec "$build/bin/nodes_bench" --out="$out" "$@"
