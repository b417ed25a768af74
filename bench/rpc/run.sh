#!/usr/bin/env bash
# mobiusd ListJobs latency at 10,000 jobs through the real gRPC server (unix socket and TCP+TLS with
# a bearer token), beside the store-level ListJobs on the same file (docs/benchmarks.md, "ListJobs
# through the daemon").
#   bench/rpc/run.sh [rpc_bench args]   e.g. --jobs=10000 --queries=300
# BUILD_DIR picks the build directory (default: build). Files go to $TMPDIR (or /tmp).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
ninja -C "$build" rpc_bench mobiusd >/dev/null
tls="$(mktemp -d "${TMPDIR:-/tmp}/rpc_bench_tls_XXXXXX")"
trap 'rm -rf "$tls"' EXIT
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${ec[@]}" -keyout "$tls/ca.key" -out "$tls/ca.pem" -days 1 \
  -subj /CN=rpc-bench-ca 2>/dev/null
openssl req -new "${ec[@]}" -keyout "$tls/server.key" -out "$tls/server.csr" \
  -subj /CN=localhost 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$tls/ext"
openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
  -CAcreateserial -out "$tls/server.pem" -days 1 -extfile "$tls/ext" 2>/dev/null
"$build/bin/rpc_bench" --mobiusd="$build/bin/mobiusd" \
  --topology="$root/test/data/topology/paper_testbed_2s_2sw_8x3090.xml" \
  --model_config="$root/test/data/models/gpt2.json" --tls_dir="$tls" "$@"
