#!/usr/bin/env bash
# Trains the SentencePiece fixture (Llama 2 / Mistral style: BPE, byte fallback, split digits,
# dummy prefix, identity normalisation, spaces kept, <unk>=0 <s>=1 </s>=2) on the licence texts Debian ships, with Debian's
# `sentencepiece` tools, and writes golden ids with spm_encode. Deterministic for a given
# sentencepiece version (0.1.97 in Debian 12).
set -euo pipefail
cd "$(dirname "$0")/sentencepiece"
corpus=$(mktemp)
cat /usr/share/common-licenses/{GPL-3,Apache-2.0,LGPL-2.1,MPL-2.0,Artistic,BSD} > "$corpus"
spm_train --input="$corpus" --model_prefix=tokenizer --model_type=bpe --vocab_size=600 \
  --byte_fallback=true --split_digits=true --character_coverage=1.0 --num_threads=1 \
  --normalization_rule_name=identity --remove_extra_whitespaces=false \
  --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 --minloglevel=2 >/dev/null 2>&1
rm -f "$corpus" tokenizer.vocab
cases=cases.txt
printf '%s\n' "Hello, world! This is Mobius." "  leading and trailing spaces   " \
  "numbers: 0 7 42 1234567 3.14159" "Unicode: café naïve Straße über — “quotes” ½" \
  "CJK: 你好世界 한국어" "emoji: 👋🏽 🧑‍💻 ❤️" "GNU GENERAL PUBLIC LICENSE Version 3" > "$cases"
spm_encode --model=tokenizer.model --output_format=id < "$cases" > golden_ids.txt
