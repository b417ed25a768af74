#!/usr/bin/env python3
"""Runs deploy/slurm/mobius-finetune.sbatch the way slurmd would (as a batch script with the
SLURM_* environment; no Slurm needed), on the emulated paper testbed:

  1. the script starts its private mobiusd and `mobius submit --wait`s the spec; once the job has
     a checkpoint, SIGTERM (what `--signal=B:TERM@180` sends before the time limit): the script
     stops the daemon and exits 143, the job stays queued in the store;
  2. the same script again with the same SLURM_JOB_ID (a requeued batch job): the same Mobius job
     (same submission id) resumes from its checkpoint and succeeds; exit 0.

Usage: slurm_sbatch_test.py BIN_DIR SOURCE_DIR
"""
import glob
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture  # noqa: E402

BIN, SRC = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
SBATCH = os.path.join(SRC, "deploy/slurm/mobius-finetune.sbatch")
TMP = tempfile.mkdtemp(prefix="mobius-slurm-it-")
JOB_ID = "4242"
STATE = os.path.join(TMP, "state", JOB_ID)
STEPS = 24
ENV = dict(os.environ, SLURM_JOB_ID=JOB_ID, MOBIUS_BIN=BIN,
           MOBIUS_STATE_ROOT=os.path.join(TMP, "state"), MOBIUS_GPUS="0,1",
           MOBIUS_DAEMON_OPTS="--topology_file=%s --link_scale=0.02" %
           os.path.join(SRC, fixture.TOPOLOGY),
           MOBIUS_REQUEUE_ON_TERM="0", TMPDIR=TMP)
ENV.pop("MOBIUS_SOCKET", None)
script = None


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    log = os.path.join(STATE, "mobiusd.log")
    if os.path.exists(log):
        with open(log, errors="replace") as f:
            sys.stderr.write("--- mobiusd.log (tail)\n" + f.read()[-4000:] + "\n")
    if script is not None and script.poll() is None:
        os.killpg(script.pid, signal.SIGKILL)
    sys.exit(1)


def ok(msg):
    print("ok: " + msg, flush=True)


def describe():
    socks = glob.glob(os.path.join(TMP, "mobius-%s.*" % JOB_ID, "mobiusd.sock"))
    if not socks:
        return None
    r = subprocess.run([os.path.join(BIN, "mobius"), "--socket=" + socks[0], "--timeout_seconds=2",
                        "describe", "j-000001", "--json"], capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else None


def run_script(spec):
    # Its own process group, like a batch step: the test can clean up everything it started.
    return subprocess.Popen(["bash", SBATCH, spec], env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def main():
    global script
    fixture.make_model_and_data(BIN, SRC, TMP)
    spec = fixture.write_spec(TMP, "slurm", STEPS, 2, every_steps=2)

    # 1. Preempted after the first checkpoint.
    script = run_script(spec)
    deadline = time.time() + 120
    job = None
    while time.time() < deadline and script.poll() is None:
        job = describe()
        if job and job.get("checkpoint"):
            break
        time.sleep(0.3)
    if not job or not job.get("checkpoint"):
        out = script.stdout.read() if script.poll() is not None else ""
        fail("no checkpoint within 120 s (script exit %s): %s\n%s" % (script.poll(), job, out))
    script.send_signal(signal.SIGTERM)  # to the batch shell only, as --signal=B:TERM does
    try:
        code = script.wait(timeout=60)
    except subprocess.TimeoutExpired:
        fail("the script did not exit within 60 s of SIGTERM")
    out = script.stdout.read()
    if code != 143 or "resumes from its last checkpoint" not in out:
        fail("after SIGTERM: exit %d\n%s" % (code, out))
    if glob.glob(os.path.join(TMP, "mobius-%s.*" % JOB_ID)):
        fail("the script left its socket directory behind")
    with open(os.path.join(STATE, "mobiusd.log"), errors="replace") as f:
        if "mobiusd stopped" not in f.read():
            fail("the private daemon did not shut down cleanly")
    ok("SIGTERM at step %s (checkpoint %s): daemon stopped, exit 143" %
       (job.get("steps_done"), os.path.basename(job["checkpoint"])))

    # 2. Requeued: the same batch job runs again and the Mobius job resumes.
    script = run_script(spec)
    try:
        code = script.wait(timeout=240)
    except subprocess.TimeoutExpired:
        fail("the requeued run did not finish in 240 s")
    out = script.stdout.read()
    if code != 0 or "SUCCEEDED" not in out:
        fail("requeued run: exit %d\n%s" % (code, out))
    with open(os.path.join(STATE, "mobiusd.log"), errors="replace") as f:
        if "j-000001: resuming from" not in f.read():
            fail("the requeued run did not resume from the checkpoint")
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(STATE, "jobs.db"), uri=True)
    rows = db.execute("SELECT submission_id, state, steps_done FROM jobs").fetchall()
    db.close()
    if rows != [("slurm-" + JOB_ID, "SUCCEEDED", STEPS)]:
        fail("job store after the requeue: %s" % rows)
    ok("requeued run: the same job (submission id slurm-%s) resumed and SUCCEEDED, %d steps" %
       (JOB_ID, STEPS))


try:
    main()
finally:
    if script is not None and script.poll() is None:
        os.killpg(script.pid, signal.SIGKILL)
    shutil.rmtree(TMP, ignore_errors=True)
