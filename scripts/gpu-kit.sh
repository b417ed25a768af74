#!/usr/bin/env bash
# Makes the GPU kit (issue 17, docs/gpu.md): the full tree's GPU binaries built here, ready for one
# call of the device tool on a bare GPU machine that has none of our Debian packages.
#
#   scripts/gpu-kit.sh OUTDIR          # build directory: $MOBIUS_BUILD_DIR, default build
#
# OUTDIR then holds
#   run.sh        the one command there: `OUT=DIR OUTDIR/run.sh` (scripts/gpu-kit-run.sh; --help)
#   kit.tar.gz    the payload, unpacked by run.sh (gzip: the one compressor every root has):
#     bin/        mobius-worker (CudaBackend, NCCL), e2e_train_bench, gpu_bench; stripped,
#                 RUNPATH $ORIGIN/../lib
#     tests/      every ctest test labelled `gpu` (the kernels, cuda_backend_test,
#                 cuda_pipeline_test), stripped, RUNPATH $ORIGIN/../lib
#     lib/        the non-CUDA shared libraries they load (Abseil, glog, OpenBLAS, ...), RUNPATH
#                 $ORIGIN; lib/fallback/: this build's libstdc++ and libgcc_s, used only when the
#                 GPU machine's own are older than the binaries need
#     share/      the topology fixture the training benchmark plans for, bench/gpu's Python
#     wheels/     Python wheels to install there (RoundPipe and the dependencies the GPU
#                 machine lacks), when MOBIUS_KIT_WHEELS names a directory of them
#   MANIFEST      what is in it: files, sizes, the glibc it needs, the commit
# The CUDA libraries (libcudart is static; libcublasLt, libcublas, libnccl) are NOT carried: the
# GPU machine has them (/usr/local/cuda*, the Python nvidia-* packages) and run.sh finds them.
# The whole folder must stay under 60 MiB (the device tool carries 64 MiB); the script fails
# otherwise, naming the largest files.
#
# Needs: a build directory configured with CUDA (nvcc found), patchelf, strip, ldd, objdump.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
[[ $# -eq 1 && $1 != -* ]] || { sed -n '2,27p' "$0"; exit 2; }
OUTDIR=$1
BUILD=${MOBIUS_BUILD_DIR:-build}
[[ $BUILD = /* ]] || BUILD=$SRC/$BUILD
LIMIT_MIB=60
say() { printf '==> [gpu-kit] %s\n' "$*"; }
die() { printf 'gpu-kit: %s\n' "$*" >&2; exit 1; }

for tool in patchelf strip ldd objdump ctest; do
  command -v $tool >/dev/null || die "needs $tool (deploy/install-deps.sh installs it)"
done
[[ -f $BUILD/CMakeCache.txt ]] || die "$BUILD is not a configured build directory (scripts/test.sh makes one)"
compgen -G "$BUILD/CMakeFiles/*/CMakeCUDACompiler.cmake" >/dev/null \
  || die "$BUILD was configured without CUDA (no nvcc): the kit needs CudaBackend"

# The gpu-labelled tests, from ctest itself (so a new GPU test joins the kit by its label). On a
# build directory that is configured but not built, ctest knows the tests' names (each is its
# target's name) but not yet their commands: build them by name, then ask again for the paths.
gpu_tests() {
  ctest --test-dir "$BUILD" -L gpu --show-only=json-v1 | python3 -c '
import json, sys
for t in json.load(sys.stdin)["tests"]:
    print(t["command"][0] if "command" in t else t["name"])' "$@"
}
mapfile -t TESTS < <(gpu_tests)
[[ ${#TESTS[@]} -gt 0 ]] || die "ctest lists no test labelled gpu in $BUILD"
BINS=(mobius-worker e2e_train_bench gpu_bench)
say "building ${BINS[*]} and ${#TESTS[@]} GPU tests in $BUILD"
cmake --build "$BUILD" --target "${BINS[@]}" $(for t in "${TESTS[@]}"; do basename "$t"; done)
mapfile -t TESTS < <(gpu_tests)
for t in "${TESTS[@]}"; do
  [[ $t = /* && -x $t ]] || die "GPU test $t has no built executable in $BUILD"
done

rm -rf "$OUTDIR"
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE"/{bin,tests,lib/fallback,share/bench/gpu,share/test/data/topology}
for b in "${BINS[@]}"; do strip -o "$STAGE/bin/$b" "$BUILD/bin/$b"; done
for t in "${TESTS[@]}"; do strip -o "$STAGE/tests/$(basename "$t")" "$t"; done

# Libraries: everything ldd resolves except glibc's own and CUDA's (the GPU machine's must be
# used: they match its driver). libstdc++/libgcc_s go to fallback/ (see run.sh).
is_system() {
  case "$1" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|libutil.so.*|ld-linux*|linux-vdso*) return 0 ;;
    libcuda.so.*|libcudart.so.*|libcublas.so.*|libcublasLt.so.*|libnccl.so.*|libnvidia-*|libnvrtc*) return 0 ;;
  esac
  return 1
}
declare -A SEEN=()
for elf in "$STAGE"/bin/* "$STAGE"/tests/*; do
  while read -r name _ path _; do
    [[ -n "${path:-}" && "$path" = /* ]] || continue
    is_system "$name" && continue
    [[ -n "${SEEN[$name]:-}" ]] && continue
    SEEN[$name]=1
    case "$name" in
      libstdc++.so.*|libgcc_s.so.*) dest=$STAGE/lib/fallback/$name ;;
      *) dest=$STAGE/lib/$name ;;
    esac
    cp -L "$path" "$dest"
    chmod u+w "$dest"
    strip --strip-unneeded "$dest" 2>/dev/null || true
  done < <(ldd "$elf")
done
for f in "$STAGE"/bin/* "$STAGE"/tests/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$STAGE"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$f"; done

cp "$SRC"/bench/gpu/*.py "$STAGE/share/bench/gpu/"
cp "$SRC"/test/data/topology/rtx4090_2s_4sw_8gpu.xml "$STAGE/share/test/data/topology/"
if [[ -n "${MOBIUS_KIT_WHEELS:-}" ]]; then
  mkdir -p "$STAGE/wheels"
  cp "$MOBIUS_KIT_WHEELS"/*.whl "$STAGE/wheels/"
fi

# The newest glibc and libstdc++ symbol versions any carried ELF needs: run.sh checks them there.
need_max() {  # PREFIX FILES...
  local prefix=$1; shift
  objdump -T "$@" 2>/dev/null | grep -o "${prefix}_[0-9.]*" | sed "s/${prefix}_//" | sort -V | tail -1
}
GLIBC_NEED=$(need_max GLIBC "$STAGE"/bin/* "$STAGE"/tests/* "$STAGE"/lib/*.so*)
GLIBCXX_NEED=$(need_max GLIBCXX "$STAGE"/bin/* "$STAGE"/tests/* "$STAGE"/lib/*.so*)
{
  echo "commit $(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -1)"
  echo "cuda_architectures $(sed -n 's/^MOBIUS_CUDA_ARCHITECTURES:[A-Z]*=//p' "$BUILD/CMakeCache.txt")"
  echo "glibc_needed $GLIBC_NEED"
  echo "glibcxx_needed $GLIBCXX_NEED"
  echo "cuda_libraries libcublasLt.so.13 libcublas.so.13 libnccl.so.2"
  (cd "$STAGE" && find . -type f -printf '%s %P\n' | sort -k2)
} >"$STAGE/MANIFEST"
cp "$STAGE/MANIFEST" "$OUTDIR/MANIFEST"
say "packing $(du -sh "$STAGE" | cut -f1) (uncompressed)"
tar -C "$STAGE" -cf - . | gzip -9 >"$OUTDIR/kit.tar.gz"
cp "$SRC/scripts/gpu-kit-run.sh" "$OUTDIR/run.sh"
chmod +x "$OUTDIR/run.sh"
size=$(du -sm "$OUTDIR" | cut -f1)
if (( size > LIMIT_MIB )); then
  sort -n "$OUTDIR/MANIFEST" | tail -8 >&2
  die "the kit is $size MiB, over the $LIMIT_MIB MiB limit (largest files above)"
fi
say "kit ready: $OUTDIR ($size MiB; glibc >= $GLIBC_NEED, GLIBCXX >= $GLIBCXX_NEED needed there)"
