#!/usr/bin/env bash
# Usage: as_user.sh BIN_DIR SOURCE_DIR [WORK_DIR] (as root; docs/benchmarks.md, "Through the daemon,
# as another user"). A 0.35B Llama trained through the root daemon as a throwaway user; PSS of the daemon and all its
# children (workers run as the user) against the plan's host estimate.
set -euo pipefail
B=${1:?usage: as_user.sh BIN_DIR SOURCE_DIR [WORK_DIR]}; SRC=${2:?}; T=${3:-/tmp/mobius-mem-as-user}
rm -rf $T; mkdir -p $T; chmod 755 $T
U=mbmem$$; useradd --no-create-home --home-dir $T/home --shell /usr/sbin/nologin --user-group $U
trap 'userdel $U 2>/dev/null || true' EXIT
mkdir -p $T/home
$B/mobius-worker init-model --family llama --layers 24 --hidden 1024 --heads 16 --kv_heads 8 \
  --intermediate 2816 --vocab 32000 --out $T/home/model >/dev/null
python3 $SRC/bench/memory/tokens.py $T/home/data.tok --vocab 32000 --tokens 20000
cat > $T/home/job.yaml <<Y
name: mem03b
model_dir: $T/home/model
dataset: {path: $T/home/data.tok}
training: {steps: 2, global_batch: 2, microbatch: 1, seq_len: 64}
resources: {gpus: 4, device_memory_bytes: 1073741824}
Y
chown -R $U:$U $T/home; chmod -R go-rwx $T/home; chmod 711 $T/home
python3 $SRC/bench/memory/pss.py --out $T/peak.json --interval 0.1 -- \
  setpriv --bounding-set=-all,+setuid,+setgid,+chown,+kill --inh-caps=-all -- \
  $B/mobiusd --socket $T/d.sock --socket-mode 0666 --state-dir $T/state \
  --topology-file $SRC/test/data/topology/paper_testbed_2s_2sw_8x3090.xml --metrics-address 127.0.0.1:0 \
  > $T/daemon.log 2>&1 &
PSSPID=$!
for i in $(seq 100); do $B/mobius --socket $T/d.sock --timeout-seconds 1 health >/dev/null 2>&1 && break; sleep 0.1; done
setpriv --reuid=$U --regid=$U --init-groups $B/mobius --socket $T/d.sock submit $T/home/job.yaml --wait > $T/submit.log 2>&1 || true
setpriv --reuid=$U --regid=$U --init-groups $B/mobius --socket $T/d.sock describe j-000001 --json > $T/job.json
pkill -TERM -f "^$B/mobiusd --socket $T/d.sock" || true
wait $PSSPID || true
python3 - <<P
import json
j=json.load(open("$T/job.json")); p=json.load(open("$T/peak.json"))["peak"]
plan=json.loads(j.get("plan_json") or "{}") if isinstance(j.get("plan_json"),str) else {}
print("state", j["state"], j.get("state_reason",""))
ws=[q for q in p["processes"] if q["comm"]=="mobius-worker"]
print("peak PSS %.1f MiB over %d processes (%d workers)"%(p["pss_bytes"]/2**20,len(p["processes"]),len(ws)))
P
grep -o '"host_bytes":[0-9]*' $T/job.json || true
grep -h "needs .* MiB host memory\|cgroup\|multi-user" $T/daemon.log | head -3
stat -c '%U %a %n' $T/state/users/*/jobs/j-000001/checkpoints/* | head -5
