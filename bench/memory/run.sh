#!/usr/bin/env bash
# Host memory, load and checkpoint throughput of real pipeline jobs (`mobius run`, CPU backend
# emulating the paper testbed's GPUs), for several model sizes and GPU counts, next to the
# planner's estimate and to this machine's own ceilings measured in the same run (bench/memory,
# docs/benchmarks.md "Host memory at real sizes").
#
# Per (model, GPU count): peak PSS of all of the job's processes (pss.py: shared memory counted
# once), the estimate `mobius run` prints, each worker's device-memory peak (CPU backend: host
# memory), the store fill rate and the checkpoint write rate from the workers' logs. Jobs whose
# estimate exceeds this machine's available memory are refused by mobius run (exit 2) and reported
# as such. Baselines, same run: populating fresh anonymous-file pages (memfd, the store's kind)
# and reading the model file from the page cache (the fill's ceilings), dd with fdatasync to the
# checkpoint file system (the checkpoint's ceiling).
#
#   bench/memory/run.sh [--sizes "0.3b 0.9b 1.1b moe0.9b"] [--gpus "1 2 4 8"] [--cap 1GiB]
#                       [--out DIR]
#                       (moe0.9b: a Qwen3-MoE of 0.92B parameters, 0.21B active: 16 layers of
#                        32 experts, 4 per token; its LoRA adapts every expert too)
#                       [--cold]   (drop the page cache before the first run of each model: root)
#                       [--lora]   (LoRA jobs: rank 16, alpha 32, every linear of the blocks;
#                                   the frozen base in bf16, docs/job-spec.md "adapter")
#                       [--lora-base bf16|nf4]   (with --lora: the frozen base's format,
#                                   adapter.base_quantization; nf4: QLoRA's 4-bit linears)
#                       [--precision bf16|fp16]   (training.precision; default bf16)
#                       [--no-standalone]   (skip the standalone trainer's run: at 2.8b its fp32
#                                   state alone is ~19 GB)
#                       [--batch B] [--seq T] [--steps N]   (the job's global batch of
#                                   microbatch-1 sequences, tokens per sequence and steps; default
#                                   2, 128, 3: the checkpoint at step 2 then overlaps step 3. Many
#                                   microbatches of long sequences make the activation
#                                   checkpoints and gradients count)
#   sizes: Llama-shaped 0.3b, 0.9b, 1.1b, 2.8b (56 layers of 1.1b's shape, 2.77B), moe0.9b, or
#   gptoss0.9b (a gpt-oss of 0.92B: 16 layers of 32 experts, 4 per token; checkpoints fused).
#
# Memory-heavy: run it alone. Writes DIR/results.json, DIR/results.md and DIR/bytes_per_param.png
# (the plot needs python3-matplotlib; skipped without it).
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=$(pwd)
BIN=${MOBIUS_BIN:-$SRC/build/bin}
SIZES="0.3b 0.9b"
GPUS="1 2 4 8"
CAP=1GiB
OUT=/tmp/mobius-bench-memory
COLD=0
LORA=0
PRECISION=bf16
LORA_BASE=bf16
STANDALONE=1
BATCH=2
SEQ=128
STEPS=3
while [[ $# -gt 0 ]]; do
  case $1 in
    --sizes) SIZES=$2; shift 2 ;;
    --gpus) GPUS=$2; shift 2 ;;
    --cap) CAP=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --cold) COLD=1; shift ;;
    --lora) LORA=1; shift ;;
    --precision) PRECISION=$2; shift 2 ;;
    --lora-base) LORA_BASE=$2; shift 2 ;;
    --no-standalone) STANDALONE=0; shift ;;
    --batch) BATCH=$2; shift 2 ;;
    --seq) SEQ=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
FIX=$SRC/test/data/topology/paper_testbed_2s_2sw_8x3090.xml
echo "bench/memory: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), out $OUT" >&2

