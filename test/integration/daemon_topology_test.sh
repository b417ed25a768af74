#!/usr/bin/env bash
# Integration test: a real mobiusd on a temporary unix socket, driven by the real CLI.
#   - starts with a topology fixture, answers grpc.health.v1 and NodeService.GetTopology (via CLI);
#   - a second daemon on the same socket is refused, exit 2, and the first keeps serving;
#   - SIGTERM -> exit 0, socket and lock removed;
#   - after SIGKILL the stale socket is replaced by the next daemon;
#   - bad topology file / missing socket directory -> exit 2 with a clear message.
# Usage: daemon_topology_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail
BIN=$1
SRC=$2
FIXTURE=$SRC/test/data/topology/paper_testbed_2s_2sw_8x3090.xml
TMP=$(mktemp -d /tmp/mobius-it-XXXXXX)
SOCK=$TMP/mobiusd.sock
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
# Runs a command that is expected to fail; its exit code goes to $rc.
run_rc() { set +e; "$@"; rc=$?; set -e; }
pass() { echo "ok: $*"; }

start_daemon() {  # args: log file, extra flags...
  local log=$1; shift
  "$BIN/mobiusd" --socket "$SOCK" --state-dir "$TMP/state" --metrics-address 127.0.0.1:0 "$@" >"$log" 2>&1 &
  DAEMON_PID=$!
  PIDS+=("$DAEMON_PID")
  for _ in $(seq 1 100); do
    if "$BIN/mobius" --socket "$SOCK" --timeout-seconds 1 health >/dev/null 2>&1; then return 0; fi
    kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$log"; fail "daemon exited during start-up"; }
    sleep 0.1
  done
  cat "$log"
  fail "daemon did not become healthy within 10 s"
}

# 0. Binaries that link gRPC's protobuf must not load Debian's libsentencepiece (it embeds an
#    incompatible protobuf; see common/data/CMakeLists.txt).
for b in mobius mobiusd; do
  if ldd "$BIN/$b" | grep -q sentencepiece; then fail "$b links libsentencepiece"; fi
done
"$BIN/mobius" --help >/dev/null 2>&1 || [ $? -eq 1 ] || fail "mobius --help crashed"

# 1. Start and check health.
start_daemon "$TMP/d1.log" --topology-file "$FIXTURE"
[ "$("$BIN/mobius" --socket "$SOCK" health)" = "SERVING" ] || fail "health is not SERVING"
[ -S "$SOCK" ] || fail "no socket file"
mode=$(stat -c %a "$SOCK")
[ "$mode" = "660" ] || fail "socket mode is $mode, expected 660"
grep -q "effective configuration" "$TMP/d1.log" || fail "daemon did not log its configuration"
grep -q "falling back to the CPU backend\|CUDA backend" "$TMP/d1.log" || fail "no backend line"
pass "daemon healthy on $SOCK (mode $mode)"

services=$("$BIN/../tests/reflection_probe" "$SOCK") || fail "server reflection call failed"
for svc in mobius.v1.NodeService grpc.health.v1.Health; do
  echo "$services" | grep -qx "$svc" || fail "reflection does not list $svc: $services"
done
pass "server reflection lists: $(echo $services)"

# 2. GetTopology through the CLI: text, JSON (env var instead of flag), XML.
out=$("$BIN/mobius" --socket "$SOCK" topo)
echo "$out" | grep -q "8 GPU(s), 2 socket(s), 2 NUMA node(s), 2 root complex(es)" || fail "topo text: $out"
echo "$out" | grep -q "group 0: GPU0 GPU1 GPU2 GPU3" || fail "topo groups"
json=$(MOBIUS_SOCKET=$SOCK "$BIN/mobius" topo --json)
python3 - "$json" <<'PY' || fail "topo --json facts"
import json, sys
t = json.loads(sys.argv[1])
assert len(t["gpus"]) == 8, len(t["gpus"])
assert len(t["root_complexes"]) == 2
groups = [g["gpus"] for g in t["contention_groups"]]
assert groups == [[0, 1, 2, 3], [4, 5, 6, 7]], groups
assert t["source"].endswith("paper_testbed_2s_2sw_8x3090.xml")
PY
"$BIN/mobius" --socket "$SOCK" topo --xml >"$TMP/export.xml"
"$BIN/mobius" topo --topology-file "$TMP/export.xml" | grep -q "8 GPU(s)" || fail "exported XML does not reload"
if command -v lstopo >/dev/null; then
  lstopo --input "$TMP/export.xml" --of console >/dev/null || fail "lstopo cannot read the export"
