#!/usr/bin/env python3
"""Integration test of mobiusd's job service: a real daemon on a temporary unix socket, a real
SQLite store in a temporary state directory, real worker processes, driven by the real CLI.

  - submit -> QUEUED -> RUNNING -> SUCCEEDED, `submit --wait` sees every transition, the log is
    complete (daemon lines and every worker's lines, gap-free sequence numbers), a checkpoint exists;
  - idempotent submit (same submission id + spec -> same job), conflicting duplicate -> exit 2
    with ALREADY_EXISTS;
  - another user (uid 65534) cannot see or cancel the job (PERMISSION_DENIED), an admin can;
  - malformed specs (test/data/specs/bad) -> exit 2 naming the field, the daemon keeps serving;
  - SIGKILL the daemon while a job runs and another is queued: after a restart both are still
    there, the running one resumes from its checkpoint (a restart) and succeeds;
  - a restart with fewer GPUs (--gpus 0,1): a job asking for 4 is re-planned for 2 and resumes;
  - 1,000 submits from 50 concurrent clients on a drained daemon -> exactly 1,000 jobs, no errors.

Usage: job_service_test.py BIN_DIR SOURCE_DIR
"""
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness  # noqa: E402

BIN, SRC = sys.argv[1], sys.argv[2]
FIXTURE = os.path.join(SRC, "test/data/topology/paper_testbed_2s_2sw_8x3090.xml")
H = Harness("mobius-jobs-it-", world_readable=True)
TMP = H.tmp
SOCK = os.path.join(TMP, "d.sock")
STATE = os.path.join(TMP, "state")
ENV = dict(os.environ, MOBIUS_SOCKET=SOCK)
fail, ok = H.fail, H.ok


