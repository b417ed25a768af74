#!/usr/bin/env python3
"""Writes a MOBTOKv1 token file (common/data/token_file.h) of random ids, one document:
the data for memory and throughput benchmarks, whose numbers do not depend on the text.

  tokens.py OUT.tok --vocab 32000 --tokens 200000 [--seed 1]
"""
import argparse
import random
import struct

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--vocab", type=int, required=True)
ap.add_argument("--tokens", type=int, required=True)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
width = 2 if a.vocab <= 65536 else 4
rng = random.Random(a.seed)
with open(a.out, "wb") as f:
    f.write(b"MOBTOKv1" + struct.pack("<IIQQQQQQ", 64, width, a.vocab, a.tokens, 1, 0, 0, 0))
    fmt = "<%d%s" % (a.tokens, "H" if width == 2 else "I")
    f.write(struct.pack(fmt, *(rng.randrange(a.vocab) for _ in range(a.tokens))))
    f.write(struct.pack("<QQ", 0, a.tokens))
