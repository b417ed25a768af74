#!/usr/bin/env python3
"""Runs deploy/slurm/mobius-multinode.sbatch the way slurmd would (a batch script with the
SLURM_* environment of a 2-node and a 3-node allocation), with a fake `srun` on PATH that starts
each task as srun would (its SLURM_PROCID, SLURM_NODEID, SLURM_NTASKS, ...) and a fake `mobius`
that records its argv and environment. No Slurm and no multi-node runtime needed.

Checks: srun is asked for one task per node and to kill the step when a task fails; exactly one
`mobius run SPEC --run-dir SUBMIT/mobius-run-JOB-nodeRANK` per node, each with its own rank and
run directory; the spec path survives spaces; MOBIUS_RENDEZVOUS_PORT reaches every task (default
29560, or the caller's); MOBIUS_RUN_ARGS (e.g. --resume) is appended; a failing task fails the
batch script; the #SBATCH header asks for several nodes with one task each.

Usage: slurm_multinode_sbatch_test.py SOURCE_DIR
"""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

SRC = os.path.abspath(sys.argv[1])
SBATCH = os.path.join(SRC, "deploy/slurm/mobius-multinode.sbatch")
TMP = tempfile.mkdtemp(prefix="mobius-multinode-sbatch-")

# srun: options up to the command; the step's tasks one after another, each with the variables
# srun gives a task (block distribution: task i on the allocation's node i).
FAKE_SRUN = r'''#!@PYTHON@
import json, os, subprocess, sys
args = sys.argv[1:]
opts = []
while args and args[0].startswith("-"):
    opts.append(args.pop(0))
with open(os.path.join(os.environ["FAKE_LOG"], "srun.json"), "w") as f:
    json.dump({"opts": opts, "command": args}, f)
n = int(os.environ["SLURM_NNODES"])
rc = 0
for i in range(n):
    env = dict(os.environ, SLURM_PROCID=str(i), SLURM_NODEID=str(i), SLURM_LOCALID="0",
               SLURM_NTASKS=str(n), SLURM_STEP_NUM_TASKS=str(n), SLURM_STEP_NUM_NODES=str(n),
               SLURM_STEP_NODELIST=os.environ["SLURM_JOB_NODELIST"], SLURM_STEP_ID="0")
    rc = max(rc, subprocess.call(args, env=env))
sys.exit(rc)
'''

# mobius: records what it was started with, one file per task.
FAKE_MOBIUS = r'''#!@PYTHON@
import json, os, sys
keep = {k: v for k, v in os.environ.items() if k.startswith(("SLURM_", "MOBIUS_"))}
with open(os.path.join(os.environ["FAKE_LOG"], "mobius-%s.json" % os.environ["SLURM_PROCID"]),
          "w") as f:
    json.dump({"argv": sys.argv[1:], "env": keep}, f)
sys.exit(int(os.environ.get("FAKE_FAIL_RANK", "-1") == os.environ["SLURM_PROCID"]))
'''


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def ok(msg):
    print("ok: " + msg, flush=True)


def executable(path, text):
    with open(path, "w") as f:
        f.write(text.replace("@PYTHON@", sys.executable))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def check_header():
    with open(SBATCH) as f:
        text = f.read()
    header = dict(re.findall(r"^#SBATCH --([\w-]+)(?:=(\S+))?", text, re.M))
    if header.get("ntasks-per-node") != "1":
        fail("#SBATCH --ntasks-per-node=1 expected, got %r" % header.get("ntasks-per-node"))
    if int(header.get("nodes", "1")) < 2:
        fail("#SBATCH --nodes should ask for several nodes, got %r" % header.get("nodes"))
    if not header.get("gres", "").startswith("gpu:"):
        fail("#SBATCH --gres=gpu:N expected")
    r = subprocess.run(["bash", "-n", SBATCH], capture_output=True, text=True)
    if r.returncode != 0:
        fail("bash -n: " + r.stderr)
    ok("header: --nodes=%s --ntasks-per-node=1 --gres=%s; bash -n clean" %
       (header["nodes"], header["gres"]))


