#!/usr/bin/env bash
# LoRA against full fine-tuning on the emulated 8-GPU paper testbed, PCIe-bound (issue 19): the
# same model and batches trained in full and with LoRA adapters (rank 16, every linear of the
# blocks, the base frozen in bf16), under mobius and roundrobin; measured step time and bytes
# per emulated link next to the planner's LoRA-mode prediction, interleaved in every rep
# (docs/benchmarks.md, "LoRA against full fine-tuning"). About 5 minutes on a 2-core machine.
#   bench/pipeline/run_lora.sh [pipeline_bench args]     e.g. --reps=1 --plan_only
# BUILD_DIR picks the build directory (default: build); OUT the JSON result file
# (default: pipeline_lora.json in the current directory).
set -euo pipefail
export OUT="${OUT:-pipeline_lora.json}"
exec "$(dirname "$0")/run.sh" --schedules=mobius,mobius-lora,roundrobin,roundrobin-lora \
  --mappers=cross --steps=6 --warmup=2 --reps=2 "$@"
