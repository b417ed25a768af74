#!/usr/bin/env bash
# Chat data tokenization: the model's own Jinja template (rendered by Python's jinja2 in renderer
# children, common/data/chat_template.h) next to the built-in chatml template (C++), with the same
# tokenizer (the chat fixture's byte-level BPE), through `mobius tokenize` as a user runs it.
# Generates SIZE_MB of chat JSONL (a system prompt and 1-3 user/assistant turns of licence text
# per line, deterministic), then alternates the two REPS times. Prints the per-run lines and a
# table (median MB/s of JSONL, min-max, and the ratio).
#   bench/tokenize/chat_run.sh [SIZE_MB] [REPS] [TEMPLATE]   BUILD_DIR=build, THREADS=nproc;
#   TEMPLATE: a directory of test/data/chat_templates (default qwen3)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
SIZE_MB=${1:-100}
REPS=${2:-3}
TEMPLATE=${3:-qwen3}
THREADS=${THREADS:-$(nproc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/model"
cp test/data/chat_templates/tokenizer.json "$work/model/"
cp test/data/chat_templates/"$TEMPLATE"/tokenizer_config.json "$work/model/"
if [ -f test/data/chat_templates/"$TEMPLATE"/chat_template.jinja ]; then
  cp test/data/chat_templates/"$TEMPLATE"/chat_template.jinja "$work/model/"
fi
python3 - "$work/chat.jsonl" "$SIZE_MB" <<'PY'
import json, random, sys
random.seed(7)
words = " ".join(open("/usr/share/common-licenses/" + n).read()
                 for n in ("GPL-3", "Apache-2.0", "LGPL-2.1", "MPL-2.0")).split()
def text(n):
    i = random.randrange(len(words) - n)
    return " ".join(words[i:i + n])
limit, size = float(sys.argv[2]) * 1e6, 0
with open(sys.argv[1], "w") as f:
    while size < limit:
        m = [{"role": "system", "content": text(12)}]
        for _ in range(random.randint(1, 3)):
            m.append({"role": "user", "content": text(random.randint(10, 60))})
            m.append({"role": "assistant", "content": text(random.randint(20, 120))})
        line = json.dumps({"messages": m}) + "\n"
        f.write(line)
        size += len(line)
PY
bytes=$(stat -c %s "$work/chat.jsonl")
out="$work/runs.txt"
for _ in $(seq 1 "$REPS"); do
  for who in model chatml; do
    args=(--chat_template "$who")
    [ "$who" = model ] && args=()
    start=$(date +%s.%N)
    "$BUILD_DIR/bin/mobius" tokenize "$work/chat.jsonl" "$work/out.tok" --tokenizer "$work/model" \
      --format chat --threads "$THREADS" "${args[@]}" > "$work/summary.txt"
    end=$(date +%s.%N)
    echo "$who $(python3 -c "print($end - $start)") $(cat "$work/summary.txt")" | tee -a "$out"
  done
done
python3 - "$out" "$bytes" "$TEMPLATE" "$THREADS" <<'PY'
import statistics, sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    who, seconds = line.split()[:2]
    rows[who].append(int(sys.argv[2]) / 1e6 / float(seconds))
m, c = rows["model"], rows["chatml"]
ratios = [a / b for a, b in zip(m, c)]
print(f"chat JSONL: {int(sys.argv[2]) / 1e6:.1f} MB, {sys.argv[4]} threads, template {sys.argv[3]}")
print("| template | MB/s (min-max) |")
print("|---|---|")
print(f"| {sys.argv[3]} (Jinja, the model's) | {statistics.median(m):.2f} ({min(m):.2f}-{max(m):.2f}) |")
print(f"| chatml (built-in) | {statistics.median(c):.2f} ({min(c):.2f}-{max(c):.2f}) |")
print(f"| model / built-in | {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |")
PY
