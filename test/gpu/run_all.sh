#!/usr/bin/env bash
# One command for a GPU machine (docs/gpu.md): configures the CUDA-only subset of the tree
# (MOBIUS_SERVICE=OFF: no Abseil, glog, gRPC, hwloc; GoogleTest built from source) in Release,
# builds the CUDA kernels, the GPU tests and the GPU benchmark, runs the tests (ctest -L gpu), then
# the benchmark alternating with its PyTorch baseline, and writes one results file:
#
#   OUT_DIR/gpu_results.md     the summary: machine, build, test results with each op's worst
#                              difference against its reference, the benchmark table
#   OUT_DIR/gpu_tests.log      ctest -V output (every op's worst |diff| per tensor)
#   OUT_DIR/gpu_bench.jsonl    every benchmark record of every run (both implementations)
#   OUT_DIR/gpu_build.log      configure + build output
#
# Needs: bash, cmake >= 3.25, ninja (or make), the CUDA toolkit (nvcc), a C++20 compiler, and for
# the baseline python3 with PyTorch. Nothing from the network.
#
# Usage: test/gpu/run_all.sh [--out DIR] [--gtest-source DIR] [--build-dir DIR] [--archs "90"]
#                            [--reps N] [--skip-bench] [--sanitize] [--require-gpu]
#   --out DIR           where the results go (default: $OUT, else build-gpu-results)
#   --gtest-source DIR  GoogleTest sources (a copy of Debian's /usr/src/googletest) to build when
#                       GoogleTest is not installed; default: $MOBIUS_GTEST_SOURCE_DIR, else
#                       build-carry/googletest, else /usr/src/googletest, if present
#   --build-dir DIR     default build-gpu
#   --archs LIST        MOBIUS_CUDA_ARCHITECTURES; default: the GPU's own (nvidia-smi), else
#                       "80;86;89;90"
#   --reps N            benchmark runs per implementation, alternating (default 3; none starts
#                       after 420 s, so the whole script stays inside a 10-minute limit)
#   --sanitize          also run every GPU test under compute-sanitizer memcheck (slower)
#   --require-gpu       exit 3 when no GPU is usable (default: build, report the tests Skipped,
#                       skip the benchmark, exit 0 with a "no GPU" line)
# Exit status: 0 all done (or no GPU without --require-gpu), 1 a test failed, 2 configure/build
# failed or bad usage, 3 no GPU with --require-gpu.
set -uo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT_DIR="${OUT:-}"
GTEST_SRC="${MOBIUS_GTEST_SOURCE_DIR:-}"
BUILD_DIR="build-gpu"
ARCHS=""
REPS=3
DEADLINE_S=420  # no benchmark run starts later than this (the device tool's limit is 600 s)
SKIP_BENCH=0
REQUIRE_GPU=0
SANITIZE=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUT_DIR="$2"; shift 2 ;;
    --gtest-source) GTEST_SRC="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --archs) ARCHS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --skip-bench) SKIP_BENCH=1; shift ;;
    --require-gpu) REQUIRE_GPU=1; shift ;;
    --sanitize) SANITIZE=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ {print substr($0, 3); next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "run_all.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
cd "$SRC" || exit 2
[[ -n "$OUT_DIR" ]] || OUT_DIR="$SRC/build-gpu-results"
mkdir -p "$OUT_DIR" "$BUILD_DIR" || exit 2
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
BUILD_DIR="$(cd "$BUILD_DIR" && pwd)"
RESULTS="$OUT_DIR/gpu_results.md"
WORK="$BUILD_DIR/run_all"  # intermediate files (kept out of OUT_DIR: few files come back)
rm -rf "$WORK"; mkdir -p "$WORK"
START=$(date +%s)
log() { echo "[run_all $(($(date +%s) - START))s] $*"; }
section() { printf '\n## %s\n\n' "$1" >>"$RESULTS"; }

# --- The machine ---------------------------------------------------------------------------------
NVCC="$(command -v nvcc || true)"
[[ -z "$NVCC" && -x /usr/local/cuda/bin/nvcc ]] && NVCC=/usr/local/cuda/bin/nvcc
GPU_LINE=""
if command -v nvidia-smi >/dev/null 2>&1; then
  GPU_LINE="$(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.max.sm \
              --format=csv,noheader 2>/dev/null | head -1)"
fi
HAVE_GPU=0
[[ -n "$GPU_LINE" ]] && HAVE_GPU=1
if [[ -z "$ARCHS" ]]; then
  cap="$(echo "$GPU_LINE" | awk -F', ' '{print $2}' | tr -d '.')"
  if [[ "$cap" =~ ^[0-9]+$ ]]; then ARCHS="$cap"; else ARCHS="80;86;89;90"; fi
fi
GENERATOR="Ninja"; command -v ninja >/dev/null 2>&1 || GENERATOR="Unix Makefiles"
JOBS="$(nproc 2>/dev/null || echo 4)"

{
  echo "# Mobius GPU run ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
  echo
  echo "- source: $SRC ($(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
  echo "- GPU: ${GPU_LINE:-none found (nvidia-smi missing or no device)}"
  echo "- nvcc: ${NVCC:-missing} $([[ -n "$NVCC" ]] && "$NVCC" --version | tail -1)"
  echo "- cmake: $(cmake --version | head -1); generator: $GENERATOR; jobs: $JOBS; archs: $ARCHS"
  echo "- host: $(uname -srm), $(nproc 2>/dev/null) CPUs"
} >"$RESULTS"
[[ -n "$NVCC" ]] || { log "no nvcc: cannot build"; echo "- FAILED: no nvcc" >>"$RESULTS"; exit 2; }
if [[ $HAVE_GPU -eq 0 ]]; then
  log "no GPU: nvidia-smi found no device; building and running the tests anyway (they will be Skipped)"
  echo "- **no GPU**: tests built and reported Skipped, benchmark not run" >>"$RESULTS"
fi

# --- Configure + build: the CUDA-only subset, exactly as verified on the CI machine --------------
if [[ -z "$GTEST_SRC" ]]; then
  for d in "$SRC/build-carry/googletest" /usr/src/googletest; do
    [[ -f "$d/CMakeLists.txt" ]] && { GTEST_SRC="$d"; break; }
  done
fi
CMAKE_ARGS=(-S "$SRC" -B "$BUILD_DIR" -G "$GENERATOR" -DCMAKE_BUILD_TYPE=Release
  -DMOBIUS_SERVICE=OFF -DMOBIUS_CUDA=ON -DMOBIUS_TESTS=ON "-DMOBIUS_CUDA_ARCHITECTURES=$ARCHS"
  -DCMAKE_CUDA_COMPILER="$NVCC"
  # CMake 4 (pip's, on the GPU image) refuses projects declaring < 3.5; GoogleTest 1.12 declares 3.5.
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5
  # Never pick up a stray Abseil/glog: the GPU build must not depend on them.
  -DCMAKE_DISABLE_FIND_PACKAGE_absl=ON -DCMAKE_DISABLE_FIND_PACKAGE_glog=ON
  -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON)
if [[ -n "$GTEST_SRC" ]]; then
  GTEST_SRC="$(cd "$GTEST_SRC" && pwd)"
  CMAKE_ARGS+=("-DMOBIUS_GTEST_SOURCE_DIR=$GTEST_SRC" -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON)
fi
log "configure (archs $ARCHS, GoogleTest ${GTEST_SRC:-installed})"
BUILD_T0=$(date +%s)
if ! { timeout 300 cmake "${CMAKE_ARGS[@]}" && timeout 480 cmake --build "$BUILD_DIR" -j "$JOBS"; } \
    >"$OUT_DIR/gpu_build.log" 2>&1; then
  tail -30 "$OUT_DIR/gpu_build.log"
  section "Build FAILED"; { echo '```'; tail -40 "$OUT_DIR/gpu_build.log"; echo '```'; } >>"$RESULTS"
  log "configure/build failed: see $OUT_DIR/gpu_build.log"
  exit 2
fi
BUILD_S=$(($(date +%s) - BUILD_T0))
log "built in ${BUILD_S}s"
section "Build"
echo "- configured and built in ${BUILD_S}s: $(ls "$BUILD_DIR/tests" | tr '\n' ' ')" >>"$RESULTS"
if [[ -f "$BUILD_DIR/build.ninja" ]] && grep -q "absl\|glog" "$BUILD_DIR/build.ninja"; then
  echo "- WARNING: the build links Abseil or glog (the CUDA-only subset must not)" >>"$RESULTS"
fi

# --- GPU tests ----------------------------------------------------------------------------------
log "ctest -L gpu"
(cd "$BUILD_DIR" && timeout 240 ctest -L gpu -V --timeout 120) >"$OUT_DIR/gpu_tests.log" 2>&1
CTEST_RC=$?
section "GPU tests (ctest -L gpu)"
{
  echo '```'
  grep -E "tests passed|tests failed|Test +#|\(Skipped\)|\(Failed\)|Passed|Failed" \
    "$OUT_DIR/gpu_tests.log" | grep -vE "^\s*[0-9]+: \[" | sed 's/^ *//' | head -40
  echo '```'
  echo
  echo "Worst difference of every checked tensor (relative to max|ref|; tol in the test):"
  echo '```'
  grep -E "worst \|diff\|" "$OUT_DIR/gpu_tests.log" | sed 's/^[0-9]*: *//' | head -120
  echo '```'
  grep -E "^\s*[0-9]+: .*(Failure|FAILED|error:)" "$OUT_DIR/gpu_tests.log" | head -40 \
    | sed 's/^/    /'
} >>"$RESULTS"
SKIPPED=$(grep -c "(Skipped)" "$OUT_DIR/gpu_tests.log" || true)
log "ctest exit $CTEST_RC, $SKIPPED skipped"
if [[ $HAVE_GPU -eq 1 && $SKIPPED -gt 0 ]]; then
  REASON="$(grep -m1 -o "no CUDA device: .*" "$OUT_DIR/gpu_tests.log" || true)"
  log "nvidia-smi sees a GPU but $SKIPPED test(s) skipped: ${REASON:-see gpu_tests.log}"
  echo "- **nvidia-smi sees a GPU but $SKIPPED test(s) skipped**: ${REASON:-see gpu_tests.log}" \
    >>"$RESULTS"
  [[ $REQUIRE_GPU -eq 1 ]] && exit 3
fi

if [[ $SANITIZE -eq 1 && $HAVE_GPU -eq 1 ]]; then
  SAN="$(command -v compute-sanitizer || true)"
  if [[ -z "$SAN" && -x "$(dirname "$NVCC")/compute-sanitizer" ]]; then
    SAN="$(dirname "$NVCC")/compute-sanitizer"
  fi
  section "compute-sanitizer memcheck"
  for t in "$BUILD_DIR"/tests/cuda_*_test; do
    [[ -n "$SAN" ]] || { echo "- compute-sanitizer not found" >>"$RESULTS"; break; }
    if timeout 120 "$SAN" --tool memcheck --error-exitcode 9 "$t" >"$WORK/san.log" 2>&1; then
      echo "- $(basename "$t"): clean" >>"$RESULTS"
    else
      {
        echo "- $(basename "$t"): FAILED"
        echo '```'; grep -m5 -A3 "=========" "$WORK/san.log"; echo '```'
      } >>"$RESULTS"
      CTEST_RC=1
    fi
  done
fi

if [[ $HAVE_GPU -eq 0 ]]; then
  REASON="$(grep -m1 -o "no CUDA device: .*" "$OUT_DIR/gpu_tests.log" || true)"
  log "no GPU (${REASON:-nvidia-smi found none}): benchmark skipped. Results: $RESULTS"
  echo "- no GPU (${REASON:-nvidia-smi found none}): benchmark skipped" >>"$RESULTS"
  [[ $REQUIRE_GPU -eq 1 ]] && exit 3
  [[ $CTEST_RC -eq 0 ]] && exit 0 || exit 1
fi

# --- Benchmark: ours and PyTorch's, alternating --------------------------------------------------
BENCH="$BUILD_DIR/bin/gpu_bench"
if [[ $SKIP_BENCH -eq 0 && ! -x "$BENCH" ]]; then
  log "no gpu_bench binary (no cuBLASLt in this toolkit?): benchmark skipped"
  echo "- no gpu_bench binary (see gpu_build.log): benchmark skipped" >>"$RESULTS"
  SKIP_BENCH=1
fi
if [[ $SKIP_BENCH -eq 0 ]]; then
  "$BENCH" --list >"$WORK/cases.jsonl"
  HAVE_TORCH=1
  python3 -c "import torch; assert torch.cuda.is_available()" >"$WORK/torch_check.log" 2>&1 \
    || HAVE_TORCH=0
  for r in $(seq 1 "$REPS"); do
    if [[ $(($(date +%s) - START)) -gt $DEADLINE_S ]]; then
      log "past ${DEADLINE_S}s: no more benchmark runs"
      echo "- stopped after $((r - 1)) benchmark run(s): past the ${DEADLINE_S}s deadline" >>"$RESULTS"
      break
    fi
    log "benchmark run $r/$REPS: gpu_bench"
    timeout 150 "$BENCH" >"$WORK/mobius_$r.jsonl" 2>"$WORK/mobius_$r.err" \
      || log "gpu_bench run $r failed: $(tail -2 "$WORK/mobius_$r.err")"
    if [[ $HAVE_TORCH -eq 1 ]]; then
      log "benchmark run $r/$REPS: torch_bench.py"
      PYTHONUNBUFFERED=1 timeout 150 python3 "$SRC/bench/gpu/torch_bench.py" "$WORK/cases.jsonl" \
        >"$WORK/torch_$r.jsonl" 2>"$WORK/torch_$r.err" \
        || log "torch_bench run $r failed: $(tail -2 "$WORK/torch_$r.err")"
    fi
  done
  cat "$WORK"/mobius_*.jsonl "$WORK"/torch_*.jsonl >"$OUT_DIR/gpu_bench.jsonl" 2>/dev/null
  section "Benchmark (bench/gpu: ours vs PyTorch, same GPU, alternating runs)"
  if [[ $HAVE_TORCH -eq 0 ]]; then
    echo "- no PyTorch with CUDA: $(tail -1 "$WORK/torch_check.log")" >>"$RESULTS"
  fi
  python3 "$SRC/bench/gpu/compare.py" "$WORK" >>"$RESULTS" 2>&1 \
    || echo "(compare.py failed; raw records in gpu_bench.jsonl)" >>"$RESULTS"
  for f in "$WORK"/*.err; do
    [[ -s "$f" ]] || continue
    { echo; echo "stderr of $(basename "$f"):"; echo '```'; tail -5 "$f"; echo '```'; } >>"$RESULTS"
  done
fi

TOTAL=$(($(date +%s) - START))
echo -e "\n- total ${TOTAL}s" >>"$RESULTS"
log "done in ${TOTAL}s: $RESULTS"
[[ $CTEST_RC -eq 0 ]] && exit 0 || exit 1
