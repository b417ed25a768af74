#!/usr/bin/env bash
# The runtime's optimizer and dispatch modes side by side (issue 21, item 4), on an emulated
# 8-GPU server (default the paper testbed; --topology=... for the 8x RTX 4090 fixture): mobius,
# mobius with the asynchronous optimizer (training.optimizer_staleness 1), roundrobin with static
# and pool dispatch, each with and without the asynchronous optimizer; gradient clipping on (the
# job spec's default, which makes the synchronous optimizer wait for the whole backward). Every
# variant is measured next to the planner's simulated steady-state step (3 simulated steps, the
# last reported) and relative to mobius; they alternate within every rep. PCIe-bound by default
# (link scale 1e-3); --link_scale=1 makes the links free, i.e. compute-bound on this machine's
# cores. docs/benchmarks.md, "Optimizer staleness and pool dispatch".
#   bench/pipeline/run_async.sh [pipeline_bench args]
# BUILD_DIR picks the build directory (default: build); OUT the JSON result file
# (default: pipeline_async.json in the current directory).
set -euo pipefail
export OUT="${OUT:-pipeline_async.json}"
exec "$(dirname "$0")/run.sh" \
  --schedules=mobius,mobius-async,roundrobin,roundrobin-pool,roundrobin-async,roundrobin-pool-async \
  --mappers=cross --grad_clip=1 --steps=7 --warmup=2 --reps=2 "$@"
