#!/usr/bin/env bash
# The README's main job: Mobius fine-tunes a model on an emulated commodity GPU server.
#
# On a fresh Debian 12 machine: installs the dependencies, builds, starts mobiusd with the embedded
# default (the CPU backend emulating the Mobius paper's testbed: 2 sockets, a PCIe 3.0 switch per
# socket, 8 RTX 3090s, with every PCIe link emulated), creates a small Llama-style model in Hugging
# Face format (weights cannot be downloaded here; pass your own with MOBIUS_MODEL_DIR), prepares a
# dataset from the licence texts every Debian system ships (or MOBIUS_DATA=your.jsonl), submits the
# job with `mobius submit --wait` (live progress bar), and ends with a summary: loss first -> last,
# tokens/s, bytes per emulated PCIe link, the measured step time against the planner's prediction
# for this emulated run (`mobius plan --emulated-gpus --profile measured --link-scale`), the job's
# plan for the real GPUs, the checkpoint and how to load it. Stops the daemon it started.
#
#   scripts/demo.sh
#   MOBIUS_DEMO_STEPS=10 MOBIUS_SKIP_INSTALL=1 scripts/demo.sh      # smaller, no apt-get
#
# Knobs (environment): MOBIUS_BUILD_DIR (build), MOBIUS_SKIP_INSTALL, MOBIUS_SKIP_BUILD,
# MOBIUS_DEMO_DIR (a fresh temp dir), MOBIUS_DEMO_STEPS (40), MOBIUS_DEMO_GPUS (4),
# MOBIUS_DEMO_STAGES (8), MOBIUS_DEMO_LAYERS (8), MOBIUS_LINK_SCALE (0.02),
# MOBIUS_MODEL_DIR + MOBIUS_TOKENIZER_DIR (your own model and its tokenizer), MOBIUS_DATA (a JSONL
# or text file), MOBIUS_TOPOLOGY (an hwloc XML of the server to emulate), MOBIUS_DEMO_LORA=R (a
# LoRA job instead: rank R adapters on every linear, the base frozen; the summary then shows
# `mobius generate` with the trained adapter and the `mobius export --merge` command).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
cd "$SRC"
BUILD=${MOBIUS_BUILD_DIR:-build}
STEPS=${MOBIUS_DEMO_STEPS:-40}
GPUS=${MOBIUS_DEMO_GPUS:-4}
STAGES=${MOBIUS_DEMO_STAGES:-8}
LAYERS=${MOBIUS_DEMO_LAYERS:-8}
SCALE=${MOBIUS_LINK_SCALE:-0.02}
TOPOLOGY=${MOBIUS_TOPOLOGY:-$SRC/test/data/topology/paper_testbed_2s_2sw_8x3090.xml}
say() { printf '\n==> %s\n' "$*"; }

if [[ -z "${MOBIUS_SKIP_INSTALL:-}" ]]; then
  say "installing dependencies (Debian packages)"
  deploy/install-deps.sh
fi
if [[ -z "${MOBIUS_SKIP_BUILD:-}" ]]; then
  say "building mobiusd, mobius and mobius-worker"
  # Reuse an existing build directory as configured (e.g. the one scripts/test.sh made).
  if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOBIUS_TESTS=OFF >/dev/null
  fi
  cmake --build "$BUILD" -j "$(nproc)" --target mobiusd mobius mobius-worker
fi
BIN=$(cd "$BUILD/bin" && pwd)

WORK=${MOBIUS_DEMO_DIR:-$(mktemp -d /tmp/mobius-demo-XXXXXX)}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
export MOBIUS_SOCKET=$WORK/mobiusd.sock
DAEMON_PID=
stop_daemon() {
  if [[ -n "$DAEMON_PID" ]] && kill -0 "$DAEMON_PID" 2>/dev/null; then
    kill -TERM "$DAEMON_PID"
    wait "$DAEMON_PID" 2>/dev/null || true
  fi
}
trap stop_daemon EXIT

# --- model and tokenizer
if [[ -n "${MOBIUS_MODEL_DIR:-}" ]]; then
  MODEL=$(cd "$MOBIUS_MODEL_DIR" && pwd)
  TOKENIZER=${MOBIUS_TOKENIZER_DIR:-$MODEL}
