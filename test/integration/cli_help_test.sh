#!/usr/bin/env bash
# `mobius VERB --help` for every verb: exit 0, the verb's usage and its own flags on stdout;
# `mobius --help` and `mobius help`: the global usage, exit 0; an unknown verb: exit 2.
#   cli_help_test.sh BIN_DIR
set -uo pipefail
MOBIUS=$1/mobius
fail=0
check() {  # check VERB FLAG...: `mobius VERB --help` exits 0 and mentions every FLAG
  local verb=$1; shift
  local out rc
  out=$("$MOBIUS" "$verb" --help 2>/tmp/cli_help_err.$$); rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "FAIL: mobius $verb --help exited $rc: $(cat /tmp/cli_help_err.$$)"; fail=1; return
  fi
  if ! grep -q "^Usage: mobius $verb" <<<"$out"; then
    echo "FAIL: mobius $verb --help has no 'Usage: mobius $verb':"; echo "$out"; fail=1
  fi
  if grep -q "No flags matched" <<<"$out$(cat /tmp/cli_help_err.$$)"; then
    echo "FAIL: mobius $verb --help: 'No flags matched'"; fail=1
  fi
  for flag in "$@"; do
    grep -q -- "^  $flag (default: " <<<"$out" || { echo "FAIL: mobius $verb --help lacks $flag"; fail=1; }
  done
  # The same through `mobius help VERB`, and with the flag before the verb.
  [[ "$("$MOBIUS" help "$verb" 2>/dev/null)" == "$out" ]] || { echo "FAIL: mobius help $verb"; fail=1; }
  [[ "$("$MOBIUS" --help "$verb" 2>/dev/null)" == "$out" ]] || { echo "FAIL: --help $verb"; fail=1; }
}
CONN=(--socket --daemon --tls-ca --tls-cert --tls-key --tls-server-name --token-file
      --timeout-seconds)
check topo --topology-file --json --xml "${CONN[@]}"
check plan --model --topology-file --batch --microbatch --seq --schedule --partitioner --mapper \
      --gpus --gpu-memory-gib --host-memory-gib --emulated-gpus --efficiency --peak-tflops \
      --mip-time-limit-seconds --link-scale --profile --profile-cache-dir --worker-binary --json \
      --trace "${CONN[@]}"
check health "${CONN[@]}"
check submit --wait --submission-id --json "${CONN[@]}"
check ls --state --json "${CONN[@]}"
check run --topology-file --gpus --run-dir --link-scale --emulate-links --backend --transport \
      --resume --nodes --node-rank --rendezvous
check describe --json "${CONN[@]}"
check logs --follow -f "${CONN[@]}"
check watch "${CONN[@]}"
check cancel --json "${CONN[@]}"
check queue --json "${CONN[@]}"
check node --json "${CONN[@]}"
check drain "${CONN[@]}"
check undrain "${CONN[@]}"
check quota --max-gpus --max-running-jobs --json "${CONN[@]}"
check tokenize --tokenizer --format --text-field --prompt-field --completion-field \
      --messages-field --chat-template --skip-bad-lines --eos-id --threads
check export --merge --base --dtype --worker-binary
check generate --adapter --prompt --prompt-ids --max-new-tokens --temperature --top-p --seed \
      --backend --threads --worker-binary
# A flag of the verb before --help: `mobius export --merge --help`.
"$MOBIUS" export --merge --help | grep -q "^Usage: mobius export --merge" ||
  { echo "FAIL: mobius export --merge --help"; fail=1; }
# A help flag in the middle of a real command line, e.g. with a job id and a connection flag.
"$MOBIUS" logs -f --socket /nonexistent j-000001 -h | grep -q "^Usage: mobius logs" ||
  { echo "FAIL: mobius logs ... -h"; fail=1; }
for args in "--help" "help" "-h"; do
  out=$("$MOBIUS" $args 2>&1); rc=$?
  [[ $rc -eq 0 ]] || { echo "FAIL: mobius $args exited $rc"; fail=1; }
  grep -q "^Usage: mobius \[flags\] COMMAND" <<<"$out" || { echo "FAIL: mobius $args: $out"; fail=1; }
done
"$MOBIUS" frobnicate --help >/dev/null 2>&1; rc=$?
[[ $rc -eq 2 ]] || { echo "FAIL: mobius frobnicate --help exited $rc, want 2"; fail=1; }
rm -f /tmp/cli_help_err.$$
[[ $fail -eq 0 ]] && echo "PASS: every verb's --help"
exit $fail
