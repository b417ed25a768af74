#!/usr/bin/env bash
# Our LoRA outputs, read by Hugging Face itself (issue 19): for a Llama (GQA) and a GPT-2 model
# (c_attn fused, Conv1D weights: PEFT's fan_in_fan_out), `mobius-worker train --standalone`
# trains adapters on every linear of the blocks and writes a checkpoint; then, on the same batch:
#   ours    the loss of those adapters in our trainer (a 1-step run from --lora_init with lr ~0:
#           step 1's loss is computed before the update), bf16 weights and activations
#   peft    PeftModel.from_pretrained(base, checkpoint) in transformers, fp32
#   merged  transformers on `mobius export --merge CHECKPOINT OUT --dtype fp32`, fp32
#   base    transformers on the base model alone
# (Llama, GPT-2, Mixtral with adapters on every expert, Qwen3-MoE and gpt-oss where transformers
# has them, and a Llama trained over an NF4 base: PEFT and the merged model over its NF4 round
# trip),
# and checks |ours - peft| <= 5e-4 |peft| (bf16 against fp32; observed 1e-5 to 1.2e-4), |merged - peft| <=
# 1e-5 |peft| (the same fp32 model, merged or not), and that the adapters matter: |peft - base|
# >= 20 x the first tolerance. The data is one batch (B sequences of T+1 tokens, stride T, the
# loader's packing): the loader's shuffle only reorders it.
#
#   peft_roundtrip_test.sh BIN_DIR
# Needs a Python with torch, transformers and peft (0.10): $MOBIUS_PEFT_PYTHON, else the venv
# deploy/install-deps.sh makes (~/.cache/mobius/peft-venv), else python3; exits 77 (ctest:
# skipped) without one. About 70 seconds.
set -euo pipefail
BIN=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${MOBIUS_PEFT_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/mobius/peft-venv}
PY=${MOBIUS_PEFT_PYTHON:-python3}
if [[ -z ${MOBIUS_PEFT_PYTHON:-} && -x $VENV/bin/python ]]; then PY=$VENV/bin/python; fi
if ! "$PY" -c "import numpy, torch, transformers, peft" >/dev/null 2>&1; then
  echo "SKIP: no Python with numpy, torch, transformers and peft ($PY); set MOBIUS_PEFT_PYTHON"
  exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$PY" - "$T/data.u16" <<'PYEOF'
import sys
import numpy as np
x = [1]
for _ in range(4 * 32):
    x.append((x[-1] * 7 + 3) % 512)
