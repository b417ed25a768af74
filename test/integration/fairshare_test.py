#!/usr/bin/env python3
"""Integration test of a lab box run fairly (issue 36 [lab]): a root daemon, two throwaway users,
alice and bob, created for the test and removed after it.

  1. Fair share: on a node with room for one job at a time (two GPUs, jobs of two), alice submits
     four jobs, then bob one, all priority 0 (the node drained meanwhile, so that the CLI's speed
     does not matter): after alice's first job, bob's starts before her other three. `mobius usage` shows each user's GPU-seconds within 5% of their runs' wall time
     x GPUs (the jobs' own start and end times); alice cannot see bob's usage (PERMISSION_DENIED),
     root (an admin) sees both, with a group rollup; the per-user Prometheus counters agree.
  2. Limits: alice may hold at most 2 GPUs (`mobius quota set`); four one-GPU jobs of hers
     submitted at once on a four-GPU node never run more than two at a time, the waiting ones'
     reason names max_gpus=2, and bob's job (no limit) runs beside hers. Bob's third job past
     max_queued_jobs=2 is refused naming it; alice's job past max_host_memory waits naming it.
  3. Restart-safe: the daemon is SIGKILLed mid-run; after the restart the lost run is closed at
     its last write (not extended), the resumed run has a record of its own, the two do not
     overlap, and the total is within the wall time of both runs.
The full state disk is covered by job_manager_disk_full_test (the run that ends while the store
refuses writes is recorded once the disk has room).

Needs root, useradd/userdel and setpriv; prints "skipped" and exits 0 without them.
Usage: fairshare_test.py BIN_DIR SOURCE_DIR
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, ThrowawayUsers, tiny_job_spec, tiny_model_and_tokens  # noqa: E402,E501

BIN, SRC = sys.argv[1], sys.argv[2]
FIXTURE = os.path.join(SRC, "test/data/topology/paper_testbed_2s_2sw_8x3090.xml")

if os.getuid() != 0 or not shutil.which("useradd") or not shutil.which("setpriv"):
    print("skipped: needs root, useradd and setpriv (creates two throwaway users)")
    sys.exit(0)

H = Harness("mobius-fairshare-it-", world_readable=True)
TMP = H.tmp
fail, ok = H.fail, H.ok
USERS = ThrowawayUsers(TMP, "mbfs")  # role -> pwd entry


def cli(*args, user=None, sock, check=True):
    cmd = [os.path.join(BIN, "mobius"), *args]
    if user is not None:
        cmd = USERS.as_user(user, cmd)
    r = subprocess.run(cmd, env=dict(os.environ, MOBIUS_SOCKET=sock), capture_output=True,
                       text=True, timeout=120)
    if check and r.returncode != 0:
        fail("%s as %s -> exit %d\n%s%s" % (" ".join(args), user, r.returncode, r.stdout,
                                             r.stderr))
    return r


def start_daemon(name, gpus):
    sock = os.path.join(TMP, name + ".sock")
    H.log = os.path.join(TMP, name + ".log")
    log = open(H.log, "a")
    cmd = [os.path.join(BIN, "mobiusd"), "--socket", sock, "--socket-mode", "0666",
           "--state-dir", os.path.join(TMP, name + "-state"), "--topology-file", FIXTURE,
           "--gpus", gpus, "--emulate-links", "off", "--metrics-address", "127.0.0.1:0",
           "--usage-interval-seconds", "0.5"]
    H.daemon = subprocess.Popen(cmd, stdout=log, stderr=log)
    H.wait_healthy(lambda: cli("--timeout-seconds", "1", "health", sock=sock,
                               check=False).returncode == 0)
    return sock


def spec(role, name, gpus=2, steps=6, extra=""):
    home = os.path.join(TMP, role)
    path = os.path.join(home, name + ".yaml")
    text = tiny_job_spec(name, home + "/model", home + "/data.tok", steps, extra)
    with open(path, "w") as f:
        f.write(text.replace("gpus: 2", "gpus: %d" % gpus))
    u = USERS[role]
    os.chown(path, u.pw_uid, u.pw_gid)
    return path


def submit(role, path, sock):
    return json.loads(cli("submit", path, "--json", user=role, sock=sock).stdout)["id"]


def job(id_, sock):
    return json.loads(cli("describe", id_, "--json", sock=sock).stdout)


def wait_all(ids, sock, seconds=300):
    deadline = time.time() + seconds
    while time.time() < deadline:
        jobs = {i: job(i, sock) for i in ids}
        if all(j["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")
               for j in jobs.values()):
            for i, j in jobs.items():
                if j["state"] != "JOB_STATE_SUCCEEDED":
                    fail("job %s ended %s: %s" % (i, j["state"], j.get("state_reason")))
            return jobs
        time.sleep(0.3)
    fail("jobs %s did not end" % ids)


def usage(sock, user=None, *extra, check=True):
    r = cli("usage", "--json", *extra, user=user, sock=sock, check=check)
    return r if not check else json.loads(r.stdout)


def user_row(report, role):
    for u in report.get("users", []):
        if int(u["uid"]) == USERS[role].pw_uid:
            return u
    return None


def fair_share():
    sock = start_daemon("d1", "0,1")
    # Drained while both submit, so that the order does not depend on how fast the CLI runs
    # against alice's first job: at the undrain nobody has usage and alice's first job is first.
    cli("drain", sock=sock)
    a_ids = [submit("alice", spec("alice", "a%d" % i, steps=24), sock) for i in range(1, 5)]
    b_id = submit("bob", spec("bob", "b1", steps=24), sock)
    queue = cli("queue", sock=sock).stdout
    if "SHARE" not in queue:
        fail("mobius queue shows no fair-share column:\n" + queue)
    cli("undrain", sock=sock)
    jobs = wait_all(a_ids + [b_id], sock)
    start = {i: int(j["started_unix_ms"]) for i, j in jobs.items()}
    order = sorted(start, key=start.get)
    if order[0] != a_ids[0] or order[1] != b_id:
        fail("start order %s: bob's %s should start right after alice's first %s" %
             (order, b_id, a_ids[0]))
    ok("fair share: start order %s (alice %s, bob %s)" % (order, a_ids, b_id))
    # Usage against the jobs' own times: GPUs x (finished - started), per user.
    expected = {"alice": 0.0, "bob": 0.0}
    for i, j in jobs.items():
        role = "bob" if i == b_id else "alice"
        expected[role] += 2 * (int(j["finished_unix_ms"]) - int(j["started_unix_ms"])) / 1e3
    mine = usage(sock, "alice")
    if len(mine["users"]) != 1 or user_row(mine, "alice") is None:
        fail("alice's usage lists other users: %s" % mine)
    if mine.get("groups"):
        fail("alice sees group totals: %s" % mine["groups"])
    denied = usage(sock, "alice", "--user", USERS["bob"].pw_name, check=False)
    if denied.returncode == 0 or "only admins" not in denied.stderr:
        fail("alice read bob's usage: exit %d %s%s" % (denied.returncode, denied.stdout,
                                                        denied.stderr))
    everyone = usage(sock)
    for role in ("alice", "bob"):
        row = user_row(everyone, role)
        if row is None:
            fail("root's usage has no row for %s: %s" % (role, everyone))
        got = float(row["gpu_seconds"])
        if abs(got - expected[role]) > 0.05 * expected[role]:
            fail("%s: %.3f GPU-seconds recorded, runs' wall time x GPUs is %.3f" %
                 (role, got, expected[role]))
        if int(row["runs"]) != (4 if role == "alice" else 1) or int(row.get("tokens", 0)) <= 0:
            fail("%s's runs/tokens: %s" % (role, row))
        ok("usage: %s %.3f GPU-s (runs' wall x GPUs %.3f), %s tokens, %s steps" %
           (role, got, expected[role], row["tokens"], row["steps"]))
    groups = {g.get("group") for g in everyone.get("groups", [])}
    if groups != {USERS["alice"].pw_name, USERS["bob"].pw_name}:  # useradd --user-group
        fail("root's group totals are not the users' primary groups: %s" % everyone.get("groups"))
    text = cli("usage", "--runs", sock=sock).stdout
    if USERS["alice"].pw_name not in text or b_id not in text or "GPU-HOURS" not in text:
        fail("mobius usage --runs:\n" + text)
    # Prometheus: the per-user counters.
    port = re.search(r"Prometheus metrics on http://\S+ \(port (\d+)\)", open(H.log).read())
    if port is None:
        fail("no metrics port in the daemon log")
    body = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port.group(1),
                                  timeout=10).read().decode()
    m = re.search(r'mobius_user_gpu_seconds_total\{user="%s"\} ([0-9.e+]+)' %
                  USERS["bob"].pw_name, body)
    if m is None or abs(float(m.group(1)) - expected["bob"]) > 0.05 * expected["bob"]:
        fail("mobius_user_gpu_seconds_total for bob: %s (expected ~%.3f)" %
             (m.group(0) if m else "missing", expected["bob"]))
    ok("metrics: %s" % m.group(0))
    H.daemon.send_signal(signal.SIGTERM)
    H.daemon.wait(timeout=60)


def limit():
    sock = start_daemon("d2", "0,1,2,3")
    cli("quota", "set", str(USERS["alice"].pw_uid), "--max-gpus", "2", sock=sock)
    paths = [spec("alice", "l%d" % i, gpus=1, steps=8) for i in range(4)]
    ids, lock = [], threading.Lock()

    def go(p):
        i = submit("alice", p, sock)
        with lock:
            ids.append(i)
    threads = [threading.Thread(target=go, args=(p,)) for p in paths]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    b_id = submit("bob", spec("bob", "lb", gpus=1, steps=8), sock)
    most, reasons, bob_beside = 0, set(), False
    deadline = time.time() + 300
    while time.time() < deadline:
        listed = json.loads(cli("queue", "--json", sock=sock).stdout).get("jobs", [])
        running = [j for j in listed if j["state"] == "JOB_STATE_RUNNING"]
        alice_gpus = sum(len(j.get("gpus", [])) for j in running
                         if int(j["uid"]) == USERS["alice"].pw_uid)
        most = max(most, alice_gpus)
        bob_beside |= alice_gpus > 0 and any(j["id"] == b_id for j in running)
        for j in listed:
            if j["state"] == "JOB_STATE_QUEUED" and j["id"] in ids:
                reasons.add(j.get("pending_reason", ""))
        if not listed:
            break
        time.sleep(0.1)
    wait_all(ids + [b_id], sock)
    if most > 2:
        fail("alice held %d GPUs at once with max_gpus 2" % most)
    if not any("max_gpus=2" in r for r in reasons):
        fail("no waiting reason names the limit: %s" % reasons)
    ok("limit: alice held at most %d GPUs; waiting: %s; bob ran beside her: %s" %
       (most, sorted(reasons)[0], bob_beside))
    # A limit on queued jobs refuses the submit past it; a host-memory limit keeps a job waiting
    # with the limit named.
    cli("drain", sock=sock)
    cli("quota", "set", str(USERS["bob"].pw_uid), "--max-queued-jobs", "2", sock=sock)
    queued = [submit("bob", spec("bob", "q%d" % i, gpus=1), sock) for i in range(2)]
    third = cli("submit", spec("bob", "q2", gpus=1), user="bob", sock=sock, check=False)
    if third.returncode == 0 or "max_queued_jobs=2" not in third.stderr:
        fail("bob's third queued job: exit %d %s" % (third.returncode, third.stderr))
    ok("max_queued_jobs: %s" % third.stderr.strip())
    cli("quota", "set", str(USERS["alice"].pw_uid), "--max-host-memory", "1MiB", sock=sock)
    listed = cli("quota", "ls", sock=sock).stdout
    if "MAX_HOST_MEMORY" not in listed or "1.0 MiB" not in listed:
        fail("mobius quota ls:\n" + listed)
    cli("undrain", sock=sock)
    h = submit("alice", spec("alice", "h1", gpus=1), sock)
    deadline = time.time() + 60
    while "max_host_bytes=1.0 MiB" not in job(h, sock).get("pending_reason", ""):
        if time.time() > deadline:
            fail("alice's job over her host-memory limit: %s" % job(h, sock))
        time.sleep(0.1)
    ok("max_host_bytes: %s waits: %s" % (h, job(h, sock)["pending_reason"]))
    cli("cancel", h, user="alice", sock=sock)
    wait_all(queued, sock)
    H.daemon.send_signal(signal.SIGTERM)
    H.daemon.wait(timeout=60)


def restart():
    sock = start_daemon("d3", "0,1")
    id_ = submit("alice", spec("alice", "k1", steps=300,
                               extra="checkpoint:\n  every_steps: 20\nmax_restarts: 2\n"), sock)
    deadline = time.time() + 120
    while time.time() < deadline and int(job(id_, sock).get("steps_done", 0)) < 8:
        time.sleep(0.1)
    time.sleep(0.8)  # past a usage write (every 0.5 s)
    if job(id_, sock)["state"] != "JOB_STATE_RUNNING":
        fail("the job to kill the daemon under is not running: %s" % job(id_, sock))
    killed_ms = int(time.time() * 1000)
    H.daemon.kill()
    H.daemon.wait()
    time.sleep(1)
    sock = start_daemon("d3", "0,1")
    jobs = wait_all([id_], sock)
    runs = [r for r in usage(sock, None, "--runs")["runs"] if r["job_id"] == id_]
    if len(runs) != 2 or not all(r.get("ended") for r in runs):
        fail("runs of the killed job: %s" % runs)
    first, second = sorted(runs, key=lambda r: int(r["started_unix_ms"]))
    lost_end = int(first["last_unix_ms"])
    if not killed_ms - 5000 <= lost_end <= killed_ms:
        fail("the lost run ends at %d, the daemon was killed at %d" % (lost_end, killed_ms))
    if int(second["started_unix_ms"]) < lost_end:
        fail("the runs overlap: %s" % runs)
    total = sum(float(r["gpu_seconds"]) for r in runs)
    wall = 2 * (int(jobs[id_]["finished_unix_ms"]) - int(first["started_unix_ms"])) / 1e3
    if total > wall:
        fail("%.3f GPU-seconds recorded, more than 2 GPUs x the whole span %.3f" % (total, wall))
    ok("restart: lost run closed %d ms before the kill, resumed run separate; %.2f GPU-s of a "
       "%.2f GPU-s span" % (killed_ms - lost_end, total, wall))
    H.daemon.send_signal(signal.SIGTERM)
    H.daemon.wait(timeout=60)


def main():
    USERS.make("alice")
    USERS.make("bob")
    model, data = tiny_model_and_tokens(BIN, SRC, TMP)
    for role, u in USERS.items():
        home = os.path.join(TMP, role)
        shutil.copytree(model, os.path.join(home, "model"))
        shutil.copy(data, os.path.join(home, "data.tok"))
        for root, dirs, files in os.walk(home):
            os.chown(root, u.pw_uid, u.pw_gid)
            for f in files:
                os.chown(os.path.join(root, f), u.pw_uid, u.pw_gid)
    fair_share()
    limit()
    restart()
    print("PASS")


if __name__ == "__main__":
    try:
        main()
    finally:
        H.kill_daemon()
        USERS.remove()
        shutil.rmtree(TMP, ignore_errors=True)
