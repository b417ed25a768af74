#!/bin/bash
# What token chunks (issue 30: the LM head and the MLP a chunk of tokens at a time) cost in
# tokens/s where they are not needed for memory: `mobius-worker train --standalone` on the CPU
# backend, the same model, data and steps with --chunk_tokens -1 (unchunked), 0 (the default rule:
# one chunk up to 1024 tokens per microbatch, then chunks whose widest intermediate is no larger
# than the hidden state) and a forced small chunk, alternating in one run; each run reports the
# median tok/s of its timed steps; the summary is the median over reps with min-max and the ratio
# to unchunked. Both with --recompute (what the pipeline does: the backward re-runs each unit) and
# without (activations kept: chunked MLPs then re-run their gate/up projections in the backward).
#
#   bench/train/chunk_cost.sh [BUILD_DIR]     (default build; needs bin/mobius-worker)
# Environment: REPS=3 THREADS=2 LAYERS=2 HIDDEN=512 HEADS=8 KV=4 INTER=1408 VOCAB=32000
#              SEQS="1024 4096" BATCH=2 STEPS=3 WARMUP=1 SMALL=512
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
worker=$build/bin/mobius-worker
REPS=${REPS:-3} THREADS=${THREADS:-2} LAYERS=${LAYERS:-2} HIDDEN=${HIDDEN:-512} HEADS=${HEADS:-8}
KV=${KV:-4} INTER=${INTER:-1408} VOCAB=${VOCAB:-32000} SEQS=${SEQS:-"1024 4096"}
BATCH=${BATCH:-2} STEPS=${STEPS:-3} WARMUP=${WARMUP:-1} SMALL=${SMALL:-512}
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
max_seq=0
for s in $SEQS; do ((s > max_seq)) && max_seq=$s; done
"$worker" init-model --family=llama --layers="$LAYERS" --hidden="$HIDDEN" --heads="$HEADS" \
  --kv_heads="$KV" --intermediate="$INTER" --vocab="$VOCAB" --max_positions="$max_seq" --seed=1 \
  --out="$tmp/model" >/dev/null 2>&1
$PY - "$tmp/data.bin" "$VOCAB" $(((STEPS + WARMUP) * BATCH * max_seq + max_seq + 1)) <<'PYEOF'
import array, random, sys
random.seed(0)
array.array("H", (random.randrange(int(sys.argv[2])) for _ in range(int(sys.argv[3])))).tofile(
    open(sys.argv[1], "wb"))
PYEOF
run() {  # SEQ CHUNK RECOMPUTE(0|1): median tok/s of the steps after the warmup
  local extra=()
  [[ $3 == 1 ]] && extra=(--recompute)
  "$worker" train --standalone --model="$tmp/model" --data="$tmp/data.bin" --data_raw_bytes=2 \
    --steps=$((STEPS + WARMUP)) --batch="$BATCH" --microbatch=1 --seq="$1" --lr=3e-4 \
    --schedule=constant --threads="$THREADS" --chunk_tokens="$2" "${extra[@]}" 2>/dev/null |
    awk -v w="$WARMUP" '/^step /{n++; if (n > w) print $(NF-3)}' |
    sort -n | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'
}
summary() {  # values... -> "median (min..max)"
  printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {m=(NR%2?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2);
    printf "%.0f (%.0f..%.0f)", m, a[1], a[NR]}'
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2)}'; }
echo "config: llama L=$LAYERS C=$HIDDEN H=$HEADS/$KV I=$INTER V=$VOCAB B=$BATCH MB=1" \
  "threads=$THREADS timed steps=$STEPS (+$WARMUP warmup) reps=$REPS; $(nproc) cores," \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "| seq | activations | unchunked tok/s | default (0) tok/s | ratio | chunk $SMALL tok/s | ratio |"
echo "|---:|---|---:|---:|---:|---:|---:|"
for seq in $SEQS; do
  for rc in 1 0; do
    u=() d=() s=()
    for rep in $(seq "$REPS"); do
      u+=("$(run "$seq" -1 "$rc")"); d+=("$(run "$seq" 0 "$rc")"); s+=("$(run "$seq" "$SMALL" "$rc")")
    done
    mu=$(median "${u[@]}") md=$(median "${d[@]}") ms=$(median "${s[@]}")
    echo "| $seq | $([[ $rc == 1 ]] && echo recomputed || echo kept) | $(summary "${u[@]}") |" \
      "$(summary "${d[@]}") | $(awk -v a="$md" -v b="$mu" 'BEGIN{printf "%.3f", a/b}') |" \
      "$(summary "${s[@]}") | $(awk -v a="$ms" -v b="$mu" 'BEGIN{printf "%.3f", a/b}') |"
  done
done
