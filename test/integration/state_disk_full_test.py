#!/usr/bin/env python3
"""Integration test of job outcomes with the state directory's disk full: a real mobiusd whose
--state-dir is a small tmpfs, real workers (their checkpoints on another disk), the real CLI.

  - two jobs run; the tmpfs is filled with a filler file; job A finishes: `describe` says
    SUCCEEDED at once (the daemon serves the state it could not write), `watch` ends; `cancel` of
    job B answers and B ends CANCELLED; the daemon log names the refused write;
  - SIGTERM and restart while the disk is still full: A is SUCCEEDED from its completion record
    (COMPLETED.json beside its checkpoints), not requeued or FAILED;
  - the filler removed: the store takes the outcome (a restart reads it back, no record needed);
  - idle `watch` and `logs -f` streams stay up on the daemon's heartbeats;
  - a stopped daemon (SIGSTOP): `describe` fails after --timeout-seconds and `watch` after
    --stream-idle-seconds, both with exit 3 and a clear message, instead of hanging.

Needs root (mount); prints "skipped: ..." and exits 0 otherwise, or when the mount fails.

Usage: state_disk_full_test.py BIN_DIR SOURCE_DIR
"""
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, tiny_job_spec  # noqa: E402

BIN, SRC = sys.argv[1], sys.argv[2]
FIXTURE = os.path.join(SRC, "test/data/topology/paper_testbed_2s_2sw_8x3090.xml")


def skip(why):
    print("skipped: " + why, flush=True)
    sys.exit(0)


if os.geteuid() != 0:
    skip("needs root to mount a tmpfs as the state directory")

H = Harness("mobius-diskfull-it-")
TMP = H.tmp
SOCK = os.path.join(TMP, "d.sock")
STATE = os.path.join(TMP, "state")
FILLER = os.path.join(STATE, "filler")
ENV = dict(os.environ, MOBIUS_SOCKET=SOCK)
fail, ok = H.fail, H.ok
mounted = False