# init-model's flags for a size: Llama-shaped dense models, or a Qwen3-MoE.
model_flags() {
  local dense=(--family llama --hidden 2048 --heads 16 --kv_heads 8 --intermediate 5632)
  case $1 in
    0.3b) echo "${dense[*]} --layers 4" ;;
    0.9b) echo "${dense[*]} --layers 16" ;;
    1.1b) echo "${dense[*]} --layers 20" ;;
    2.8b) echo "${dense[*]} --layers 56" ;;
    moe0.9b) echo "--family qwen3_moe --layers 16 --hidden 1024 --heads 16 --kv_heads 4" \
                  "--head_dim 64 --intermediate 2048 --experts 32 --experts_per_token 4" \
                  "--expert_intermediate 512" ;;
    gptoss0.9b) echo "--family gpt_oss --layers 16 --hidden 1024 --heads 16 --kv_heads 4" \
                     "--head_dim 64 --intermediate 512 --experts 32 --experts_per_token 4" ;;
    *) echo "size $1: 0.3b, 0.9b, 1.1b, 2.8b, moe0.9b or gptoss0.9b" >&2; exit 2 ;;
  esac
}
targets_of() {  # LoRA targets: every linear of the blocks (a MoE's: every expert's too;
  # gpt-oss's fused experts are not LoRA modules: its attention)
  case $1 in
    gptoss*) echo q_proj,k_proj,v_proj,o_proj ;;
    *) echo q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj ;;
  esac
}

python3 "$SRC/bench/memory/tokens.py" "$OUT/data.tok" --vocab 32000 --tokens 100000
python3 "$SRC/bench/memory/baselines.py" --dir "$OUT" --populate_bench "$BIN/populate_bench" \
  >"$OUT/baselines.json"

for size in $SIZES; do
  model=$OUT/model-$size
  flags=$(model_flags "$size")
  if [[ ! -f $model/model.safetensors && ! -f $model/model.safetensors.index.json ]]; then  # 2.8b: shards
    # shellcheck disable=SC2086
    "$BIN/mobius-worker" init-model $flags --vocab 32000 --out "$model" >/dev/null
  fi
  ADAPTER=""
  STANDALONE_LORA=()
  if [[ $LORA == 1 ]]; then
    TARGETS=$(targets_of "$size")
    QUANT=""
    [[ $LORA_BASE == nf4 ]] && QUANT=", base_quantization: nf4"
    ADAPTER="adapter: {type: lora, rank: 16, alpha: 32, target_modules: [${TARGETS//,/, }]$QUANT}"
    STANDALONE_LORA=(--lora_rank 16 --lora_alpha 32 --lora_targets "$TARGETS"
                     --lora_base "$LORA_BASE")
  fi
  # The standalone trainer on the same model (one process, the CPU backend's memory is the model's).
  if [[ $STANDALONE == 1 ]]; then
    cat "$model"/*.safetensors >/dev/null
    python3 "$SRC/bench/memory/pss.py" --out "$OUT/$size-standalone.pss.json" --interval 0.25 -- \
      "$BIN/mobius-worker" train --standalone --model "$model" --data "$OUT/data.tok" --steps 2 \
      --batch "$BATCH" --microbatch 1 --seq "$SEQ" --threads "$(nproc)" --precision "$PRECISION" \
      "${STANDALONE_LORA[@]}" \
      >"$OUT/$size-standalone.out" 2>&1 ||
      echo "standalone $size failed" >&2
  fi
  first=1
  for n in $GPUS; do
    tag=$size-g$n
    rm -rf "$OUT/ckpt-$tag" "$OUT/run-$tag"
    cat >"$OUT/$tag.yaml" <<EOF
name: mem-$tag
model_dir: $model
dataset: {path: $OUT/data.tok}
training: {steps: $STEPS, global_batch: $BATCH, microbatch: 1, seq_len: $SEQ, lr: 1e-4, precision: $PRECISION}
resources: {gpus: $n, device_memory_bytes: $CAP}
checkpoint: {dir: $OUT/ckpt-$tag, every_steps: 2, keep_last: 1}
$ADAPTER
EOF
    sync
    if [[ $COLD == 1 && $first == 1 && -w /proc/sys/vm/drop_caches ]]; then
      echo 3 >/proc/sys/vm/drop_caches
      echo "cold" >"$OUT/$tag.cache"
    else
      cat "$model"/*.safetensors >/dev/null
      echo "warm" >"$OUT/$tag.cache"
    fi
    first=0
    echo "bench/memory: $tag" >&2
    set +e
    python3 "$SRC/bench/memory/pss.py" --out "$OUT/$tag.pss.json" --interval 0.25 -- \
      "$BIN/mobius" run "$OUT/$tag.yaml" --topology-file "$FIX" --run-dir "$OUT/run-$tag" \
      >"$OUT/$tag.out" 2>"$OUT/$tag.err"
    echo $? >"$OUT/$tag.rc"
    set -e
    rm -rf "$OUT/ckpt-$tag"  # 12 bytes/parameter each: keep the disk
  done
done
python3 "$SRC/bench/memory/analyze.py" "$OUT"