else
  say "creating a small Llama-style model (seeded random weights, Hugging Face format)"
  TOKENIZER=${MOBIUS_TOKENIZER_DIR:-$SRC/test/data/tokenizers/gpt2}
  VOCAB=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['model']['vocab']))" \
          "$TOKENIZER/tokenizer.json")
  MODEL=$WORK/model
  "$BIN/mobius-worker" init-model --family llama --preset tiny --layers "$LAYERS" --hidden 128 \
      --heads 4 --kv_heads 2 --intermediate 384 --vocab "$VOCAB" --out "$MODEL" >/dev/null
  # Its tokenizer next to it, as in any Hugging Face model directory (generate and export use it).
  for f in tokenizer.json tokenizer_config.json special_tokens_map.json tokenizer.model; do
    if [[ -f "$TOKENIZER/$f" ]]; then cp "$TOKENIZER/$f" "$MODEL/"; fi
  done
  echo "model: $MODEL ($LAYERS layers, hidden 128, vocab $VOCAB; tokenizer $TOKENIZER)"
fi

# --- dataset
say "preparing the dataset"
if [[ -n "${MOBIUS_DATA:-}" ]]; then
  DATA_IN=$MOBIUS_DATA
else
  DATA_IN=$WORK/licenses.jsonl
  python3 - "$DATA_IN" <<'EOF'
import json, os, sys
root = "/usr/share/common-licenses"
with open(sys.argv[1], "w") as out:
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if os.path.isfile(path) and not os.path.islink(path):
            out.write(json.dumps({"text": open(path, errors="replace").read()}) + "\n")
EOF
fi
"$BIN/mobius" tokenize "$DATA_IN" "$WORK/data.tok" --tokenizer "$TOKENIZER"

# --- the daemon
say "starting mobiusd: CPU backend emulating $(basename "$TOPOLOGY") (PCIe links x$SCALE)"
"$BIN/mobiusd" --socket "$MOBIUS_SOCKET" --state-dir "$WORK/state" --topology-file "$TOPOLOGY" \
    --link-scale "$SCALE" --metrics-address 127.0.0.1:0 >"$WORK/mobiusd.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 1 100); do
  "$BIN/mobius" --timeout-seconds 1 health >/dev/null 2>&1 && break
  kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$WORK/mobiusd.log"; exit 1; }
  sleep 0.1
done
grep -o "Prometheus metrics on [^ ]* (port [0-9]*)" "$WORK/mobiusd.log" || true
"$BIN/mobius" node | head -n 9

# --- the job
cat >"$WORK/job.yaml" <<EOF
name: demo
model_dir: $MODEL
dataset:
  path: $WORK/data.tok
  eval_fraction: 0
training:
  steps: $STEPS
  global_batch: 8
  microbatch: 2
  seq_len: 128
  lr: 3e-3
  warmup_steps: 2
  weight_decay: 0.01
resources:
  gpus: $GPUS
plan:
  stages: $STAGES
checkpoint:
  every_steps: $(( STEPS / 2 > 0 ? STEPS / 2 : 1 ))
EOF
LORA=${MOBIUS_DEMO_LORA:-}
if [[ -n "$LORA" ]]; then
  cat >>"$WORK/job.yaml" <<EOF
adapter:
  type: lora
  rank: $LORA
  alpha: $(( 2 * LORA ))
  target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
EOF
fi
say "submitting $WORK/job.yaml ($STEPS steps, $STAGES stages on $GPUS emulated GPUs)"
set +e
"$BIN/mobius" submit "$WORK/job.yaml" --wait | tee "$WORK/submit.txt"
rc=${PIPESTATUS[0]}
set -e