def cli(*args, check=True, timeout=120):
    r = subprocess.run([os.path.join(BIN, "mobius"), *args], env=ENV, capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        fail("%s -> exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def job(id_):
    return H.job(cli, id_)


def wait_state(id_, states, seconds=120):
    return H.wait_state(cli, id_, states, seconds)


def start_daemon():
    log = open(H.log, "a")
    H.daemon = subprocess.Popen(
        [os.path.join(BIN, "mobiusd"), "--socket", SOCK, "--state-dir", STATE, "--topology-file",
         FIXTURE, "--link-scale", "0.05", "--metrics-address", "127.0.0.1:0",
         "--kill-grace-seconds", "2"],
        stdout=log, stderr=log)
    H.wait_healthy(lambda: cli("--timeout-seconds", "1", "health", check=False).returncode == 0,
                   seconds=15)


def stop_daemon(what):
    H.daemon.send_signal(signal.SIGTERM)
    if H.daemon.wait(timeout=90) != 0:
        fail("daemon exit code %d after SIGTERM %s" % (H.daemon.returncode, what))


def write_spec(name, steps):
    path = os.path.join(TMP, name + ".yaml")
    with open(path, "w") as f:
        f.write(tiny_job_spec(name, os.path.join(TMP, "model"), os.path.join(TMP, "data.tok"),
                              steps, "checkpoint:\n  dir: %s\n  every_steps: 1000\n"
                              % os.path.join(TMP, "ckpt-" + name)))
    return path


def fill_disk():
    """Writes the filler until the tmpfs has no byte left."""
    fd = os.open(FILLER, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for chunk in (1 << 20, 4096, 1):
            block = b"\0" * chunk
            while True:
                try:
                    if os.write(fd, block) == 0:
                        break
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)


def daemon_log():
    with open(H.log) as f:
        return f.read()


def main():
    global mounted
    os.makedirs(STATE)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=0755", "tmpfs", STATE],
                       capture_output=True, text=True)
    if r.returncode != 0:
        skip("cannot mount a tmpfs at %s: %s" % (STATE, r.stderr.strip()))
    mounted = True
    subprocess.run([os.path.join(BIN, "mobius-worker"), "init-model", "--family", "llama",
                    "--preset", "tiny", "--vocab", "700", "--layers", "4", "--out",
                    os.path.join(TMP, "model")], check=True, capture_output=True)
    with open(os.path.join(TMP, "gpl.jsonl"), "w") as f:
        f.write(json.dumps({"text": open("/usr/share/common-licenses/GPL-3").read()}) + "\n")
    cli("tokenize", os.path.join(TMP, "gpl.jsonl"), os.path.join(TMP, "data.tok"), "--tokenizer",
        os.path.join(SRC, "test/data/tokenizers/gpt2"))
    start_daemon()

    # --- two running jobs, then the state directory's disk fills up.
    a = json.loads(cli("submit", write_spec("a", 24), "--json").stdout)["id"]
    b = json.loads(cli("submit", write_spec("b", 100000), "--json").stdout)["id"]
    wait_state(a, ["JOB_STATE_RUNNING"])
    wait_state(b, ["JOB_STATE_RUNNING"])
    deadline = time.time() + 60
    while time.time() < deadline and int(job(a).get("steps_done", 0)) < 2:
        time.sleep(0.1)
    fill_disk()
    if int(job(a).get("steps_done", 0)) >= 24:
        fail("job a finished before the disk was full; make it longer")
    ok("disk full (%d MiB filler) with %s and %s running" %
       (os.path.getsize(FILLER) >> 20, a, b))

    done = wait_state(a, ["JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"])
    if done["state"] != "JOB_STATE_SUCCEEDED" or done.get("state_reason") != "all 24 steps done":
        fail("job a with the disk full: %s" % done)
    if "the job store did not take RUNNING -> SUCCEEDED" not in daemon_log():
        fail("the daemon log does not name the refused write")
    r = cli("watch", a, timeout=30, check=False)
    if r.returncode != 0 or "SUCCEEDED" not in r.stdout:
        fail("watch %s -> exit %d\n%s%s" % (a, r.returncode, r.stdout, r.stderr))
    t0 = time.time()
    r = cli("cancel", b, timeout=30, check=False)
    if r.returncode != 0:
        fail("cancel %s with the disk full -> exit %d %s" % (b, r.returncode, r.stderr))
    cancelled = wait_state(b, ["JOB_STATE_CANCELLED", "JOB_STATE_FAILED", "JOB_STATE_SUCCEEDED"])
    if cancelled["state"] != "JOB_STATE_CANCELLED":
        fail("job b after cancel with the disk full: %s" % cancelled)
    node = json.loads(cli("node", "--json").stdout)
    if any(g.get("job_id") for g in node.get("gpus", [])):
        fail("GPUs still held after both jobs ended: %s" % node)
    ok("disk full: %s SUCCEEDED (served, watch ends), cancel of %s answered and it ended "
       "CANCELLED in %.1f s, GPUs free" % (a, b, time.time() - t0))

    # --- restart with the disk still full: the completion record decides.
    record = os.path.join(TMP, "ckpt-a", "COMPLETED.json")
    if not os.path.isfile(record) or json.load(open(record))["job_id"] != a:
        fail("no completion record for %s at %s" % (a, record))
    stop_daemon("with the disk full")
    if "is not in the job store" not in daemon_log():
        fail("shutdown did not log the changes it could not write")
    start_daemon()
    again = job(a)
    if again["state"] != "JOB_STATE_SUCCEEDED" or \
            "completed before the daemon stopped" not in again.get("state_reason", ""):
        fail("job a after a restart with the disk still full: %s" % again)
    ok("restart with the disk full: %s SUCCEEDED from its completion record (%s)" %
       (a, again["state_reason"][:60]))

    # --- the disk has room again: the outcome reaches the store; a restart reads it from there.
    os.unlink(FILLER)
    deadline = time.time() + 60
    while time.time() < deadline and "recorded" not in cli("logs", a).stdout:
        time.sleep(0.2)
    os.unlink(record)  # the store alone must carry it now
    stop_daemon("after freeing the disk")
    start_daemon()
    stored = job(a)
    if stored["state"] != "JOB_STATE_SUCCEEDED":
        fail("job a after freeing the disk and a restart: %s" % stored)
    # b's cancel could not be written before the first restart: it was requeued as a restart;
    # cancel it again now that the store takes it.
    if job(b)["state"] not in ("JOB_STATE_CANCELLED",):
        cli("cancel", b)
        wait_state(b, ["JOB_STATE_CANCELLED"])
    ok("disk freed: the store has %s SUCCEEDED (%s)" % (a, stored["state_reason"][:60]))

    # --- idle streams stay up on the daemon's heartbeats (every 10 s): a queued job with no news,
    # watched and followed with a 15 s idle limit for 20 s.
    cli("drain")
    q = json.loads(cli("submit", write_spec("q", 2), "--json").stdout)["id"]
    streams = [subprocess.Popen([os.path.join(BIN, "mobius"), verb, *extra, q,
                                 "--stream-idle-seconds", "15"], env=ENV,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for verb, extra in (("watch", []), ("logs", ["-f"]))]
    time.sleep(20)
    for p in streams:
        if p.poll() is not None:
            fail("an idle stream ended after 20 s: exit %d %s" % (p.returncode, p.stderr.read()))
    cli("cancel", q)
    cli("undrain")
    results = [p.communicate(timeout=30) for p in streams]
    if streams[0].returncode != 1 or "CANCELLED" not in results[0][0]:
        fail("watch of the cancelled job: exit %d %s" % (streams[0].returncode, results[0]))
    if streams[1].returncode != 0 or any(l.startswith(" | ") for l in results[1][0].splitlines()):
        fail("logs -f of the cancelled job: exit %d %s" % (streams[1].returncode, results[1]))
    ok("idle watch and logs -f stayed up 20 s on heartbeats (limit 15 s), ended with the job")

    # --- a daemon that stopped answering: the CLI fails with exit 3 instead of hanging. The watch
    # is connected and streaming when the daemon stops (SIGSTOP: its socket still accepts).
    c = json.loads(cli("submit", write_spec("c", 100000), "--json").stdout)["id"]
    wait_state(c, ["JOB_STATE_RUNNING"])
    watch = subprocess.Popen([os.path.join(BIN, "mobius"), "watch", c, "--stream-idle-seconds",
                              "3"], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    first = watch.stderr.readline()  # a progress line: the stream is up
    H.daemon.send_signal(signal.SIGSTOP)
    try:
        t0 = time.time()
        r = cli("describe", a, "--timeout-seconds", "2", check=False, timeout=30)
        if r.returncode != 3 or "did not answer in 2s" not in r.stderr:
            fail("describe of a stopped daemon: exit %d %s" % (r.returncode, r.stderr))
        try:
            _, err = watch.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            watch.kill()
            fail("watch of a stopped daemon still running after 30 s")
        if watch.returncode != 3 or "sent nothing for 3s" not in err:
            fail("watch of a stopped daemon: exit %d %s%s" % (watch.returncode, first, err))
        ok("stopped daemon: describe and watch exit 3 within %.1f s: %s" %
           (time.time() - t0, err.strip().splitlines()[-1][:110]))
    finally:
        H.daemon.send_signal(signal.SIGCONT)
    cli("cancel", c)
    wait_state(c, ["JOB_STATE_CANCELLED"])
    stop_daemon("at the end")
    ok("SIGTERM: clean exit")


try:
    main()
finally:
    H.kill_daemon()
    if mounted:
        if subprocess.run(["umount", STATE], capture_output=True).returncode != 0:
            time.sleep(1)
            subprocess.run(["umount", "-l", STATE], capture_output=True)
    shutil.rmtree(TMP, ignore_errors=True)
