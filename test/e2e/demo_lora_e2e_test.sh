#!/usr/bin/env bash
# End-to-end, LoRA: the README's main job (scripts/demo.sh) as a LoRA job (MOBIUS_DEMO_LORA=8:
# rank 8 on every linear, the base frozen) through the daemon, on the binaries of this build.
# Asserts: the job SUCCEEDED and its loss fell; its checkpoint is a PEFT adapter (adapter_config
# .json with the job's rank and targets, adapter_model.safetensors, no base weights) and the
# summary says so; `mobius generate` with that adapter produced text; `mobius export --merge`
# writes a Hugging Face model that the standalone trainer loads and trains a step on.
# Usage: demo_lora_e2e_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD=$1
SRC=$2
TMP=$(mktemp -d /tmp/mobius-e2e-lora-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

set +e
MOBIUS_SKIP_INSTALL=1 MOBIUS_SKIP_BUILD=1 MOBIUS_BUILD_DIR="$BUILD" MOBIUS_DEMO_DIR="$TMP/demo" \
  MOBIUS_DEMO_STEPS=8 MOBIUS_DEMO_LAYERS=4 MOBIUS_DEMO_STAGES=4 MOBIUS_DEMO_GPUS=2 \
  MOBIUS_DEMO_LORA=8 "$SRC/scripts/demo.sh" >"$TMP/out.txt" 2>&1
rc=$?
set -e
cat "$TMP/out.txt"
[[ $rc -eq 0 ]] || fail "demo.sh exited $rc"
grep -q "job j-000001 SUCCEEDED" "$TMP/out.txt" || fail "the job did not succeed"
read -r first last < <(sed -n 's/.*loss \([0-9.]*\) -> \([0-9.]*\) over.*/\1 \2/p' "$TMP/out.txt")
python3 -c "import sys; sys.exit(0 if float('$last') < float('$first') else 1)" ||
  fail "the loss did not fall: $first -> $last"
ckpt=$(sed -n "s/.*checkpoint: \([^ ]*\) (a PEFT adapter.*/\1/p" "$TMP/out.txt")
[[ -n "$ckpt" && -f "$ckpt/DONE" ]] || fail "no complete checkpoint announced as a PEFT adapter"
[[ -f "$ckpt/adapter_model.safetensors" && ! -e "$ckpt/model.safetensors" ]] ||
  fail "$ckpt is not an adapter checkpoint"
python3 - "$ckpt/adapter_config.json" <<'PY' || fail "adapter_config.json is not the job's"
import json, sys
c = json.load(open(sys.argv[1]))
want = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
ok = c["peft_type"] == "LORA" and c["r"] == 8 and c["lora_alpha"] == 16 and set(c["target_modules"]) == want
sys.exit(0 if ok else 1)
PY
text=$(sed -n '/the trained adapter, generating/{n;p}' "$TMP/out.txt")
[[ -n "${text// /}" && $text != *"generate failed"* ]] || fail "mobius generate with the adapter printed nothing"
"$BUILD/bin/mobius" export --merge "$ckpt" "$TMP/merged" >"$TMP/export.txt" 2>&1 ||
  { cat "$TMP/export.txt"; fail "mobius export --merge failed"; }
[[ -f "$TMP/merged/config.json" && -f "$TMP/merged/tokenizer.json" ]] ||
  fail "the merged model lacks config.json or the tokenizer"
"$BUILD/bin/mobius-worker" train --standalone --model "$TMP/merged" --data "$TMP/demo/data.tok" \
  --steps 1 --batch 2 --seq 32 --threads 1 >"$TMP/load.txt" 2>&1 ||
  { cat "$TMP/load.txt"; fail "the merged model does not load"; }
"$BUILD/bin/mobius" generate "$TMP/merged" --prompt "Permission is hereby granted" \
  --max_new_tokens 8 --threads 1 >"$TMP/gen-merged.txt" 2>&1 ||
  { cat "$TMP/gen-merged.txt"; fail "mobius generate on the merged model failed"; }
echo "ok: LoRA demo succeeded, loss $first -> $last, adapter $ckpt, generated: $text; merged model loads"
