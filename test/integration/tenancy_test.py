#!/usr/bin/env python3
"""Integration test of a shared box (issue [tenancy]): the daemon as root, its socket open to two
throwaway users, alice and bob, created for the test and removed after it. Every probe of the
issue is tried as a curious or careless second user would, and the secure outcome asserted:

  - alice's jobs on a root-only file, on bob's 0600 data and on bob's 0700 model directory are
    refused at submit with the permission error naming the path;
  - a config.json symlinked to a root-only file is refused without a byte of that file in the
    error;
  - checkpoint.dir in /etc, in bob's home, or bob's job's checkpoint directory: refused, nothing
    created there;
  - bob's second job on his first job's checkpoint directory: refused (the owner record);
  - a job's workers run as its user (uid, gid, no_new_privs, no capabilities); its checkpoints are
    the user's, 0700 / 0600, unreadable by the other user; the state directory is 0711, jobs.db
    0600 (bob cannot open it), and bob cannot read alice's logs through the RPC either;
  - store names bob pre-creates in /dev/shm do not fail alice's job;
  - a step count past the limit is refused, not run as "0 steps";
  - checkpoint.group: bob shares a job's checkpoints with a group alice is in (setgid directory,
    0640 files): she reads them, nobody else does; a group he is not in is refused;
  - a job of each user succeeds (the test proves isolation, not breakage), and a chat job of
    alice's with the model's template renders and tokenizes as alice (her cache file);
  - unprivileged single-user mode: a daemon run by alice runs alice's job and refuses bob's.
The root daemon runs with the systemd unit's capabilities only (CAP_SETUID, CAP_SETGID, CAP_CHOWN,
CAP_KILL: no CAP_DAC_OVERRIDE), so the test also proves the unit's set is enough.
The full state disk is state_disk_full_test.py's.

Needs root, useradd/userdel and setpriv; prints "skipped" and exits 0 without them.
Each refusal is checked twice: through the CLI (which checks what it can itself) and through
raw_submit, straight over gRPC, so that the daemon's own checks (run as the caller) are what
refuse it.

Usage: tenancy_test.py BIN_DIR SOURCE_DIR TESTS_DIR
"""
import grp
import json
import os
import shutil
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, ThrowawayUsers, tiny_job_spec, tiny_model_and_tokens  # noqa: E402,E501

# Absolute: the worker sampler matches the daemon's workers by their argv[0].
BIN, SRC, TESTS = (os.path.abspath(a) for a in sys.argv[1:4])
FIXTURE = os.path.join(SRC, "test/data/topology/paper_testbed_2s_2sw_8x3090.xml")
SECRET = "topsecret-marker-5f3a"
WORKER = os.path.join(BIN, "mobius-worker")

if os.getuid() != 0 or not shutil.which("useradd") or not shutil.which("setpriv"):
    print("skipped: needs root, useradd and setpriv (creates two throwaway users)")
    sys.exit(0)

H = Harness("mobius-tenancy-it-", world_readable=True)
TMP = H.tmp
SOCK = os.path.join(TMP, "d.sock")
STATE = os.path.join(TMP, "state")
fail, ok = H.fail, H.ok
USERS = ThrowawayUsers(TMP, "mbit")  # role -> pwd entry
GROUPS = []  # groups made for the test
make_user, as_user = USERS.make, USERS.as_user


def remove_users():
    USERS.remove()
    for group in GROUPS:
        subprocess.run(["groupdel", group], capture_output=True)


