"""Shared pieces of the Python integration tests (job_service_test.py, text_dataset_test.py,
tcp_tls_test.py): a temporary directory, the daemon process and its log, failing with the log's
tail, progress lines, and polling a job's state through the CLI. Each test keeps its own CLI and
daemon command lines (they differ: unix socket, users, TLS)."""
import json
import os
import pwd
import subprocess
import sys
import tempfile
import time

TERMINAL = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")


class Harness:
    def __init__(self, prefix, world_readable=False):
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        if world_readable:  # other users (setpriv) reach the socket and the specs
            os.chmod(self.tmp, 0o755)
        self.log = os.path.join(self.tmp, "daemon.log")
        self.daemon = None  # the running mobiusd (subprocess.Popen), if any

    def fail(self, msg):
        """Prints FAIL and the daemon log's tail, kills the daemon, exits 1."""
        print("FAIL: " + msg, file=sys.stderr)
        if self.daemon is not None:
            self.daemon.kill()
        if os.path.exists(self.log):
            with open(self.log) as f:
                sys.stderr.write(f.read()[-6000:])
        sys.exit(1)

    @staticmethod
    def ok(msg):
        print("ok: " + msg, flush=True)

    def wait_healthy(self, healthy, proc=None, seconds=10, what="daemon"):
        """Polls `healthy()` (e.g. `mobius health` exits 0) every 0.1 s; fails when `proc` (the
        daemon's Popen, default self.daemon) exits first or after `seconds`."""
        proc = proc or self.daemon
        for _ in range(int(seconds * 10)):
            if healthy():
                return
            if proc is not None and proc.poll() is not None:
                self.fail("%s exited during start-up" % what)
            time.sleep(0.1)
        self.fail("%s not healthy after %g s" % (what, seconds))

    def kill_daemon(self):
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.kill()

    def job(self, cli, id_, **kw):
        """The job as `mobius describe ID --json` prints it; `cli` runs the CLI."""
        return json.loads(cli("describe", id_, "--json", **kw).stdout)

    def wait_state(self, cli, id_, states=TERMINAL, seconds=240):
        """Polls until the job is in one of `states`; fails after `seconds`."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            j = self.job(cli, id_)
            if j["state"] in states:
                return j
            time.sleep(0.2)
        self.fail("job %s did not reach %s (now %s)" % (id_, states, self.job(cli, id_)))


class ThrowawayUsers:
    """Users created for one test (useradd, no login shell, a 0700 home at TMP/ROLE) and removed
    after it (remove()). Needs root. Indexed by role ("alice") like a dict of pwd entries."""

    def __init__(self, tmp, tag):
        self.tmp, self.tag, self.entries = tmp, tag, {}

    def make(self, role):
        name = "%s%s%d" % (self.tag, role[:3], os.getpid() % 100000)
        home = os.path.join(self.tmp, role)
        subprocess.run(["useradd", "--no-create-home", "--home-dir", home, "--shell",
                        "/usr/sbin/nologin", "--user-group", name], check=True,
                       capture_output=True)
        entry = pwd.getpwnam(name)
        os.mkdir(home, 0o700)
        os.chown(home, entry.pw_uid, entry.pw_gid)
        self.entries[role] = entry
        return entry

    def __getitem__(self, role):
        return self.entries[role]

    def items(self):
        return self.entries.items()

    def values(self):
        return self.entries.values()

    def as_user(self, role, cmd):
        """`cmd` run as the role's user (uid, gid, its groups) through setpriv."""
        u = self.entries[role]
        return ["setpriv", "--reuid=%d" % u.pw_uid, "--regid=%d" % u.pw_gid, "--init-groups",
                *cmd]

    def remove(self):
        for entry in self.entries.values():
            subprocess.run(["userdel", entry.pw_name], capture_output=True)


def tiny_model_and_tokens(bin_dir, src, tmp, layers=4):
    """A tiny Llama (init-model, vocab 700) at TMP/model and a token file of the GPL-3 text every
    Debian system has (GPT-2's tokenizer) at TMP/data.tok; returns their paths."""
    model = os.path.join(tmp, "model")
    subprocess.run([os.path.join(bin_dir, "mobius-worker"), "init-model", "--family", "llama",
                    "--preset", "tiny", "--vocab", "700", "--layers", str(layers), "--out",
                    model], check=True, capture_output=True)
    with open(os.path.join(tmp, "gpl.jsonl"), "w") as f:
        f.write(json.dumps({"text": open("/usr/share/common-licenses/GPL-3").read()}) + "\n")
    data = os.path.join(tmp, "data.tok")
    subprocess.run([os.path.join(bin_dir, "mobius"), "tokenize", os.path.join(tmp, "gpl.jsonl"),
                    data, "--tokenizer", os.path.join(src, "test/data/tokenizers/gpt2")],
                   check=True, capture_output=True)
    return model, data


def tiny_job_spec(name, model_dir, data, steps, extra=""):
    """The YAML of a small job on 2 emulated GPUs in 4 stages (global batch 4 of 32 tokens,
    microbatch 2), `extra` appended (e.g. a checkpoint section)."""
    return """name: %s
model_dir: %s
dataset:
  path: %s
training:
  steps: %d
  global_batch: 4
  microbatch: 2
  seq_len: 32
  lr: 1e-3
resources:
  gpus: 2
plan:
  stages: 4
%s""" % (name, model_dir, data, steps, extra)
