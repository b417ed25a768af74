#!/usr/bin/env bash
# The README's test command: installs dependencies, configures, builds and runs the whole suite.
# Exits non-zero on any failure. GPU tests (ctest label `gpu`) report "Skipped" without a device.
#
#   scripts/test.sh                 # everything
#   MOBIUS_BUILD_DIR=out scripts/test.sh
#   MOBIUS_CTEST_ARGS="-L unit" scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh

BUILD_DIR=${MOBIUS_BUILD_DIR:-build}
JOBS=${MOBIUS_JOBS:-$(nproc)}
# MOBIUS_TESTS=ON explicitly: a build directory that scripts/demo.sh configured first (without the
# tests) would otherwise keep them off, and ctest would find nothing to run.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${MOBIUS_BUILD_TYPE:-RelWithDebInfo} \
  -DMOBIUS_TESTS=ON
cmake --build "$BUILD_DIR" -j "$JOBS"
# shellcheck disable=SC2086
ctest --test-dir "$BUILD_DIR" --no-tests=error --output-on-failure -j "$JOBS" --timeout 900 ${MOBIUS_CTEST_ARGS:-}
