#!/usr/bin/env bash
# training.precision fp16 against bf16 on an emulated 8-GPU server (issue 31): mobius and
# roundrobin with the asynchronous optimizer, each in bf16 and in fp16, every variant measured
# next to the planner's simulated steady-state step for its own calibration (the standalone
# trainer's speed in that precision on this machine: the CPU backend's fp16 kernels convert
# element by element) and relative to mobius; gradient clipping on. docs/benchmarks.md, "fp16".
#   bench/pipeline/run_fp16.sh [pipeline_bench args, e.g. --topology=FILE --link_scale=S]
# BUILD_DIR picks the build directory (default: build); OUT the JSON result file
# (default: pipeline_fp16.json in the current directory).
set -euo pipefail
export OUT="${OUT:-pipeline_fp16.json}"
exec "$(dirname "$0")/run.sh" \
  --schedules=mobius-async,mobius-async-fp16,roundrobin-async,roundrobin-async-fp16 \
  --mappers=cross --grad_clip=1 --steps=7 --warmup=2 --reps=2 "$@"
