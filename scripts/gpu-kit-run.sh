#!/usr/bin/env bash
# The GPU kit's one command (copied to KITDIR/run.sh by scripts/gpu-kit.sh; docs/gpu.md):
#
#   OUT=DIR KITDIR/run.sh            # everything, in at most ~8 minutes on one GPU
#   KITDIR/run.sh --check-libs       # only: does every ELF of the kit find its libraries here?
#
# 1. unpacks KITDIR/kit.tar.gz (into $MOBIUS_KIT_WORK, default /tmp/mobius-kit), checks the
#    glibc, picks the kit's libstdc++ only when this machine's is older than needed, and finds the
#    CUDA libraries the binaries load (libcublasLt, libcublas, libnccl) in $CUDA_HOME,
#    /usr/local/cuda*, the system's library directories or the Python nvidia-* packages; it says
#    what is missing. libcuda.so.1 comes from the driver: without one the GPU tests skip.
# 2. every GPU test (the kernels against plain C++ references, CudaBackend against CpuBackend,
#    the pipeline with every rank on the GPU against the CPU trainer);
# 3. with a GPU: the op benchmarks (bench/gpu: ours and PyTorch alternating), then the training
#    table: e2e_train_bench (mobius schedule capped at 24 GiB, resident) and torch_train.py
#    (PyTorch resident, FSDP2 CPU offload at 24 GiB, RoundPipe at 24 GiB when its wheels are in
#    the kit) for gpt2-124m and llama-1b. No benchmark process starts after MOBIUS_KIT_DEADLINE_S
#    (400) seconds, and each has its own timeout, so the whole run ends well inside 10 minutes.
# Files under $OUT (5): gpu_results.md (the summary: machine, libraries, tests, both tables),
# gpu_tests.log, gpu_bench.jsonl (op records), train.jsonl (training records), run.log.
# Exit: 0 done (or no GPU: tests reported skipped, "no device"), 1 a test failed, 2 the kit cannot
# run here (glibc too old, a library missing, bad usage).
# A second call can pick up what the deadline cut: MOBIUS_KIT_PARTS (default "tests ops train")
# selects the parts, MOBIUS_KIT_ROWS (an extended regex over "IMPL MODE MODEL", default: all)
# the training rows, e.g. MOBIUS_KIT_PARTS=train MOBIUS_KIT_ROWS='llama-1b'. The long-sequence
# rows (llama-long, 32K tokens) come last, or first with MOBIUS_KIT_LONG_FIRST=1.
set -uo pipefail
KITDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CHECK_ONLY=0
case "${1:-}" in
  --check-libs) CHECK_ONLY=1 ;;
  "") ;;
  -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
  *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
START=$(date +%s)
PARTS=" ${MOBIUS_KIT_PARTS:-tests ops train} "
ROWS=${MOBIUS_KIT_ROWS:-.}
want() { [[ "$PARTS" == *" $1 "* ]]; }
DEADLINE_S=${MOBIUS_KIT_DEADLINE_S:-400}
OUT=${OUT:-$KITDIR/out}
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/run.log
RESULTS=$OUT/gpu_results.md
[[ $CHECK_ONLY -eq 1 ]] || : >"$LOG"
log() { printf '[kit %4ds] %s\n' "$(( $(date +%s) - START ))" "$*" | tee -a "$LOG" >&2; }
elapsed() { echo $(( $(date +%s) - START )); }
vge() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" == "$2" ]]; }  # $1 >= $2

# --- 1. unpack, glibc, libraries -----------------------------------------------------------------
KIT=${MOBIUS_KIT_WORK:-/tmp/mobius-kit}
if ! cmp -s "$KITDIR/MANIFEST" "$KIT/MANIFEST" 2>/dev/null; then
  rm -rf "$KIT" && mkdir -p "$KIT" && tar -C "$KIT" -xzf "$KITDIR/kit.tar.gz" \
    || { log "cannot unpack $KITDIR/kit.tar.gz into $KIT"; exit 2; }
