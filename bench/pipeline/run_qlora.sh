#!/usr/bin/env bash
# QLoRA against LoRA on the emulated 8-GPU paper testbed, PCIe-bound (issue 33): the same model,
# batches and adapters (rank 16, every linear of the blocks) over the frozen base in bf16 and in
# NF4 (adapter.base_quantization nf4), under mobius and roundrobin; measured step time and bytes
# per emulated link next to the planner's prediction for each base, interleaved in every rep
# (docs/benchmarks.md, "An NF4 base against the bf16 base"). About 5 minutes on a 2-core machine.
#   bench/pipeline/run_qlora.sh [pipeline_bench args]     e.g. --reps=1 --plan_only
# BUILD_DIR picks the build directory (default: build); OUT the JSON result file
# (default: pipeline_qlora.json in the current directory).
set -euo pipefail
export OUT="${OUT:-pipeline_qlora.json}"
exec "$(dirname "$0")/run.sh" \
  --schedules=mobius-lora,mobius-lora-nf4,roundrobin-lora,roundrobin-lora-nf4 \
  --mappers=cross --steps=6 --warmup=2 --reps=2 "$@"