# --- summary
say "summary"
JOB=$("$BIN/mobius" ls --json | python3 -c "import json,sys; print(json.load(sys.stdin)['jobs'][-1]['id'])")
"$BIN/mobius" logs "$JOB" | grep -E "bytes per emulated link|starting:" | sed 's/^daemon | /  /'
CKPT=$("$BIN/mobius" describe "$JOB" --json | python3 -c "import json,sys; print(json.load(sys.stdin).get('checkpoint',''))")
# Step time like for like: the measured step of this emulated run against the planner's prediction
# for the same emulated run (the CPU backend's measured kernel times, every PCIe link scaled as the
# daemon's --link-scale does), not against the job's plan, which is for the real GPUs.
MEASURED=$(sed -n 's/^  step time: measured \([0-9.]*\) s.*/\1/p' "$WORK/submit.txt" | tail -n 1)
STEPS_MEASURED=$(sed -n 's/^  step time: measured [0-9.]* s per step (mean of \(steps [0-9-]*\)).*/\1/p' \
                 "$WORK/submit.txt" | tail -n 1)
REAL=$(sed -n 's/^  the job.s plan predicts \([0-9.]*\) s per step.*/\1/p' "$WORK/submit.txt" | tail -n 1)
# The GPUs the scheduler granted (the daemon's "starting:" log line), so the plan maps the same ones.
GRANTED=$("$BIN/mobius" logs "$JOB" | sed -n 's/.*starting: .* GPU(s) \([0-9,]*\),.*/\1/p' | tail -n 1)
set +e
EMULATED=$("$BIN/mobius" plan "$WORK/job.yaml" --topology-file "$TOPOLOGY" --emulated-gpus \
             ${GRANTED:+--gpus "$GRANTED"} --profile measured --profile-cache-dir "$WORK/profiles" --link-scale "$SCALE" --json \
             2>"$WORK/plan-emulated.log" |
           python3 -c "import json,sys; print('%.3f' % json.load(sys.stdin)['predicted']['step_seconds'])")
set -e
echo "  step time, both numbers for this emulated run (CPU backend, PCIe links x$SCALE):"
echo "    measured:  ${MEASURED:-?} s per step (${STEPS_MEASURED:-the last step}, the job's step reports)"
if [[ -n "$EMULATED" ]]; then
  echo "    predicted: $EMULATED s per step (mobius plan $WORK/job.yaml --emulated-gpus"
  echo "               --profile measured --link-scale $SCALE: the simulator with the CPU backend's"
  echo "               measured kernel times and the emulated links' bandwidth)"
  if (( GPUS > $(nproc) )); then
    echo "    (the simulator gives each emulated GPU a core of its own; here $GPUS workers share" \
         "$(nproc) cores)"
  fi
else
  echo "    predicted: ? (mobius plan --emulated-gpus --profile measured failed: $WORK/plan-emulated.log)"
fi
if [[ -n "$REAL" ]]; then
  echo "  for comparison, the job's plan for the real GPUs of $(basename "$TOPOLOGY") at full PCIe"
  echo "  bandwidth: $REAL s per step (what the same job would take there; not measured here)"
fi
if [[ -n "$LORA" && -n "$CKPT" ]]; then
  PROMPT="Permission is hereby granted"
  echo "  the trained adapter, generating (greedy, 24 tokens) from \"$PROMPT\":"
  set +e
  "$BIN/mobius" generate "$MODEL" --adapter "$CKPT" --prompt "$PROMPT" --max_new_tokens 24 \
    --threads 2 2>"$WORK/generate.log" | sed 's/^/    /'
  [[ ${PIPESTATUS[0]} -eq 0 ]] || echo "    (mobius generate failed: $WORK/generate.log)"
  set -e
  cat <<EOF
  the checkpoint is a PEFT adapter: PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(
    '$MODEL'), '$CKPT'); merged into the base as a Hugging Face model:
    $BIN/mobius export --merge $CKPT merged/
  daemon log: $WORK/mobiusd.log; job state in $WORK/state (SQLite jobs.db, runs, checkpoints)
EOF
  exit $rc
fi
cat <<EOF
  daemon log: $WORK/mobiusd.log; job state in $WORK/state (SQLite jobs.db, runs, checkpoints)
  load the checkpoint (Hugging Face format):
    python3 -c "from transformers import AutoModelForCausalLM; m = AutoModelForCausalLM.from_pretrained('$CKPT')"
  or continue training from it: mobius-worker train --standalone --model $CKPT --data $WORK/data.tok ...
EOF
exit $rc