np.array(x, dtype=np.uint16).tofile(sys.argv[1])
PYEOF
fail=0
check() {  # name family init-model-flags targets [nf4]
  local name=$1 family=$2 shape=$3 targets=$4 d=$T/$1 base_flags=() nf4=()
  if [[ ${5:-} == nf4 ]]; then base_flags=(--lora_base nf4); nf4=(--nf4); fi
  mkdir -p "$d"
  # shellcheck disable=SC2086
  "$BIN/mobius-worker" init-model --family "$family" $shape --vocab 512 --out "$d/model" \
    >/dev/null 2>&1
  local common=(--standalone --model "$d/model" --data "$T/data.u16" --data_raw_bytes 2
                --batch 4 --microbatch 4 --seq 32 --warmup 0 --schedule constant
                --weight_decay 0 --lora_rank 8 --lora_alpha 16 --lora_targets "$targets"
                "${base_flags[@]}")
  "$BIN/mobius-worker" train "${common[@]}" --steps 30 --lr 3e-2 --checkpoint_dir "$d/ckpt" \
    --checkpoint_every 30 >/dev/null 2>"$d/train.err"
  local ckpt=$d/ckpt/checkpoint-00000030
  local ours
  ours=$("$BIN/mobius-worker" train "${common[@]}" --steps 1 --lr 1e-30 --lora_init "$ckpt" \
         2>/dev/null | sed -n 's/^step 1\/1 | loss \([0-9.]*\) .*/\1/p')
  "$BIN/mobius" export --merge "$ckpt" "$d/merged" --dtype fp32 >/dev/null
  local loss="$PY $SRC/test/reference/peft_roundtrip.py --tokens $T/data.u16 --seq 32"
  local peft merged base
  peft=$($loss --model "$d/model" --adapter "$ckpt" "${nf4[@]}" | cut -d' ' -f2)
  merged=$($loss --model "$d/merged" | cut -d' ' -f2)
  base=$($loss --model "$d/model" "${nf4[@]}" | cut -d' ' -f2)
  echo "$name: ours $ours  peft $peft  merged $merged  base $base"
  if ! "$PY" - "$ours" "$peft" "$merged" "$base" <<'PYEOF'
import sys
ours, peft, merged, base = map(float, sys.argv[1:])
tol = 5e-4 * abs(peft)
ok = abs(ours - peft) <= tol and abs(merged - peft) <= 1e-5 * abs(peft) and abs(peft - base) >= 20 * tol
print("  |ours-peft| %.2e (tol %.2e)  |merged-peft| %.2e  |peft-base| %.3f  %s" % (
    abs(ours - peft), tol, abs(merged - peft), abs(peft - base), "ok" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PYEOF
  then fail=1; fi
}
# A full fine-tuning checkpoint read by transformers itself: ours (a 1-step run from the
# checkpoint, lr ~0) against transformers on the checkpoint directory, same tolerance, and the
# training must have moved it (|hf - base| >= 20 x tol).
check_full() {  # name family init-model-flags
  local name=$1 family=$2 shape=$3 d=$T/$1
  mkdir -p "$d"
  # shellcheck disable=SC2086
  "$BIN/mobius-worker" init-model --family "$family" $shape --vocab 512 --out "$d/model" \
    >/dev/null 2>&1
  local common=(--standalone --data "$T/data.u16" --data_raw_bytes 2 --batch 4 --microbatch 4
                --seq 32 --warmup 0 --schedule constant --weight_decay 0)
  "$BIN/mobius-worker" train "${common[@]}" --model "$d/model" --steps 10 --lr 1e-3 \
    --checkpoint_dir "$d/ckpt" --checkpoint_every 10 >/dev/null 2>"$d/train.err"
  local ckpt=$d/ckpt/checkpoint-00000010
  local ours hf base
  ours=$("$BIN/mobius-worker" train "${common[@]}" --model "$ckpt" --steps 1 --lr 1e-30 \
         2>/dev/null | sed -n 's/^step 1\/1 | loss \([0-9.]*\) .*/\1/p')
  local loss="$PY $SRC/test/reference/peft_roundtrip.py --tokens $T/data.u16 --seq 32"
  hf=$($loss --model "$ckpt" | cut -d' ' -f2)
  base=$($loss --model "$d/model" | cut -d' ' -f2)
  echo "$name: ours $ours  transformers $hf  base $base"
  if ! "$PY" - "$ours" "$hf" "$base" <<'PYEOF'
import sys
ours, hf, base = map(float, sys.argv[1:])
tol = 5e-4 * abs(hf)
ok = abs(ours - hf) <= tol and abs(hf - base) >= 20 * tol
print("  |ours-hf| %.2e (tol %.2e)  |hf-base| %.3f  %s" % (abs(ours - hf), tol, abs(hf - base),
                                                         "ok" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PYEOF
  then fail=1; fi
}
check llama llama "--layers 2 --hidden 128 --heads 4 --kv_heads 2 --intermediate 352" \
  q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj
# QLoRA: trained over the NF4 base; PEFT over that base as peft_roundtrip.py --nf4 makes it from
# the definition, and our export --merge into the base's NF4 rounding.
check llama_nf4 llama "--layers 2 --hidden 128 --heads 4 --kv_heads 2 --intermediate 352" \
  q_proj,v_proj,down_proj nf4
check gpt2 gpt2 "--layers 2 --hidden 128 --heads 4" c_attn,c_proj,c_fc
# Mixtures of experts: adapters on every expert as PEFT names them, and full checkpoints.
MIXTRAL="--layers 2 --hidden 128 --heads 4 --kv_heads 2 --intermediate 96 --experts 4 --experts_per_token 2"
check mixtral mixtral "$MIXTRAL" q_proj,v_proj,w1,w2,w3
check_full mixtral_full mixtral "$MIXTRAL"
if "$PY" -c "import transformers, sys; sys.exit(0 if hasattr(transformers, 'Qwen3MoeForCausalLM') else 1)"; then
  QWEN3_MOE="--layers 2 --hidden 128 --heads 4 --kv_heads 2 --head_dim 32 --intermediate 192 --experts 8 --experts_per_token 2 --expert_intermediate 64"
  check qwen3_moe qwen3_moe "$QWEN3_MOE" q_proj,o_proj,gate_proj,up_proj,down_proj
  check_full qwen3_moe_full qwen3_moe "$QWEN3_MOE"
else
  echo "qwen3_moe: skipped (transformers $("$PY" -c 'import transformers; print(transformers.__version__)') has no Qwen3-MoE; 4.51+ does)"
fi
# gpt-oss: its checkpoints hold each expert tensor fused per layer, as transformers writes them;
# LoRA adapts its attention (the fused experts are not LoRA modules here).
if "$PY" -c "import transformers, sys; sys.exit(0 if hasattr(transformers, 'GptOssForCausalLM') else 1)"; then
  GPT_OSS="--layers 2 --hidden 128 --heads 4 --kv_heads 2 --head_dim 32 --intermediate 96 --experts 4 --experts_per_token 2"
  check gpt_oss gpt_oss "$GPT_OSS" q_proj,k_proj,v_proj,o_proj
  check_full gpt_oss_full gpt_oss "$GPT_OSS"
else
  echo "gpt_oss: skipped (transformers $("$PY" -c 'import transformers; print(transformers.__version__)') has no gpt-oss; 4.55+ does)"
fi
exit $fail