def cli(*args, user=None, check=True, timeout=120):
    cmd = [os.path.join(BIN, "mobius"), *args]
    if user is not None:
        cmd = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups", *cmd]
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        fail("%s -> exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def start_daemon(*extra):
    log = open(H.log, "a")
    H.daemon = subprocess.Popen(
        [os.path.join(BIN, "mobiusd"), "--socket", SOCK, "--socket-mode", "0666",
         "--state-dir", STATE, "--topology-file", FIXTURE, "--link-scale", "0.02",
         "--metrics-address", "127.0.0.1:0", "--preemption", *extra],
        stdout=log, stderr=log)
    H.wait_healthy(lambda: cli("--timeout-seconds", "1", "health", check=False).returncode == 0)


def job(id_, user=None):
    return H.job(cli, id_, user=user)


def wait_state(id_, states, seconds=120):
    return H.wait_state(cli, id_, states, seconds)


def write_spec(name, steps, extra="", eval_every=0):
    path = os.path.join(TMP, name + ".yaml")
    evals = ("  eval_fraction: 0.2\ntraining:\n  eval_every: %d\n" % eval_every if eval_every
             else "training:\n")
    with open(path, "w") as f:
        f.write("""name: %s
model_dir: model
dataset:
  path: data.tok
%s  steps: %d
  global_batch: 4
  microbatch: 2
  seq_len: 32
  lr: 1e-3
resources:
  gpus: 2
plan:
  stages: 4
checkpoint:
  every_steps: 2
%s""" % (name, evals, steps, extra))
    return path


def variant_spec(name, steps, *replacements):
    """write_spec(name, steps) with (old, new) text replacements, as NAME2.yaml."""
    with open(write_spec(name, steps)) as f:
        text = f.read()
    for old, new in replacements:
        text = text.replace(old, new)
    path = os.path.join(TMP, name + "2.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def wait_log(id_, text, seconds=60):
    """The job's log once it contains `text` (a RUNNING job logs its start only after its files
    were checked as its user), or as it is after `seconds`."""
    deadline = time.time() + seconds
    logs = cli("logs", id_).stdout
    while text not in logs and time.time() < deadline:
        time.sleep(0.2)
        logs = cli("logs", id_).stdout
    return logs


def wait_steps(id_, steps, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline and int(job(id_).get("steps_done", 0)) < steps:
        time.sleep(0.2)


def sigterm_daemon(what):
    H.daemon.send_signal(signal.SIGTERM)
    if H.daemon.wait(timeout=90) != 0:
        fail("daemon exit code %d after SIGTERM %s" % (H.daemon.returncode, what))


def main():
    # A tiny model and a token file made from a licence text every Debian system has.
    subprocess.run([os.path.join(BIN, "mobius-worker"), "init-model", "--family", "llama",
                    "--preset", "tiny", "--vocab", "700", "--layers", "4", "--out",
                    os.path.join(TMP, "model")], check=True, capture_output=True)
    with open(os.path.join(TMP, "gpl.jsonl"), "w") as f:
        f.write(json.dumps({"text": open("/usr/share/common-licenses/GPL-3").read()}) + "\n")
    cli("tokenize", os.path.join(TMP, "gpl.jsonl"), os.path.join(TMP, "data.tok"), "--tokenizer",
        os.path.join(SRC, "test/data/tokenizers/gpt2"))
    for p in [TMP, os.path.join(TMP, "model"), os.path.join(TMP, "data.tok")]:
        os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)
    start_daemon()

    # --- submit --wait: every transition, complete logs, checkpoint.
    spec = write_spec("first", 4, eval_every=3)  # evals after steps 3 and 4 (the last)
    r = cli("submit", spec, "--wait", "--submission-id", "sub-1")
    for want in ["RUNNING", "SUCCEEDED", "step 4/4", "checkpoint:"]:
        if want not in r.stdout + r.stderr:
            fail("submit --wait output lacks %r:\n%s%s" % (want, r.stdout, r.stderr))
    first = job("j-000001")
    if first["state"] != "JOB_STATE_SUCCEEDED" or int(first["steps_done"]) != 4:
        fail("first job: %s" % first)
    if not os.path.isfile(os.path.join(first["checkpoint"], "DONE")):
        fail("no complete checkpoint at %s" % first["checkpoint"])
    logs = cli("logs", "j-000001").stdout.splitlines()
    sources = {line.split(" | ")[0] for line in logs}
    if not {"daemon", "worker-0", "worker-1"} <= sources:
        fail("logs lack sources: %s" % sources)
    if not any("SUCCEEDED" in line for line in logs):
        fail("logs lack the final state")
    ok("submit --wait: QUEUED -> RUNNING -> SUCCEEDED, %d log lines, checkpoint %s" %
       (len(logs), first["checkpoint"]))

    # --- ls shows the latest training loss; describe the latest eval loss and its step.
    last = first["last_step"]
    ls = [line for line in cli("ls").stdout.splitlines() if line.startswith("j-000001 ")]
    if len(ls) != 1 or ("%.4f" % last["loss"]) not in ls[0].split():
        fail("ls does not show the last loss %.4f: %s" % (last["loss"], ls))
    ev = first.get("last_eval")
    if not ev or int(ev["step"]) != 4 or "eval_loss" not in ev:
        fail("describe --json: no last_eval at step 4: %s" % first)
    described = cli("describe", "j-000001").stdout
    if ("eval loss:   %.4f (step 4)" % ev["eval_loss"]) not in described:
        fail("describe lacks the eval loss %.4f (step 4):\n%s" % (ev["eval_loss"], described))
    listed = json.loads(cli("ls", "--json").stdout)["jobs"][0]
    if listed.get("last_step", {}).get("loss") != last["loss"]:
        fail("ls --json: no last_step: %s" % listed)
    ok("ls: loss %.4f; describe: eval loss %.4f at step 4" % (last["loss"], ev["eval_loss"]))

    # --- idempotency.
    again = cli("submit", spec, "--submission-id", "sub-1", "--json")
    if json.loads(again.stdout)["id"] != "j-000001":
        fail("same submission id + spec made a new job: %s" % again.stdout)
    other = write_spec("first", 5)
    r = cli("submit", other, "--submission-id", "sub-1", check=False)
    if r.returncode != 2 or "j-000001" not in r.stderr:
        fail("conflicting duplicate: exit %d %s" % (r.returncode, r.stderr))
    ok("idempotent submit; conflicting duplicate refused: " + r.stderr.strip())

    # --- access: another user.
    if os.getuid() == 0 and shutil.which("setpriv"):
        r = cli("describe", "j-000001", user=65534, check=False)
        if r.returncode != 2 or "another user" not in r.stderr:
            fail("other user saw the job: exit %d %s" % (r.returncode, r.stderr))
        slow = write_spec("slow", 200)
        sid = json.loads(cli("submit", slow, "--json").stdout)["id"]
        r = cli("cancel", sid, user=65534, check=False)
        if r.returncode != 2 or "only its owner or an admin" not in r.stderr:
            fail("other user cancelled: exit %d %s" % (r.returncode, r.stderr))
        mine = json.loads(cli("ls", "--json", user=65534).stdout).get("jobs", [])
        if mine:
            fail("other user lists jobs that are not theirs: %s" % mine)
        cli("cancel", sid)  # root is an admin
        if wait_state(sid, ["JOB_STATE_CANCELLED"])["state"] != "JOB_STATE_CANCELLED":
            fail("admin cancel")
        ok("another user: PERMISSION_DENIED to see and cancel; the admin cancelled " + sid)
    else:
        ok("skipped the other-user checks (needs root and setpriv)")

    # --- malformed specs.
    bad_dir = os.path.join(SRC, "test/data/specs/bad")
    count = 0
    for name in sorted(os.listdir(bad_dir)):
        r = cli("submit", os.path.join(bad_dir, name), check=False)
        if r.returncode != 2:
            fail("bad spec %s: exit %d %s" % (name, r.returncode, r.stderr))
        count += 1
    cli("health")
    ok("%d malformed specs refused with exit 2; the daemon still serves" % count)

    # --- SIGKILL the daemon with a running and a queued job.
    run_id = json.loads(cli("submit", write_spec("resume", 30), "--json").stdout)["id"]
    wait_state(run_id, ["JOB_STATE_RUNNING"])
    big = write_spec("big", 2).replace(".yaml", "")
    with open(big + ".yaml") as f:
        text = f.read().replace("gpus: 2", "gpus: 8")
    with open(big + ".yaml", "w") as f:
        f.write(text)
    queued_id = json.loads(cli("submit", big + ".yaml", "--json").stdout)["id"]
    deadline = time.time() + 120
    while time.time() < deadline and not job(run_id).get("checkpoint"):
        time.sleep(0.2)
    j = job(run_id)
    if not j.get("checkpoint"):
        fail("no checkpoint before the kill: %s" % j)
    H.daemon.send_signal(signal.SIGKILL)
    H.daemon.wait()
    time.sleep(0.5)
    start_daemon()
    if job(queued_id)["state"] not in ("JOB_STATE_QUEUED", "JOB_STATE_RUNNING",
                                       "JOB_STATE_SUCCEEDED"):
        fail("queued job after restart: %s" % job(queued_id))
    done = wait_state(run_id, ["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"], 300)
    if done["state"] != "JOB_STATE_SUCCEEDED" or int(done.get("restarts", 0)) != 1:
        fail("resumed job: %s" % done)
    logs = cli("logs", run_id).stdout
    if "resuming from" not in logs:
        fail("the restarted job did not resume from its checkpoint:\n" + logs[-3000:])
    wait_state(queued_id, ["JOB_STATE_SUCCEEDED"], 300)
    ok("daemon SIGKILLed: %s resumed from its checkpoint and succeeded, %s ran after" %
       (run_id, queued_id))

    # --- SIGTERM: a running job finishes its step, checkpoints, and resumes from there.
    graceful = variant_spec("graceful", 400, ("every_steps: 2", "every_steps: 100000"))
    gid = json.loads(cli("submit", graceful, "--json").stdout)["id"]
    wait_steps(gid, 3)
    sigterm_daemon("with a running job")
    start_daemon()
    logs = wait_log(gid, "resuming from")
    if "checkpointed, resumes from there" not in logs or "resuming from" not in logs:
        fail("SIGTERM did not checkpoint the running job:\n" + logs[-3000:])
    resumed_at = [l for l in logs.splitlines() if "resuming from" in l][0]
    if "checkpoint-00000000" in resumed_at.split("resuming from")[1][:60]:
        fail("resumed from an empty checkpoint: " + resumed_at)
    done = wait_state(gid, ["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"], 300)
    if done["state"] != "JOB_STATE_SUCCEEDED":
        fail("the checkpointed job: %s" % done)
    ok("daemon SIGTERM: %s checkpointed mid-run (%s) and succeeded after the restart" %
       (gid, resumed_at.split("resuming from")[1].split(";")[0].strip()))

    # --- a restart with fewer GPUs: a job planned for 4 GPUs is re-planned for the 2 the node has
    # now and resumes there from its checkpoint (checkpoints do not depend on the GPU count).
    shrink_spec = variant_spec("shrink", 400, ("every_steps: 2", "every_steps: 100000"),
                               ("gpus: 2", "gpus: 4"))
    sid = json.loads(cli("submit", shrink_spec, "--json").stdout)["id"]
    wait_steps(sid, 3)
    sigterm_daemon("with a 4-GPU job")
    start_daemon("--gpus", "0,1")
    done = wait_state(sid, ["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"], 300)
    logs = cli("logs", sid).stdout
    if done["state"] != "JOB_STATE_SUCCEEDED":
        fail("the 4-GPU job after a restart on 2 GPUs: %s\n%s" % (done, logs[-3000:]))
    replanned = [l for l in logs.splitlines() if "re-planned" in l]
    if not replanned or "resuming from" not in replanned[-1] or "on 2 GPU(s)" not in replanned[-1]:
        fail("the job was not re-planned for 2 GPUs and resumed:\n" + logs[-3000:])
    ok("restart with fewer GPUs: %s (asks for 4) re-planned for 2 and resumed: %s" %
       (sid, replanned[-1].split("resuming from")[1].split(";")[0].strip()))
    H.daemon.send_signal(signal.SIGTERM)
    H.daemon.wait(timeout=90)
    start_daemon()

    # --- preemption: a high-priority job takes the GPUs of a running low-priority one, which
    # checkpoints, waits in the queue and resumes.
    low_spec = variant_spec("low", 400, ("every_steps: 2", "every_steps: 100000"),
                            ("gpus: 2", "gpus: 8"), ("name: low", "name: low\npriority: -10"))
    low = json.loads(cli("submit", low_spec, "--json").stdout)["id"]
    wait_steps(low, 2)
    high_spec = variant_spec("high", 3, ("name: high", "name: high\npriority: 50"))
    high = json.loads(cli("submit", high_spec, "--json").stdout)["id"]
    if wait_state(high, ["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"])["state"] != "JOB_STATE_SUCCEEDED":
        fail("the high-priority job: %s" % job(high))
    low_now = wait_state(low, ["JOB_STATE_RUNNING"])
    logs = wait_log(low, "resuming from")
    if "preempted by " + high not in logs or "resuming from" not in logs:
        fail("the low-priority job was not preempted and resumed:\n" + logs[-3000:])
    cli("cancel", low)
    wait_state(low, ["JOB_STATE_CANCELLED"])
    ok("preemption: %s (priority 50) preempted %s (priority -10), which checkpointed, waited and "
       "resumed (%d restarts counted)" % (high, low, int(low_now.get("restarts", 0))))
    # Accounting: the preempted run stops counting when its GPUs are free, before the
    # high-priority job's run starts on them; the resumed run is a record of its own.
    runs = json.loads(cli("usage", "--runs", "--json").stdout).get("runs", [])
    low_runs = sorted((r for r in runs if r["job_id"] == low),
                      key=lambda r: int(r["started_unix_ms"]))
    high_runs = [r for r in runs if r["job_id"] == high]
    if len(low_runs) != 2 or len(high_runs) != 1 or not all(r.get("ended") for r in low_runs):
        fail("usage runs of the preempted and the preempting job: %s %s" % (low_runs, high_runs))
    if int(low_runs[0]["last_unix_ms"]) > int(high_runs[0]["started_unix_ms"]):
        fail("the preempted run was counted after the high-priority job took its GPUs: %s %s" %
             (low_runs[0], high_runs[0]))
    ok("accounting: %s's preempted run ended %d ms before %s started; resumed run separate" %
       (low, int(high_runs[0]["started_unix_ms"]) - int(low_runs[0]["last_unix_ms"]), high))

    # --- load: 1,000 submits from 50 concurrent clients (drained: they stay queued).
    cli("drain")
    before = len(json.loads(cli("ls", "--json").stdout).get("jobs", []))
    load = write_spec("load", 2)

    def submit(i):
        return cli("submit", load, "--submission-id", "load-%d" % i, check=False)

    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=50) as pool:
        results = list(pool.map(submit, range(1000)))
    errors = [r for r in results if r.returncode != 0]
    if errors:
        fail("%d of 1000 submits failed, first: %s" % (len(errors), errors[0].stderr))
    ids = {r.stdout.strip() for r in results}
    jobs = json.loads(cli("ls", "--json").stdout).get("jobs", [])
    if len(ids) != 1000 or len(jobs) - before != 1000:
        fail("1000 submits made %d ids and %d jobs" % (len(ids), len(jobs) - before))
    ok("1000 submits from 50 concurrent clients in %.1f s: exactly 1000 jobs" % (time.time() - t0))

    H.daemon.send_signal(signal.SIGTERM)
    if H.daemon.wait(timeout=60) != 0:
        fail("daemon exit code %d after SIGTERM" % H.daemon.returncode)
    ok("SIGTERM: clean exit")


try:
    main()
finally:
    H.kill_daemon()
    shutil.rmtree(TMP, ignore_errors=True)
