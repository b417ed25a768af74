#!/usr/bin/env bash
# Tokenization throughput: ours vs Hugging Face `tokenizers` (pip install tokenizers), alternating,
# on ~20 MB of the licence texts Debian ships, per fixture tokenizer and thread count.
# Prints the per-run lines and a summary (median MB/s, ratio ours/hf with min-max).
#   bench/tokenize/run.sh [REPS]       BUILD_DIR=build by default
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
REPS=${1:-5}
text=$(mktemp)
for _ in $(seq 1 40); do cat /usr/share/common-licenses/{GPL-3,Apache-2.0,LGPL-2.1,MPL-2.0}; done > "$text"
out=$(mktemp)
for tok in gpt2 llama3 qwen2; do
  for threads in 1 2; do
    for _ in $(seq 1 "$REPS"); do
      "$BUILD_DIR/bench/tokenize_bench" "test/data/tokenizers/$tok" "$text" "$threads" 1 | sed "s/^/$tok /" >> "$out"
      RAYON_NUM_THREADS=$threads python3 bench/tokenize/hf_tokenize.py "test/data/tokenizers/$tok" "$text" "$threads" 1 | sed "s/^/$tok /" >> "$out"
    done
  done
done
python3 - "$out" "$(stat -c %s "$text")" <<'PY'
import statistics, sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    tok, who, threads, s, mbs, n = line.split()
    rows[(tok, int(threads), who)].append((float(mbs), int(n)))
print(f"text: {int(sys.argv[2]) / 1e6:.1f} MB")
print("| tokenizer | threads | ours MB/s (min-max) | HF tokenizers MB/s (min-max) | ours / HF | same tokens |")
print("|---|---|---|---|---|---|")
for tok in ("gpt2", "llama3", "qwen2"):
    for t in (1, 2):
        a, b = rows[(tok, t, "ours")], rows[(tok, t, "hf")]
        ma, mb = [x for x, _ in a], [x for x, _ in b]
        ratios = [x / y for x, y in zip(ma, mb)]
        same = all(x[1] == y[1] for x, y in zip(a, b))
        print(f"| {tok} | {t} | {statistics.median(ma):.1f} ({min(ma):.1f}-{max(ma):.1f}) | "
              f"{statistics.median(mb):.1f} ({min(mb):.1f}-{max(mb):.1f}) | "
              f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) | {same} |")
PY
rm -f "$text" "$out"
