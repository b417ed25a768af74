#!/usr/bin/env python3
"""This machine's ceilings for the store fill and the checkpoint, measured in the benchmark's run
(bench/memory/run.sh): the rate at which fresh pages of an anonymous memory file (memfd, what the
host store is) can be populated and written, the rate of reading a file back from the page cache,
and the rate of writing a file with fdatasync to the benchmark's directory. Prints JSON (MB/s).

  baselines.py --dir DIR --populate_bench build/bin/populate_bench [--mib 2048]
"""
import argparse
import json
import subprocess
import os
import time

ap = argparse.ArgumentParser()
ap.add_argument("--dir", required=True)
ap.add_argument("--mib", type=int, default=2048)
ap.add_argument("--populate_bench", required=True, help="build/bin/populate_bench")
a = ap.parse_args()
size = a.mib << 20
out = {}

# Fresh memfd pages written for the first time (the store's first touch): populate_bench, C++.
r = subprocess.run([a.populate_bench, str(a.mib), "5"], capture_output=True, text=True, check=True)
out.update(json.loads(r.stdout))

# A file written with fdatasync (the checkpoint's durability), then read back from the page cache.
path = os.path.join(a.dir, "baseline.bin")
block = b"\1" * (64 << 20)
t = time.monotonic()
with open(path, "wb") as f:
    for _ in range(size // len(block)):
        f.write(block)
    f.flush()
    os.fdatasync(f.fileno())
out["write_fdatasync_mb_s"] = size / 1e6 / (time.monotonic() - t)
buf = bytearray(64 << 20)
t = time.monotonic()
with open(path, "rb") as f:
    while f.readinto(buf):
        pass
out["read_page_cache_mb_s"] = size / 1e6 / (time.monotonic() - t)
os.unlink(path)
print(json.dumps({k: round(v) for k, v in out.items()}))