def cli(*args, user=None, sock=SOCK, check=True, timeout=120):
    cmd = [os.path.join(BIN, "mobius"), *args]
    if user is not None:
        cmd = as_user(user, cmd)
    r = subprocess.run(cmd, env=dict(os.environ, MOBIUS_SOCKET=sock), capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        fail("%s as %s -> exit %d\n%s%s" % (" ".join(args), user, r.returncode, r.stdout,
                                             r.stderr))
    return r


# The systemd unit's capabilities (deploy/systemd/mobiusd.service): the root daemon has these only.
UNIT_CAPS = ["setpriv", "--bounding-set=-all,+setuid,+setgid,+chown,+kill", "--inh-caps=-all"]


def start_daemon(sock, state, user=None, log_name="daemon.log"):
    log = open(os.path.join(TMP, log_name), "a")
    cmd = [os.path.join(BIN, "mobiusd"), "--socket", sock, "--socket-mode", "0666",
           "--state-dir", state, "--topology-file", FIXTURE, "--link-scale", "0.02",
           "--metrics-address", "127.0.0.1:0"]
    proc = subprocess.Popen(as_user(user, cmd) if user else UNIT_CAPS + cmd, stdout=log,
                            stderr=log)
    H.wait_healthy(
        lambda: cli("--timeout-seconds", "1", "health", sock=sock, check=False).returncode == 0,
        proc, what="daemon (%s)" % (user or "root"))
    return proc


def own(path, role, mode):
    u = USERS[role]
    for root, dirs, files in os.walk(path):
        os.chown(root, u.pw_uid, u.pw_gid)
        os.chmod(root, 0o700)
        for f in files:
            p = os.path.join(root, f)
            os.chown(p, u.pw_uid, u.pw_gid, follow_symlinks=False)  # a link, not its target
            if not os.path.islink(p):
                os.chmod(p, 0o600)
    if os.path.isfile(path):
        os.chown(path, u.pw_uid, u.pw_gid)
        os.chmod(path, mode)


def spec(name, owner, model, data, steps=4, extra=""):
    """A spec file in `owner`'s home (readable by the CLI running as that user)."""
    path = os.path.join(TMP, owner, name + ".yaml")
    with open(path, "w") as f:
        f.write(tiny_job_spec(name, model, data, steps, extra))
    own(path, owner, 0o600)
    return path


def refused(what, user, spec_path, must_name, code_words=("Permission denied",), raw_code=None):
    """Submits as `user` through the CLI and straight over gRPC (raw_submit: no client-side
    checks); expects both refused, naming `must_name`, with none of the secret; the daemon's
    answer with status `raw_code` when given."""
    r = cli("submit", spec_path, user=user, check=False)
    text = r.stdout + r.stderr
    raw = subprocess.run(as_user(user, [os.path.join(TESTS, "raw_submit"), SOCK, spec_path]),
                         capture_output=True, text=True, timeout=120)
    raw_text = raw.stdout + raw.stderr
    for how, t, accepted in (("CLI", text, r.returncode == 0),
                             ("gRPC", raw_text, raw_text.startswith("OK "))):
        if accepted:
            fail("%s (%s): the submit was accepted:\n%s" % (what, how, t))
        if must_name not in t or not any(w in t for w in code_words):
            fail("%s (%s): the error does not name %s with %s:\n%s" % (what, how, must_name,
                                                                       code_words, t))
        if SECRET in t:
            fail("%s (%s): the error quotes the secret file:\n%s" % (what, how, t))
    if raw_code and not raw_text.startswith(raw_code + " "):
        fail("%s: the daemon answered %s, not %s" % (what, raw_text.split(" ")[0], raw_code))
    ok("%s: refused; daemon: %s" % (what, raw_text.strip()[:170]))


def wait_done(id_, user, sock=SOCK, seconds=240):
    deadline = time.time() + seconds
    while time.time() < deadline:
        j = json.loads(cli("describe", id_, "--json", user=user, sock=sock).stdout)
        if j["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"):
            return j
        time.sleep(0.2)
    fail("job %s did not end" % id_)


def worker_identities():
    """(uid, gid, NoNewPrivs, CapEff) of every running `mobius-worker run` process of the root
    daemon's."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
            if cmdline[0] != WORKER.encode() or cmdline[1:2] != [b"run"]:
                continue
            fields = dict(line.split(":", 1) for line in open("/proc/%s/status" % pid)
                          if ":" in line)
        except (OSError, IndexError):
            continue
        # Our daemon's children only: tests running in parallel start workers of this build too.
        if int(fields["PPid"]) != H.daemon.pid:
            continue
        found.append((int(fields["Uid"].split()[0]), int(fields["Gid"].split()[0]),
                      fields["NoNewPrivs"].strip(), fields["CapEff"].strip()))
    return found


def submit_and_watch_workers(spec_path, user):
    """Submits, samples the workers' identities while the job runs, waits for the end."""
    id_ = json.loads(cli("submit", spec_path, "--json", user=user).stdout)["id"]
    seen = set()
    deadline = time.time() + 240
    while time.time() < deadline:
        seen.update(worker_identities())
        j = json.loads(cli("describe", id_, "--json", user=user).stdout)
        if j["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"):
            return id_, j, seen
        time.sleep(0.05)
    fail("job %s did not end" % id_)


def check_tree(path, role, what):
    """Everything under `path` belongs to `role`: dirs 0700, files 0600 at most."""
    u = USERS[role]
    for root, dirs, files in os.walk(path):
        for p in [root] + [os.path.join(root, f) for f in files]:
            st = os.lstat(p)
            if st.st_uid != u.pw_uid:
                fail("%s: %s belongs to uid %d, not %s's %d" % (what, p, st.st_uid, role,
                                                                   u.pw_uid))
            if stat.S_IMODE(st.st_mode) & 0o077:
                fail("%s: %s has mode %o (others can reach it)" % (what, p,
                                                                  stat.S_IMODE(st.st_mode)))


def main():
    alice, bob = make_user("alice"), make_user("bob")
    # A tiny model and a token file, copied into each user's home, theirs alone.
    model, data = tiny_model_and_tokens(BIN, SRC, TMP)
    for role in ("alice", "bob"):
        shutil.copytree(model, os.path.join(TMP, role, "model"))
        own(os.path.join(TMP, role, "model"), role, 0o700)
        shutil.copy(data, os.path.join(TMP, role, "data.tok"))
        own(os.path.join(TMP, role, "data.tok"), role, 0o600)
    root_only = os.path.join(TMP, "root-only.tok")
    shutil.copy(data, root_only)
    os.chmod(root_only, 0o600)
    # A model directory of alice's whose config.json is a symlink to a root-only file.
    secret = os.path.join(TMP, "secret.json")
    with open(secret, "w") as f:
        f.write('{"model_type": "llama", "vocab_size": "%s"}\n' % SECRET)
    os.chmod(secret, 0o600)
    linked = os.path.join(TMP, "alice", "linked-model")
    shutil.copytree(model, linked)
    os.remove(os.path.join(linked, "config.json"))
    os.symlink(secret, os.path.join(linked, "config.json"))
    own(linked, "alice", 0o700)
    A, B = os.path.join(TMP, "alice"), os.path.join(TMP, "bob")
    H.daemon = start_daemon(SOCK, STATE)

    # --- reads: alice cannot train on what she cannot read.
    denied = "PERMISSION_DENIED"
    refused("root-only data", "alice", spec("p1", "alice", A + "/model", root_only), root_only,
            raw_code=denied)
    refused("bob's 0600 data", "alice", spec("p2", "alice", A + "/model", B + "/data.tok"),
            B + "/data.tok", raw_code=denied)
    refused("bob's 0700 model directory", "alice",
            spec("p3", "alice", B + "/model", A + "/data.tok"), B + "/model", raw_code=denied)
    refused("config.json symlinked to a root-only file", "alice",
            spec("p4", "alice", linked, A + "/data.tok"), linked, raw_code=denied)

    # --- writes: nowhere alice may not write.
    etc_dir = "/etc/mobius-tenancy-probe-%d" % os.getpid()
    refused("checkpoint.dir in /etc", "alice",
            spec("p5", "alice", A + "/model", A + "/data.tok",
                 extra="checkpoint:\n  dir: %s\n" % etc_dir), etc_dir, raw_code=denied)
    if os.path.exists(etc_dir):
        fail("%s was created" % etc_dir)
    refused("checkpoint.dir in bob's home", "alice",
            spec("p6", "alice", A + "/model", A + "/data.tok",
                 extra="checkpoint:\n  dir: %s/ckpt\n" % B), B + "/ckpt", raw_code=denied)

    # --- the step limit: refused, never "all 0 steps".
    refused("steps: 4294967296", "alice",
            spec("p7", "alice", A + "/model", A + "/data.tok", steps=4294967296), "steps",
            code_words=("2147483647", "limit", "at most"))  # the YAML reader refuses it already

    # --- bob's job: runs as bob; his checkpoints are his alone.
    bob_id, bob_job, bob_workers = submit_and_watch_workers(
        spec("b1", "bob", B + "/model", B + "/data.tok"), "bob")
    if bob_job["state"] != "JOB_STATE_SUCCEEDED":
        fail("bob's job: %s\n%s" % (bob_job, cli("logs", bob_id).stdout[-3000:]))
    want = {(bob.pw_uid, bob.pw_gid, "1", "0000000000000000")}
    if not bob_workers or bob_workers - want:
        fail("bob's workers ran as %s, not %s" % (bob_workers, want))
    bob_ckpt_root = os.path.dirname(bob_job["checkpoint"])
    user_dir = os.path.join(STATE, "users", str(bob.pw_uid))
    if not bob_ckpt_root.startswith(user_dir + "/"):
        fail("bob's default checkpoints are not in his directory: %s" % bob_ckpt_root)
    check_tree(user_dir, "bob", "bob's state directory")
    ok("bob's job %s succeeded; its workers ran as uid %d gid %d with no_new_privs and no "
       "capabilities; %s is his, 0700/0600" % (bob_id, bob.pw_uid, bob.pw_gid, user_dir))

    # --- alice cannot reach bob's checkpoints, nor write into them; bob's next job may not
    # either (the directory records its job).
    refused("checkpoint.dir = bob's job's checkpoints", "alice",
            spec("p8", "alice", A + "/model", A + "/data.tok",
                 extra="checkpoint:\n  dir: %s\n" % bob_ckpt_root), bob_ckpt_root,
            raw_code=denied)
    refused("bob's second job on his first job's checkpoint directory", "bob",
            spec("b2", "bob", B + "/model", B + "/data.tok",
                 extra="checkpoint:\n  dir: %s\n" % bob_ckpt_root), bob_id,
            code_words=("holds the checkpoints of job",), raw_code="FAILED_PRECONDITION")

    # --- bob pre-creates store names for the next jobs; alice's job is not disturbed.
    planted = []
    for n in range(3, 12):
        for suffix in ("", "-%d" % H.daemon.pid):
            p = "/dev/shm/mobius-store-j-%06d%s" % (n, suffix)
            subprocess.run(as_user("bob", ["/bin/sh", "-c", "umask 0; : > %s" % p]), check=False)
            planted.append(p)
    alice_id, alice_job, alice_workers = submit_and_watch_workers(
        spec("a1", "alice", A + "/model", A + "/data.tok"), "alice")
    for p in planted:
        if os.path.exists(p):
            os.remove(p)
    if alice_job["state"] != "JOB_STATE_SUCCEEDED":
        fail("alice's job (store names planted by bob): %s" % alice_job)
    want = {(alice.pw_uid, alice.pw_gid, "1", "0000000000000000")}
    if not alice_workers or alice_workers - want:
        fail("alice's workers ran as %s, not %s" % (alice_workers, want))
    check_tree(os.path.join(STATE, "users", str(alice.pw_uid)), "alice", "alice's directory")
    ok("alice's job %s succeeded despite %d store names planted by bob; workers as uid %d"
       % (alice_id, len(planted), alice.pw_uid))

    # --- a chat dataset with the model's own template: rendered (Python's jinja2, a child of
    # the tokenizer child) as alice, into alice's dataset cache.
    chat_model = os.path.join(A, "chat-model")
    subprocess.run([os.path.join(BIN, "mobius-worker"), "init-model", "--family", "llama",
                    "--preset", "tiny", "--vocab", "896", "--layers", "4", "--out", chat_model],
                   check=True, capture_output=True)
    fixtures = os.path.join(SRC, "test/data/chat_templates")
    shutil.copy(os.path.join(fixtures, "tokenizer.json"), chat_model)
    shutil.copy(os.path.join(fixtures, "llama31/tokenizer_config.json"), chat_model)
    own(chat_model, "alice", 0o700)
    chat_data = os.path.join(A, "chat.jsonl")
    shutil.copy(os.path.join(fixtures, "conversations.jsonl"), chat_data)
    own(chat_data, "alice", 0o600)
    chat_spec = spec("a-chat", "alice", chat_model, chat_data, steps=2)
    with open(chat_spec) as f:
        text = f.read().replace("  path: %s\n" % chat_data,
                                "  path: %s\n  format: chat\n" % chat_data)
    with open(chat_spec, "w") as f:
        f.write(text)
    chat_id = json.loads(cli("submit", chat_spec, "--json", user="alice").stdout)["id"]
    chat_job = wait_done(chat_id, "alice")
    if chat_job["state"] != "JOB_STATE_SUCCEEDED":
        fail("alice's chat job (model template): %s\n%s" %
             (chat_job, cli("logs", chat_id, user="alice", check=False).stdout))
    cache = os.path.join(STATE, "users", str(alice.pw_uid), "datasets")
    toks = [f for f in os.listdir(cache) if f.endswith(".tok")]
    if not toks or any(os.stat(os.path.join(cache, f)).st_uid != alice.pw_uid for f in toks):
        fail("alice's chat token file is not alice's: %s" % toks)
    ok("alice's chat job with the model's template succeeded; its token file is alice's")

    # --- the state directory: passable, not listable; the database root's alone.
    st = os.stat(STATE)
    if stat.S_IMODE(st.st_mode) != 0o711:
        fail("state directory mode %o, not 711" % stat.S_IMODE(st.st_mode))
    for name in os.listdir(STATE):
        if name.startswith("jobs.db") and stat.S_IMODE(os.stat(os.path.join(STATE, name)).st_mode) != 0o600:
            fail("%s has mode %o" % (name, stat.S_IMODE(os.stat(os.path.join(STATE, name)).st_mode)))
    probe = subprocess.run(as_user("bob", ["python3", "-c", "open(%r, 'rb').read(16)" %
                                           os.path.join(STATE, "jobs.db")]),
                           capture_output=True, text=True)
    if probe.returncode == 0 or "Permission denied" not in probe.stderr:
        fail("bob could open jobs.db: %s" % probe.stderr)
    alice_file = next(os.path.join(r, f) for r, _, fs in os.walk(alice_job["checkpoint"])
                      for f in fs)
    probe = subprocess.run(as_user("bob", ["cat", alice_file]), capture_output=True)
    if probe.returncode == 0:
        fail("bob read alice's checkpoint file %s" % alice_file)
    logs = cli("logs", alice_id, user="bob", check=False)
    if logs.returncode == 0 or "another user" not in logs.stderr:
        fail("bob read alice's logs: %s" % logs.stderr)
    ok("state 0711, jobs.db 0600 (bob: Permission denied), alice's checkpoints and logs closed "
       "to bob")

    # --- sharing with a group: bob gives a job's checkpoints to a group alice is in; a group he
    # is not in is refused; others still read nothing.
    share = "mbitsh%d" % (os.getpid() % 100000)
    subprocess.run(["groupadd", share], check=True, capture_output=True)
    GROUPS.append(share)
    for role in ("alice", "bob"):
        subprocess.run(["usermod", "-aG", share, USERS[role].pw_name], check=True,
                       capture_output=True)
    shared = os.path.join(TMP, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o1777)
    refused("checkpoint.group bob is not in", "bob",
            spec("b4", "bob", B + "/model", B + "/data.tok",
                 extra="checkpoint:\n  dir: %s/b4\n  group: root\n" % shared), "root",
            code_words=("not in group",), raw_code="PERMISSION_DENIED")
    share_id, share_job, _ = submit_and_watch_workers(
        spec("b5", "bob", B + "/model", B + "/data.tok",
             extra="checkpoint:\n  dir: %s/b5\n  group: %s\n" % (shared, share)), "bob")
    if share_job["state"] != "JOB_STATE_SUCCEEDED":
        fail("bob's shared job: %s" % share_job)
    gid = grp.getgrnam(share).gr_gid
    for root, dirs, files in os.walk(os.path.join(shared, "b5")):
        for p in [root] + [os.path.join(root, f) for f in files]:
            st = os.lstat(p)
            mode = stat.S_IMODE(st.st_mode)
            if st.st_uid != bob.pw_uid or st.st_gid != gid or mode & 0o027 or (
                    os.path.isdir(p) and not mode & stat.S_ISGID):
                fail("shared checkpoint %s: uid %d gid %d mode %o (want bob's, group %s, no "
                     "group write, no other bits, setgid directories)" % (p, st.st_uid, st.st_gid,
                                                                         mode, share))
    shared_file = os.path.join(share_job["checkpoint"], "trainer_state.json")
    if not os.path.isfile(shared_file):
        shared_file = next(os.path.join(r, f) for r, _, fs in os.walk(share_job["checkpoint"])
                           for f in fs)
    if subprocess.run(as_user("alice", ["cat", shared_file]), capture_output=True).returncode:
        fail("alice (in %s) cannot read bob's shared checkpoint %s" % (share, shared_file))
    if subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat",
                       shared_file], capture_output=True).returncode == 0:
        fail("nobody read bob's shared checkpoint %s" % shared_file)
    ok("checkpoint.group: bob's %s is group %s (setgid, 0640/2750): alice reads it, nobody (uid 65534) "
       "cannot; a group bob is not in is refused" % (share_id, share))

    # --- single-user mode: a daemon alice runs herself runs her jobs and refuses bob's.
    a_sock, a_state = os.path.join(A, "d.sock"), os.path.join(A, "state")
    os.chmod(A, 0o711)  # bob reaches the socket (the refusal is the daemon's, not the file's)
    solo = start_daemon(a_sock, a_state, user="alice", log_name="alice-daemon.log")
    try:
        r = cli("submit", spec("b3", "bob", B + "/model", B + "/data.tok"), user="bob",
                sock=a_sock, check=False)
        if r.returncode == 0 or "single-user mode" not in r.stderr:
            fail("alice's unprivileged daemon took bob's job: %s%s" % (r.stdout, r.stderr))
        solo_id = json.loads(cli("submit", spec("a2", "alice", A + "/model", A + "/data.tok"),
                                 "--json", user="alice", sock=a_sock).stdout)["id"]
        done = wait_done(solo_id, "alice", sock=a_sock)
        if done["state"] != "JOB_STATE_SUCCEEDED":
            fail("alice's job on her own daemon: %s" % done)
    finally:
        solo.terminate()
        solo.wait(timeout=60)
    ok("single-user daemon (uid %d): bob refused (%s); alice's job %s succeeded"
       % (alice.pw_uid, r.stderr.strip().splitlines()[-1][:100], solo_id))


if __name__ == "__main__":
    try:
        main()
    finally:
        H.kill_daemon()
        remove_users()
    print("PASS")
