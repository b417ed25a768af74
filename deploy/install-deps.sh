#!/usr/bin/env bash
# Installs every Debian 12 package that Mobius's build, tests and benchmarks need, and a small
# Python venv with Hugging Face transformers and PEFT from PyPI on top of Debian's PyTorch (the
# PEFT round-trip test; see peft_venv below).
# Idempotent: packages already present are skipped, and apt-get update runs only when something is
# missing. The CUDA toolkit and NCCL are expected to be preinstalled (they are not Debian packages);
# without nvcc the build simply leaves CUDA code out.
#
# Usage: deploy/install-deps.sh            (as root, or with sudo available)
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git python3 python3-venv
  # a chat dataset's model template (common/data/chat_template.h): rendered by Python's jinja2,
  # the engine transformers uses; needed at run time wherever datasets are tokenized
  python3-jinja2
  # the GPU kit (scripts/gpu-kit.sh: RUNPATH of the carried binaries; its ctest gpu_kit_test)
  patchelf
  # RPC and core libraries
  libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev
  libabsl-dev libgoogle-glog-dev libgflags-dev
  # the TLS TCP listener (OpenSSL: key checks, token digests) and the test certificates (openssl)
  libssl-dev openssl
  # hardware topology (library + lstopo to check the fixtures)
  libhwloc-dev hwloc
  # several nodes: Gloo's collectives (the per-stage gradient all-reduce across nodes)
  libgloo-dev
  # metrics, persistence, planning solver, BLAS
  prometheus-cpp-dev libsqlite3-dev sqlite3 coinor-libcbc-dev libopenblas-dev
  # oneDNN: only the CPU GEMM benchmark compares against it; its CMake package config requires
  # OpenCL's headers and loader (only Recommended by libdnnl-dev, so named here)
  libdnnl-dev ocl-icd-opencl-dev
  # model configs and safetensors headers (JSON); job specs (YAML)
  nlohmann-json3-dev libyaml-cpp-dev
  # tokenizers: Unicode-aware pre-tokenization regexes, NFC normalisation
  libpcre2-dev libutf8proc-dev libsentencepiece-dev sentencepiece
  # tests and benchmarks (PyTorch on the CPU: golden data and side-by-side baselines)
  libgtest-dev libgmock-dev googletest libbenchmark-dev python3-torch python3-numpy
  # deployment checks: a real Prometheus server and promtool, systemd-analyze, YAML and the
  # Kubernetes object schemas (test/deploy/)
  prometheus systemd python3-yaml python3-kubernetes
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# transformers 4.40 and PEFT 0.10 (the last releases that run on Debian 12's PyTorch 1.13) in a
# venv that sees the system packages, for test/reference/peft_roundtrip_test.sh (which finds it
# here, or at $MOBIUS_PEFT_PYTHON). PEFT goes in without its dependencies: it asks for
# torch >= 1.13.0, which pip reads as newer than Debian's "1.13.0a0" and would replace with a
# 700 MB wheel. Best effort: without PyPI the test reports itself skipped.
peft_venv() {
  local venv=${MOBIUS_PEFT_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/mobius/peft-venv}
  if "$venv/bin/python" -c "import transformers, peft" >/dev/null 2>&1; then
    echo "install-deps: PEFT venv present ($venv)"
    return 0
  fi
  echo "install-deps: creating the PEFT venv $venv (PyPI: transformers 4.40.2, accelerate 0.29.3, peft 0.10.0)"
  if python3 -m venv --system-site-packages "$venv" &&
     "$venv/bin/pip" install -q --disable-pip-version-check "transformers==4.40.2" \
       "accelerate==0.29.3" &&
     "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "peft==0.10.0"; then
    echo "install-deps: PEFT venv ready"
  else
    echo "install-deps: WARNING: no PEFT venv (PyPI unreachable?); peft_roundtrip_integration will be skipped" >&2
  fi
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  peft_venv
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
peft_venv
echo "install-deps: done"