fi
pass "GetTopology via CLI (text, json, xml)"

# 3. A second daemon on the same socket is refused; the first keeps serving.
run_rc "$BIN/mobiusd" --state-dir "$TMP/state" --socket "$SOCK" --topology-file "$FIXTURE" >"$TMP/d2.log" 2>&1
[ $rc -eq 2 ] || fail "second daemon exit code $rc, expected 2"
grep -q "already serving on $SOCK" "$TMP/d2.log" || { cat "$TMP/d2.log"; fail "no clear refusal"; }
[ "$("$BIN/mobius" --socket "$SOCK" health)" = "SERVING" ] || fail "first daemon hurt by the second"
pass "second daemon refused"

# 4. SIGTERM: clean exit, socket and lock removed.
kill -TERM "$DAEMON_PID"
run_rc wait "$DAEMON_PID"
[ $rc -eq 0 ] || { cat "$TMP/d1.log"; fail "exit code after SIGTERM: $rc"; }
[ ! -e "$SOCK" ] || fail "socket still exists after SIGTERM"
[ ! -e "$SOCK.lock" ] || fail "lock file still exists after SIGTERM"
grep -q "received SIGTERM, shutting down" "$TMP/d1.log" || fail "no shutdown log line"
run_rc "$BIN/mobius" --socket "$SOCK" health >/dev/null 2>"$TMP/h.err"
[ $rc -eq 3 ] || fail "health against a stopped daemon exited $rc, expected 3"
pass "SIGTERM -> exit 0, socket removed, CLI exit 3 afterwards"

# 5. SIGKILL leaves a stale socket; the next daemon replaces it (live discovery this time).
start_daemon "$TMP/d3.log" --topology-file "$FIXTURE"
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
[ -S "$SOCK" ] || fail "expected a stale socket after SIGKILL"
start_daemon "$TMP/d4.log"
grep -q "removing stale socket" "$TMP/d4.log" || fail "stale socket not reported"
"$BIN/mobius" --socket "$SOCK" topo --json | python3 -c 'import json,sys; t=json.load(sys.stdin); assert t["source"]=="hwloc discovery", t["source"]' \
  || fail "live topology"
kill -INT "$DAEMON_PID"
wait "$DAEMON_PID" || fail "exit after SIGINT"
[ ! -e "$SOCK" ] || fail "socket left after SIGINT"
pass "stale socket replaced; live discovery served; SIGINT clean"

# 6. Bad configuration: exit 2 and one clear line.
run_rc "$BIN/mobiusd" --state-dir "$TMP/state" --socket "$SOCK" --topology-file "$SRC/test/data/topology/bad/truncated.xml" >"$TMP/d5.log" 2>&1
[ $rc -eq 2 ] || fail "bad topology exit $rc"
grep -q "truncated.xml: hwloc could not load it" "$TMP/d5.log" || { cat "$TMP/d5.log"; fail "bad topology message"; }
run_rc "$BIN/mobiusd" --state-dir "$TMP/state" --socket "$TMP/missing-dir/d.sock" --topology-file "$FIXTURE" >"$TMP/d6.log" 2>&1
[ $rc -eq 2 ] || fail "missing socket dir exit $rc"
grep -q "socket directory $TMP/missing-dir does not exist" "$TMP/d6.log" || { cat "$TMP/d6.log"; fail "missing dir message"; }
run_rc "$BIN/mobiusd" --state-dir "$TMP/state" --socket "$SOCK" --socket-mode 999 >"$TMP/d7.log" 2>&1
[ $rc -eq 2 ] || fail "bad socket mode exit $rc"
pass "bad configuration -> exit 2 with clear messages"

echo "all integration checks passed"
