#!/usr/bin/env python3
"""One route from a spec to running workers (issue 34 [one-path]): the same spec run through
mobiusd and through `mobius run`, on the same topology file with the same link emulation, gives
the same plan and the same run config, paths and names aside. Both write the run config the
workers got to their run directory (run.json: the daemon's jobs/<id>/run-0, `mobius run
--run_dir`); the test compares the two field by field, once for the mobius schedule and once for
roundrobin with its dispatch, and checks both runs trained the same losses.

Usage: one_route_test.py BIN_DIR SOURCE_DIR
"""
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, tiny_model_and_tokens  # noqa: E402

BIN, SRC = sys.argv[1], sys.argv[2]
FIXTURE = os.path.join(SRC, "test/data/topology/paper_testbed_2s_2sw_8x3090.xml")
H = Harness("mobius-one-route-it-")
TMP = H.tmp
SOCK = os.path.join(TMP, "d.sock")
STATE = os.path.join(TMP, "state")
fail, ok = H.fail, H.ok
# Where each route puts its files, and what names the run: not the plan or the run config.
PATH_KEYS = {"job_id", "store_path", "store_fd", "checkpoint_dir", "job_key"}


def cli(*args, check=True):
    r = subprocess.run([os.path.join(BIN, "mobius"), *args], capture_output=True, text=True,
                       env=dict(os.environ, MOBIUS_SOCKET=SOCK), timeout=300)
    if check and r.returncode != 0:
        fail("mobius %s -> exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def write_spec(name, plan):
    path = os.path.join(TMP, name + ".yaml")
    with open(path, "w") as f:
        f.write("""name: %s
model_dir: %s/model
dataset:
  path: %s/data.tok
training:
  steps: 3
  global_batch: 8
  microbatch: 2
  seq_len: 32
  lr: 1e-3
resources:
  gpus: 2
plan:
%s
""" % (name, TMP, TMP, plan))
    return path


def strip(value):
    """The run config without paths and names."""
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in PATH_KEYS}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def differences(a, b, where=""):
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += differences(a.get(k), b.get(k), where + "." + k)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += differences(x, y, "%s[%d]" % (where, i))
        return out
    return [] if a == b else ["%s: mobius run %r, mobiusd %r" % (where or ".", a, b)]


def leaves(value):
    if isinstance(value, dict):
        return sum(leaves(v) for v in value.values())
    if isinstance(value, list):
        return sum(leaves(v) for v in value)
    return 1


def losses(text):
    return [line.split("loss ")[1].split()[0] for line in text.splitlines()
            if line.startswith("step ") and "loss " in line]


def main():
    tiny_model_and_tokens(BIN, SRC, TMP, layers=6)
    cases = [("mobius-sched", "  stages: 6"),
             ("rr-sched", "  stages: 6\n  schedule: roundrobin\n  dispatch: pool")]
    runs = {}
    for name, plan in cases:
        spec = write_spec(name, plan)
        run_dir = os.path.join(TMP, "run-" + name)
        r = cli("run", spec, "--topology-file", FIXTURE, "--link-scale", "0.05", "--run_dir",
                run_dir)
        runs[name] = (spec, json.load(open(os.path.join(run_dir, "run.json"))), losses(r.stdout))
    log = open(H.log, "a")
    H.daemon = subprocess.Popen(
        [os.path.join(BIN, "mobiusd"), "--socket", SOCK, "--state-dir", STATE, "--topology-file",
         FIXTURE, "--link-scale", "0.05", "--metrics-address", ""], stdout=log, stderr=log)
    H.wait_healthy(lambda: cli("--timeout-seconds", "1", "health", check=False).returncode == 0)
    for name, (spec, local, local_losses) in runs.items():
        id_ = json.loads(cli("submit", spec, "--json").stdout)["id"]
        j = H.wait_state(cli, id_)
        if j["state"] != "JOB_STATE_SUCCEEDED":
            fail("%s ended %s: %s" % (id_, j["state"], j.get("state_reason")))
        found = glob.glob(os.path.join(STATE, "**", id_, "run-0", "run.json"), recursive=True)
        if len(found) != 1:
            fail("no run.json of %s under %s: %s" % (id_, STATE, found))
        daemon = json.load(open(found[0]))
        diff = differences(strip(local), strip(daemon))
        if diff:
            fail("%s: the two routes' run configs differ:\n  %s" % (name, "\n  ".join(diff)))
        stages = len(daemon.get("stages") or daemon.get("forward_stages") or [])
        ok("%s: mobiusd and mobius run: the same run config (%d stages on GPUs %s, schedule %s, "
           "%d values compared)" % (name, stages, daemon["rank_gpu"], daemon["schedule"],
                                    leaves(strip(daemon))))
        steps = H.job(cli, id_).get("last_step", {})
        if not local_losses or not steps or "%.4f" % float(steps["loss"]) != local_losses[-1]:
            fail("%s: last loss mobius run %s, mobiusd %s" % (name, local_losses[-1:],
                                                                steps.get("loss")))
    H.kill_daemon()
    print("PASS")


if __name__ == "__main__":
    try:
        main()
    finally:
        H.kill_daemon()
