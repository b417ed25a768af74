#!/usr/bin/env python3
"""Hugging Face `tokenizers` side of the tokenization benchmark: same documents, same thread count
(RAYON_NUM_THREADS is set by run.sh before import). Prints "hf <threads> <seconds> <MB/s> <tokens>"."""
import sys
import time

from tokenizers import Tokenizer

tok_dir, text_file, threads, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
tok = Tokenizer.from_file(tok_dir + "/tokenizer.json")
text = open(text_file, encoding="utf-8").read()
docs = text.split("\n\n")
for _ in range(reps):
    t0 = time.perf_counter()
    enc = tok.encode_batch(docs, add_special_tokens=False)
    s = time.perf_counter() - t0
    print(f"hf {threads} {s:.4f} {len(text.encode()) / 1e6 / s:.2f} {sum(len(e.ids) for e in enc)}",
          flush=True)
