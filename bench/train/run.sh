#!/bin/bash
# CPU training tokens/s: `mobius-worker train --standalone` vs a plain PyTorch GPT-2
# (torch_gpt2.py, Debian python3-torch) on the same config, batch, sequence and thread count.
# Runs alternate (ours, torch fp32, torch bf16-autocast, ours, ...); each run reports the median
# tok/s of its timed steps (warmup steps dropped); the summary is the median over reps with
# min-max, and the ratios. Both torch precisions are measured because on CPUs without AVX-512 BF16
# PyTorch's bf16 matmuls are far slower than its fp32 ones (docs/benchmarks.md, CPU GEMM): the
# faster of the two is the baseline that counts.
# TORCH_BF16=0 skips the bf16-autocast runs (the slowest part, ~10x slower than fp32 on CPUs
# without AVX-512 BF16). With PROFILE=1 (default) one extra run of ours under `perf record` gives
# the time per symbol.
#
#   bench/train/run.sh [BUILD_DIR]      (default build-train; needs bin/mobius-worker built)
# Environment: REPS=3 THREADS=2 LAYERS=4 HIDDEN=256 HEADS=8 VOCAB=8192 SEQ=256 BATCH=8
#              MICROBATCH=8 STEPS=8 WARMUP=2 PROFILE=1 TORCH_BF16=1 OURS_FLAGS=
# OURS_FLAGS: extra `mobius-worker train` flags for our runs (e.g. to compare trainer options).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build-train}
worker=$build/bin/mobius-worker
REPS=${REPS:-3} THREADS=${THREADS:-2} LAYERS=${LAYERS:-4} HIDDEN=${HIDDEN:-256} HEADS=${HEADS:-8}
VOCAB=${VOCAB:-8192} SEQ=${SEQ:-256} BATCH=${BATCH:-8} MICROBATCH=${MICROBATCH:-$BATCH}
STEPS=${STEPS:-8} WARMUP=${WARMUP:-2} PROFILE=${PROFILE:-1} TORCH_BF16=${TORCH_BF16:-1}
OURS_FLAGS=${OURS_FLAGS:-}
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$worker" init-model --family=gpt2 --layers="$LAYERS" --hidden="$HIDDEN" --heads="$HEADS" \
  --intermediate=$((4 * HIDDEN)) --vocab="$VOCAB" --max_positions="$SEQ" --seed=1 \
  --out="$tmp/model" 2>/dev/null >/dev/null
# Random u16 ids (llm.c layout), enough for every step without an epoch wrap.
$PY - "$tmp/data.bin" "$VOCAB" $(((STEPS + WARMUP) * BATCH * SEQ + SEQ + 1)) <<'PYEOF'
import array, random, sys
random.seed(0)
array.array("H", (random.randrange(int(sys.argv[2])) for _ in range(int(sys.argv[3])))).tofile(
    open(sys.argv[1], "wb"))
PYEOF

ours_cmd=("$worker" train --standalone --model="$tmp/model" --data="$tmp/data.bin"
  --data_raw_bytes=2 --steps=$((STEPS + WARMUP)) --batch="$BATCH" --microbatch="$MICROBATCH"
  --seq="$SEQ" --lr=3e-4 --schedule=constant --weight_decay=0.1 --grad_clip=1
  --threads="$THREADS" $OURS_FLAGS)
run_ours() {  # median tok/s of the steps after the warmup
  "${ours_cmd[@]}" 2>/dev/null | awk -v w="$WARMUP" '/^step /{n++; if (n > w) print $(NF-3)}' |
    sort -n | awk '{a[NR]=$1} END {print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'
}
run_torch() {
  $PY "$here/torch_gpt2.py" --layers="$LAYERS" --hidden="$HIDDEN" --heads="$HEADS" \
    --vocab="$VOCAB" --seq="$SEQ" --batch="$BATCH" --steps="$STEPS" --warmup_steps="$WARMUP" \
    --threads="$THREADS" --precision="$1" | tee -a "$tmp/torch.txt" | awk '{print $3}'
}

echo "config: gpt2 L=$LAYERS C=$HIDDEN H=$HEADS V=$VOCAB T=$SEQ B=$BATCH MB=$MICROBATCH" \
  "threads=$THREADS timed steps=$STEPS (+$WARMUP warmup) reps=$REPS; $(nproc) cores," \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
ours=() tf32=() tbf16=()
for rep in $(seq "$REPS"); do
  o=$(run_ours); f=$(run_torch fp32); b=nan
  [[ "$TORCH_BF16" == 1 ]] && b=$(run_torch bf16)
  echo "rep $rep: ours $o tok/s, torch fp32 $f tok/s, torch bf16-autocast $b tok/s"
  ours+=("$o") tf32+=("$f") tbf16+=("$b")
done
echo "torch runs: $(tail -2 "$tmp/torch.txt" | cut -d' ' -f8- | paste -sd';')"
$PY - "${ours[*]}" "${tf32[*]}" "${tbf16[*]}" <<'PYEOF'
import statistics, sys
o, f, b = ([float(x) for x in a.split()] for a in sys.argv[1:4])
for name, v in [("ours", o), ("torch fp32", f), ("torch bf16-autocast", b)]:
    if any(x != x for x in v):  # nan: not measured (TORCH_BF16=0)
        continue
    print(f"{name:20s} median {statistics.median(v):8.0f} tok/s (min {min(v):.0f}, max {max(v):.0f})")
for name, v in [("torch fp32", f), ("torch bf16-autocast", b)]:
    if any(x != x for x in v):
        continue
    print(f"ratio ours / {name}: {statistics.median(o) / statistics.median(v):.2f}x (per rep: "
          + ", ".join(f"{x / y:.2f}" for x, y in zip(o, v)) + ")")
PYEOF

if [[ "$PROFILE" == 1 ]] && command -v perf >/dev/null &&
   perf record -q -o "$tmp/perf.data" -- "${ours_cmd[@]}" >/dev/null 2>&1; then
  echo "where our time goes (perf, share of samples by symbol; top 25):"
  perf report -i "$tmp/perf.data" --stdio --sort symbol --percent-limit 0.7 2>/dev/null |
    grep -E '^ +[0-9]' | sed -E 's/ +- +- *$//; s/(.{120}).*/\1.../' | head -25
fi