fi
GLIBC_NEED=$(sed -n 's/^glibc_needed //p' "$KIT/MANIFEST")
GLIBCXX_NEED=$(sed -n 's/^glibcxx_needed //p' "$KIT/MANIFEST")
GLIBC_HAVE=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [[ -z "$GLIBC_HAVE" ]] || ! vge "$GLIBC_HAVE" "$GLIBC_NEED"; then
  log "this machine's glibc (${GLIBC_HAVE:-unknown}) is older than the kit's binaries need ($GLIBC_NEED): build from source here instead (test/gpu/run_all.sh)"
  exit 2
fi

LIBDIRS=()
add_dir() { local d; for d in "${LIBDIRS[@]:-}"; do [[ "$d" == "$1" ]] && return; done; LIBDIRS+=("$1"); }
CANDIDATES=()
for d in ${CUDA_HOME:+$CUDA_HOME/lib64 $CUDA_HOME/lib} /usr/local/cuda/lib64 /usr/local/cuda/lib \
         /usr/local/cuda-*/lib64 /usr/local/cuda-*/targets/x86_64-linux/lib /usr/local/lib \
         /usr/lib/x86_64-linux-gnu /usr/lib64 /lib/x86_64-linux-gnu; do
  [[ -d "$d" ]] && CANDIDATES+=("$d")
done
if command -v python3 >/dev/null 2>&1; then
  while IFS= read -r d; do [[ -d "$d" ]] && CANDIDATES+=("$d"); done < <(python3 - 2>/dev/null <<'EOF'
import os, sys
for p in sys.path:
    root = os.path.join(p, "nvidia")
    if os.path.isdir(root):
        for dirpath, _, files in os.walk(root):
            if any(f.startswith(("libcublas", "libnccl", "libcudart")) for f in files):
                print(dirpath)
EOF
  )
fi
MISSING=()
for lib in $(sed -n 's/^cuda_libraries //p' "$KIT/MANIFEST"); do
  found=""
  for d in "${CANDIDATES[@]}"; do
    if [[ -e "$d/$lib" ]]; then found=$d; break; fi
  done
  if [[ -n "$found" ]]; then add_dir "$found"; else MISSING+=("$lib"); fi
done
# libcuda.so.1 (the driver's): usually known to the loader already; some images keep it in a
# read-only driver folder (/usr/local/nvidia) that only LD_LIBRARY_PATH names.
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '; then
  for d in ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }} /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/wsl/lib \
           /usr/lib/x86_64-linux-gnu /usr/lib64; do
    if [[ -e "$d/libcuda.so.1" ]]; then add_dir "$d"; break; fi
  done
fi
# libstdc++: this machine's unless it is older than the binaries need.
SYS_CXX=""
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /lib/x86_64-linux-gnu; do
  [[ -e "$d/libstdc++.so.6" ]] && { SYS_CXX=$d/libstdc++.so.6; break; }
done
CXX_HAVE=""
[[ -n "$SYS_CXX" ]] && CXX_HAVE=$(grep -a -o 'GLIBCXX_3\.4\.[0-9]*' "$SYS_CXX" | sed 's/GLIBCXX_//' | sort -V | tail -1)
CXX_NOTE="this machine's libstdc++ (GLIBCXX $CXX_HAVE >= $GLIBCXX_NEED)"
if [[ -z "$CXX_HAVE" ]] || ! vge "$CXX_HAVE" "$GLIBCXX_NEED"; then
  add_dir "$KIT/lib/fallback"
  CXX_NOTE="the kit's libstdc++ (this machine's: ${CXX_HAVE:-none}; needed GLIBCXX $GLIBCXX_NEED)"