def run_batch(name, nodes, extra_env=None):
    """Runs the script for a `nodes`-node allocation; returns (exit code, output, log dir)."""
    case = os.path.join(TMP, name)
    log, submit, fake = (os.path.join(case, d) for d in ("log", "submit dir", "bin"))
    for d in (log, submit, fake):
        os.makedirs(d)
    executable(os.path.join(fake, "srun"), FAKE_SRUN)
    executable(os.path.join(fake, "mobius"), FAKE_MOBIUS)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "MOBIUS_", "JOB_COMPLETION_INDEX"))}
    env.update(PATH=fake + os.pathsep + env.get("PATH", "/usr/bin:/bin"), FAKE_LOG=log,
               MOBIUS_BIN=fake, SLURM_JOB_ID="5151", SLURM_NNODES=str(nodes),
               SLURM_JOB_NUM_NODES=str(nodes), SLURM_NTASKS=str(nodes),
               SLURM_NTASKS_PER_NODE="1", SLURM_JOB_NODELIST="gpu[%02d-%02d]" % (7, 6 + nodes),
               SLURM_SUBMIT_DIR=submit, SLURM_PROCID="0", SLURM_NODEID="0")
    env.update(extra_env or {})
    spec = os.path.join(case, "my spec.yaml")
    open(spec, "w").close()
    r = subprocess.run(["bash", SBATCH, spec], env=env, cwd=submit, capture_output=True,
                       text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr, log, submit, spec


def records(log, nodes):
    out = []
    for i in range(nodes):
        path = os.path.join(log, "mobius-%d.json" % i)
        if not os.path.exists(path):
            fail("no `mobius run` for node %d" % i)
        with open(path) as f:
            out.append(json.load(f))
    extra = sorted(set(os.listdir(log)) - {"srun.json"} -
                   {"mobius-%d.json" % i for i in range(nodes)})
    if extra:
        fail("more tasks than nodes: %s" % extra)
    return out


def check_allocation(nodes, extra_env=None, extra_args=(), port="29560"):
    code, out, log, submit, spec = run_batch("n%d%s" % (nodes, "-extra" if extra_env else ""),
                                             nodes, extra_env)
    if code != 0:
        fail("%d nodes: exit %d\n%s" % (nodes, code, out))
    with open(os.path.join(log, "srun.json")) as f:
        srun = json.load(f)
    for want in ("--ntasks-per-node=1", "--kill-on-bad-exit=1"):
        if want not in srun["opts"]:
            fail("srun lacks %s: %s" % (want, srun["opts"]))
    tokens = set()
    for i, rec in enumerate(records(log, nodes)):
        want = ["run", spec, "--run-dir",
                os.path.join(submit, "mobius-run-5151-node%d" % i)] + list(extra_args)
        if rec["argv"] != want:
            fail("node %d ran mobius %s, expected %s" % (i, rec["argv"], want))
        env = rec["env"]
        if env.get("SLURM_PROCID") != str(i) or env.get("SLURM_NTASKS") != str(nodes):
            fail("node %d: SLURM_PROCID=%s SLURM_NTASKS=%s" %
                 (i, env.get("SLURM_PROCID"), env.get("SLURM_NTASKS")))
        if env.get("MOBIUS_RENDEZVOUS_PORT") != port:
            fail("node %d: MOBIUS_RENDEZVOUS_PORT=%r, expected %s" %
                 (i, env.get("MOBIUS_RENDEZVOUS_PORT"), port))
        tokens.add(env.get("MOBIUS_RENDEZVOUS_TOKEN"))
    # One secret for the whole job, random (32 hex digits) unless the caller gave one.
    token = tokens.pop() if len(tokens) == 1 else None
    given = (extra_env or {}).get("MOBIUS_RENDEZVOUS_TOKEN")
    if token is None or (given and token != given) or (not given and not re.fullmatch(r"[0-9a-f]{32}", token)):
        fail("the tasks' MOBIUS_RENDEZVOUS_TOKEN: %s (given %r)" % (sorted(map(str, tokens | {token})), given))
    ok("%d nodes: one `mobius run` per node, run dirs mobius-run-5151-node0..%d, rendezvous "
       "port %s%s" % (nodes, nodes - 1, port,
                      (", flags " + " ".join(extra_args)) if extra_args else ""))


def main():
    check_header()
    check_allocation(2)
    check_allocation(3, {"MOBIUS_RUN_ARGS": "--resume --backend cuda",
                         "MOBIUS_RENDEZVOUS_PORT": "31000", "MOBIUS_RENDEZVOUS_TOKEN": "my-secret"},
                     ("--resume", "--backend", "cuda"), port="31000")
    code, out, _, _, _ = run_batch("fails", 2, {"FAKE_FAIL_RANK": "1"})
    if code == 0:
        fail("a failing node did not fail the batch script:\n" + out)
    ok("a failing node fails the batch script (exit %d)" % code)
    r = subprocess.run(["bash", SBATCH], env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                       capture_output=True, text=True, timeout=60)
    if r.returncode == 0 or "usage: sbatch mobius-multinode.sbatch JOB.yaml" not in r.stderr:
        fail("without a spec: exit %d, %s" % (r.returncode, r.stderr))
    ok("without a spec: usage, exit %d" % r.returncode)


try:
    main()
finally:
    shutil.rmtree(TMP, ignore_errors=True)
