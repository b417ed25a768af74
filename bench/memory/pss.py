#!/usr/bin/env python3
"""Peak host memory of a command and every process it starts, as the kernel accounts it.

Runs COMMAND, and every INTERVAL seconds sums the PSS (proportional set size, from
/proc/PID/smaps_rollup) of the command's process and all its descendants: a page shared by k of
them counts 1/k in each, so shared memory (the job's host store, the model file's page-cache pages
while mapped) counts once in the sum. Writes a JSON summary: the peak of the sum, the per-process
breakdown at that moment (private vs shared), and the command's exit code.

  pss.py --out peak.json [--interval 0.2] -- mobius run job.yaml ...
"""
import argparse
import json
import os
import subprocess
import sys
import time


def children_map():
    """pid -> ppid for every process we can see."""
    parent = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # comm may contain spaces and parentheses: the fields after the last ')'.
        rest = stat[stat.rfind(")") + 2:].split()
        parent[int(entry)] = int(rest[1])
    return parent


def descendants(root):
    parent = children_map()
    tree = {root}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return tree


def rollup(pid):
    """{'Pss': kB, 'Pss_Anon', 'Pss_File', 'Pss_Shmem', 'Rss'} or None if gone."""
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                    out[parts[0][:-1]] = int(parts[1])
        with open(f"/proc/{pid}/comm") as f:
            out["comm"] = f.read().strip()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            out["cmdline"] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return None
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    if not cmd:
        ap.error("no command")
    start = time.monotonic()
    proc = subprocess.Popen(cmd)
    peak = {"pss_bytes": 0}
    samples = 0
    while proc.poll() is None:
        procs = {}
        for pid in descendants(proc.pid):
            r = rollup(pid)
            if r is not None:
                procs[pid] = r
        total = sum(r.get("Pss", 0) for r in procs.values()) * 1024
        samples += 1
        if total > peak["pss_bytes"]:
            peak = {
                "pss_bytes": total,
                "at_seconds": round(time.monotonic() - start, 2),
                "processes": [
                    {"pid": pid, "comm": r.get("comm"), "cmdline": r.get("cmdline"),
                     "pss_bytes": r.get("Pss", 0) * 1024,
                     "pss_anon_bytes": r.get("Pss_Anon", 0) * 1024,
                     "pss_shmem_bytes": r.get("Pss_Shmem", 0) * 1024,
                     "pss_file_bytes": r.get("Pss_File", 0) * 1024,
                     "rss_bytes": r.get("Rss", 0) * 1024}
                    for pid, r in sorted(procs.items())],
            }
        time.sleep(a.interval)
    result = {"command": cmd, "exit_code": proc.returncode, "samples": samples,
              "seconds": round(time.monotonic() - start, 2), "peak": peak}
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"pss.py: peak {peak['pss_bytes'] / 2**30:.2f} GiB over {samples} samples, "
          f"exit {proc.returncode}", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