fi
LD_LIBRARY_PATH=$(IFS=:; echo "${LIBDIRS[*]:-}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
export MOBIUS_BINARY_DIR=$KIT MOBIUS_SOURCE_DIR=$KIT/share

check_libs() {  # prints every unresolved library of every ELF (libcuda.so.1 aside); 0 when none
  local bad=0 elf line
  for elf in "$KIT"/bin/* "$KIT"/tests/* "$KIT"/lib/*.so*; do
    [[ -f "$elf" ]] || continue
    while IFS= read -r line; do
      case "$line" in
        *"not found"*) [[ "$line" == *libcuda.so.1* ]] && continue
                       echo "  $(basename "$elf"): $line"; bad=1 ;;
      esac
    done < <(ldd "$elf" 2>&1)
  done
  return $bad
}
if [[ $CHECK_ONLY -eq 1 ]]; then
  echo "kit: $(head -2 "$KIT/MANIFEST" | tr '\n' ' ')"
  echo "glibc $GLIBC_HAVE (needs $GLIBC_NEED); $CXX_NOTE"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  [[ ${#MISSING[@]} -eq 0 ]] || echo "CUDA libraries not found: ${MISSING[*]}"
  n=$(ls "$KIT"/bin/* "$KIT"/tests/* "$KIT"/lib/*.so* | wc -l)
  if check_libs; then echo "all $n ELF files find their libraries (libcuda.so.1 aside)"; exit 0; fi
  echo "unresolved libraries above"; exit 1
fi

GPU_LINE=""
HAVE_GPU=0
if command -v nvidia-smi >/dev/null 2>&1; then
  GPU_LINE=$(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.max.sm \
             --format=csv,noheader 2>/dev/null | head -1)
  [[ -n "$GPU_LINE" ]] && HAVE_GPU=1
fi
GPU_NAME=${GPU_LINE%%,*}
{
  echo "# Mobius GPU kit results"
  echo
  echo "- kit: $(head -1 "$KIT/MANIFEST"), $(sed -n 's/^cuda_architectures /sm /p' "$KIT/MANIFEST"); $(sed -n 2p "$KIT/MANIFEST")"
  echo "- machine: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), glibc $GLIBC_HAVE, $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
  echo "- GPU: ${GPU_LINE:-none (nvidia-smi missing or lists no device)}"
  echo "- libraries: $CXX_NOTE; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  [[ ${#MISSING[@]} -eq 0 ]] || echo "- **CUDA libraries not found: ${MISSING[*]}**"
} >"$RESULTS"
if ! UNRESOLVED=$(check_libs); then
  { echo "- **unresolved libraries**:"; echo '```'; echo "$UNRESOLVED"; echo '```'; } >>"$RESULTS"
  log "unresolved libraries (see $RESULTS):"; echo "$UNRESOLVED" | tee -a "$LOG" >&2
  exit 2
fi
log "libraries resolved; GPU: ${GPU_LINE:-none}"

# --- 2. GPU tests --------------------------------------------------------------------------------
TEST_RC=0
TLOG=$OUT/gpu_tests.log
: >"$TLOG"
{ echo; echo "## GPU tests"; echo; echo "| test | result | passed | skipped | failed | s |"; echo "|---|---|---:|---:|---:|---:|"; } >>"$RESULTS"
for t in "$KIT"/tests/*; do
  name=$(basename "$t")
  if ! want tests; then echo "| $name | not selected (MOBIUS_KIT_PARTS) | | | | |" >>"$RESULTS"; continue; fi
  t0=$(date +%s)
  echo "===== $name" >>"$TLOG"
  (cd "$KIT" && timeout 150 "$t" --gtest_color=no) >>"$TLOG.one" 2>&1
  rc=$?
  cat "$TLOG.one" >>"$TLOG"
  passed=$(grep -o '^\[  PASSED  \] [0-9]\+ test' "$TLOG.one" | awk '{print $4}' | tail -1)
  skipped=$(grep -o '^\[  SKIPPED \] [0-9]\+ test' "$TLOG.one" | awk '{print $4}' | tail -1)
  failed=$(grep -o '^\[  FAILED  \] [0-9]\+ test' "$TLOG.one" | awk '{print $4}' | tail -1)
  rm -f "$TLOG.one"
  if [[ $rc -ne 0 ]]; then
    result="**FAILED** (exit $rc$([[ $rc -eq 124 ]] && echo ', timed out'))"; TEST_RC=1
  elif [[ ${skipped:-0} -gt 0 && ${passed:-0} -eq 0 ]]; then
    result="skipped$([[ $HAVE_GPU -eq 0 ]] && echo ' (no device)')"
  elif [[ ${skipped:-0} -gt 0 ]]; then
    result="passed, some skipped$([[ $HAVE_GPU -eq 0 ]] && echo ' (no device)')"
  else
    result="passed"
  fi
  echo "| $name | $result | ${passed:-0} | ${skipped:-0} | ${failed:-0} | $(( $(date +%s) - t0 )) |" >>"$RESULTS"
  log "$name: $result"
done
REASON=$(grep -m1 -o "no CUDA device: .*" "$TLOG" || true)
[[ -n "$REASON" ]] && echo "- first skip reason: $REASON" >>"$RESULTS"
{
  echo; echo "Worst difference of every checked tensor (relative to max|ref|; tolerance in the test):"
  echo '```'; grep -E "worst \|diff\||loss cuda" "$TLOG" | head -150; echo '```'
  grep -E "Failure|FAILED|error:" "$TLOG" | head -40 | sed 's/^/    /'
} >>"$RESULTS"

if [[ $HAVE_GPU -eq 0 ]]; then
  log "no GPU (${REASON:-nvidia-smi found none}): tests reported skipped, benchmarks not run"
  echo "- no device: benchmarks not run" >>"$RESULTS"
  exit $TEST_RC
fi

# --- 3. benchmarks -------------------------------------------------------------------------------
WORK=$(mktemp -d /tmp/mobius-kit-run.XXXXXX)
time_left() { echo $(( DEADLINE_S - $(elapsed) )); }
may_start() {  # NAME: true while there is time for another process
  if [[ $(time_left) -le 0 ]]; then log "past ${DEADLINE_S}s: $1 not started"; echo "- not run (past the ${DEADLINE_S} s deadline): $1" >>"$WORK/skipped.md"; return 1; fi
}
HAVE_TORCH=0
python3 -c "import torch; assert torch.cuda.is_available()" >>"$LOG" 2>&1 && HAVE_TORCH=1
if [[ -d "$KIT/wheels" && $HAVE_TORCH -eq 1 ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$WORK/site" "$KIT"/wheels/*.whl >>"$LOG" 2>&1 \
    && export PYTHONPATH=$WORK/site${PYTHONPATH:+:$PYTHONPATH} || log "wheel install failed (run.log)"
fi
BENCHPY=$KIT/share/bench/gpu
PEAK=$(python3 -c "import sys; sys.path.insert(0, '$BENCHPY'); import train_flops; print(train_flops.peak_tflops('$GPU_NAME') or 0)" 2>/dev/null || echo 0)
GPU_GIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1 | awk '{printf "%d", $1/1024 - 4}')
THREADS=$(( $(nproc) > 8 ? 8 : $(nproc) ))

# Op benchmarks: one run of each implementation (a second if time allows, at the end).
op_round() {  # R
  want ops || return 0
  may_start "op benchmarks run $1" || return 0
  timeout 120 "$KIT/bin/gpu_bench" >"$WORK/mobius_$1.jsonl" 2>>"$LOG" || log "gpu_bench run $1 failed"
  if [[ $HAVE_TORCH -eq 1 ]] && may_start "torch_bench run $1"; then
    PYTHONUNBUFFERED=1 timeout 120 python3 "$BENCHPY/torch_bench.py" "$WORK/cases.jsonl" \
      >"$WORK/torch_$1.jsonl" 2>>"$LOG" || log "torch_bench run $1 failed"
  fi
}
"$KIT/bin/gpu_bench" --list >"$WORK/cases.jsonl" 2>>"$LOG"
log "op benchmarks"
op_round 1

# Training rows, most informative first; each its own process with its own timeout.
TRAIN=$OUT/train.jsonl
: >"$TRAIN"
mobius_row() {  # MODEL SCHEDULE CAP_GIB SHAPE...
  local model=$1 sched=$2 cap=$3; shift 3
  want train && [[ "mobius $sched $model" =~ $ROWS ]] || return 0
  may_start "mobius $sched $model" || return 0
  log "train: mobius $sched $model (cap $cap GiB)"
  timeout $(( $(time_left) + 60 < 150 ? $(time_left) + 60 : 150 )) "$KIT/bin/e2e_train_bench" \
    --model="$model" --schedule="$sched" --cap_gib="$cap" --backend=cuda --threads="$THREADS" --measure_profile \
    --gpu_name="$GPU_NAME" --peak_tflops="$PEAK" --out="$TRAIN" "$@" >/dev/null 2>>"$LOG" \
    || log "e2e_train_bench $sched $model: exit $? (run.log)"
}
torch_row() {  # MODEL MODE CAP_GIB SHAPE...
  local model=$1 mode=$2 cap=$3; shift 3
  want train && [[ "torch $mode $model" =~ $ROWS ]] || return 0
  [[ $HAVE_TORCH -eq 1 ]] || return 0
  may_start "torch $mode $model" || return 0
  log "train: torch $mode $model (cap $cap GiB)"
  PYTHONUNBUFFERED=1 timeout $(( $(time_left) + 60 < 150 ? $(time_left) + 60 : 150 )) \
    python3 "$BENCHPY/torch_train.py" --model "$model" --mode "$mode" --cap-gib "$cap" \
    --out "$TRAIN" "$@" >/dev/null 2>>"$LOG" || log "torch_train $mode $model: exit $? (run.log)"
}
G=(--seq=1024 --batch=16 --microbatch=8 --steps=5 --warmup=2)
GT=(--seq 1024 --batch 16 --microbatch 8 --steps 3 --warmup 2)  # torch: --steps counts timed steps only
L=(--seq=1024 --batch=8 --microbatch=4 --steps=4 --warmup=2)
LT=(--seq 1024 --batch 8 --microbatch 4 --steps 2 --warmup 2)
# Long sequences (issue 30): 32K tokens of a Llama-3-vocabulary model at a 24 GiB cap: the
# token-chunked head and MLP on the device, against PyTorch (full logits) and RoundPipe.
LL=(--seq=32768 --batch=1 --microbatch=1 --steps=3 --warmup=1)
LLT=(--seq 32768 --batch 1 --microbatch 1 --steps 2 --warmup 1)
if [[ " ${MOBIUS_KIT_LONG_FIRST:-0} " == " 1 " ]]; then
  mobius_row llama-long mobius 24 "${LL[@]}"
  torch_row llama-long resident 0 "${LLT[@]}"
  torch_row llama-long roundpipe 24 "${LLT[@]}"
fi
mobius_row gpt2-124m mobius 24 "${G[@]}"
torch_row gpt2-124m fsdp2-offload 24 "${GT[@]}" --act-ckpt
torch_row gpt2-124m roundpipe 24 "${GT[@]}"
torch_row gpt2-124m resident 0 "${GT[@]}"
mobius_row gpt2-124m resident "$GPU_GIB" "${G[@]}"
mobius_row llama-1b mobius 24 "${L[@]}"
mobius_row llama-1b mobius 24 "${L[@]}" --precision=fp16  # issue 31: the fp16 mode end to end
torch_row llama-1b fsdp2-offload 24 "${LT[@]}" --act-ckpt
torch_row llama-1b roundpipe 24 "${LT[@]}"
torch_row llama-1b resident 0 "${LT[@]}"
mobius_row llama-1b resident "$GPU_GIB" "${L[@]}"
if [[ " ${MOBIUS_KIT_LONG_FIRST:-0} " != " 1 " ]]; then
  mobius_row llama-long mobius 24 "${LL[@]}"
  torch_row llama-long resident 0 "${LLT[@]}"
  torch_row llama-long roundpipe 24 "${LLT[@]}"
fi
op_round 2

{
  echo; echo "## End-to-end training (one GPU; caps emulate a 24 GB card)"; echo
  python3 "$BENCHPY/train_table.py" "$OUT" 2>&1 || echo "(train_table.py failed; records in train.jsonl)"
  echo; echo "## Ops: ours against PyTorch on the same GPU (alternating runs)"; echo
  python3 "$BENCHPY/compare.py" "$WORK" 2>&1 || echo "(compare.py failed; records in gpu_bench.jsonl)"
  [[ -f "$WORK/skipped.md" ]] && { echo; cat "$WORK/skipped.md"; }
  echo; echo "- total $(elapsed) s"
} >>"$RESULTS"
cat "$WORK"/mobius_*.jsonl "$WORK"/torch_*.jsonl >"$OUT/gpu_bench.jsonl" 2>/dev/null
rm -rf "$WORK"
log "done in $(elapsed) s: $RESULTS"
exit $TEST_RC
