#!/usr/bin/env bash
# The schedules side by side on the emulated 8-GPU paper testbed, PCIe-bound: mobius (12 uniform
# stages, cross mapping), roundrobin (the planner's own forward/backward partitions, pass j on GPU
# j mod N) and resident (8 stages, one per GPU), each measured next to the planner's simulated step
# and relative to mobius (docs/benchmarks.md, "Schedules side by side"). The three alternate in
# every rep. About 5 minutes on a 2-core machine.
#   bench/pipeline/run_schedules.sh [pipeline_bench args]   e.g. --reps=1 --rr_partitioner=shared
# BUILD_DIR picks the build directory (default: build); OUT the JSON result file
# (default: pipeline_schedules.json in the current directory).
set -euo pipefail
export OUT="${OUT:-pipeline_schedules.json}"
exec "$(dirname "$0")/run.sh" --schedules=mobius,roundrobin,resident --mappers=cross \
  --steps=8 --warmup=2 --reps=3 "$@"
