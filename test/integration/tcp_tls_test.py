#!/usr/bin/env python3
"""Integration test of mobiusd's TCP listener: a real daemon, real certificates made here with
`openssl`, driven by the real CLI over TLS.

  - refused at start (exit 2, message naming the flag/file): --listen_tcp without TLS flags,
    TLS without any authentication method, --tls_cert without --listen_tcp, a key that does not
    match the certificate, a token file readable by others, a malformed token file (file:line);
    the token itself never appears in a message;
  - bearer tokens: none or a wrong one -> UNAUTHENTICATED (CLI exit 2); a good one -> submit, ls,
    describe, cancel work and the job belongs to the token's user; another token's user cannot
    see or cancel it (PERMISSION_DENIED, exit 2); an admin token's user (--admin_uids) can;
  - client certificates: one from the trusted CA works (the CN is the user), one from another CA
    fails the TLS handshake (exit 3), a CN that is no user here -> UNAUTHENTICATED;
  - a plaintext gRPC client cannot talk to the TLS port, nor can a client that does not trust the
    daemon's certificate;
  - every state-changing call over TCP is in the audit log with the token's / certificate's uid;
  - the unix socket and /metrics keep working as before.

Usage: tcp_tls_test.py BIN_DIR SOURCE_DIR TESTS_BIN_DIR
"""
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness  # noqa: E402

BIN, SRC, TESTS_BIN = sys.argv[1], sys.argv[2], sys.argv[3]
FIXTURE = os.path.join(SRC, "test/data/topology/paper_testbed_2s_2sw_8x3090.xml")
H = Harness("mobius-tcp-it-", world_readable=True)
TMP = H.tmp
SOCK = os.path.join(TMP, "d.sock")
STATE = os.path.join(TMP, "state")
LOG = H.log

# Users every Debian system has: tokens and certificates name them (users.md: the caller's uid
# is the identity, over TCP mapped from the credential).
ALICE, BOB, ADMIN, CERT_USER = ("nobody", 65534), ("bin", 2), ("sys", 3), ("daemon", 1)
TOKENS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef",
          "admin": "admin-token-0123456789abcdef"}


fail, ok = H.fail, H.ok


def run(*cmd, check=True, **kw):
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=120, **kw)
    if check and r.returncode != 0:
        fail("%s -> exit %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def path(name):
    return os.path.join(TMP, name)


# --- certificates ----------------------------------------------------------------------------

def make_ca(name):
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", path(name + ".key"), "-out", path(name + ".pem"), "-days", "2",
        "-subj", "/CN=" + name)


def make_cert(name, ca, cn, san=None):
    run("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", path(name + ".key"), "-out", path(name + ".csr"), "-subj", "/CN=" + cn)
    ext = path(name + ".ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\n")
        if san:
            f.write("subjectAltName=%s\nextendedKeyUsage=serverAuth\n" % san)
        else:
            f.write("extendedKeyUsage=clientAuth\n")
    run("openssl", "x509", "-req", "-in", path(name + ".csr"), "-CA", path(ca + ".pem"),
        "-CAkey", path(ca + ".key"), "-CAcreateserial", "-out", path(name + ".pem"), "-days", "2",
        "-extfile", ext)


def write_private(name, text, mode=0o600):
    p = path(name)
    with open(p, "w") as f:
        f.write(text)
    os.chmod(p, mode)
    return p


# --- daemon ----------------------------------------------------------------------------------

def daemon_cmd(*extra):
    return [os.path.join(BIN, "mobiusd"), "--socket", SOCK, "--socket-mode", "0666",
            "--state-dir", STATE, "--topology-file", FIXTURE, "--metrics-address", "127.0.0.1:0",
            *extra]


def refused(what, extra, want, secret=None):
    r = subprocess.run(daemon_cmd(*extra), capture_output=True, text=True, timeout=60)
    if r.returncode != 2 or want not in r.stderr:
        fail("%s: want exit 2 with %r, got exit %d:\n%s" % (what, want, r.returncode, r.stderr[-3000:]))
    if secret is not None and secret in r.stderr:
        fail("%s: the token appears in the daemon's output" % what)
    line = [l for l in r.stderr.splitlines() if want in l][0]
    ok("refused at start: %s -> %s" % (what, line.split("] ", 1)[-1].strip()))


def start_daemon(*extra):
    log = open(LOG, "a")
    start = os.path.getsize(LOG)
    H.daemon = subprocess.Popen(daemon_cmd(*extra), stdout=log, stderr=log)
    deadline = time.time() + 30
    while time.time() < deadline:
        if H.daemon.poll() is not None:
            fail("daemon exited during start-up")
        with open(LOG) as f:
            f.seek(start)
            m = re.search(r"serving gRPC over TLS on tcp:(\S+):(\d+) ", f.read())
        if m:
            return int(m.group(2))
        time.sleep(0.1)
    fail("no 'serving gRPC over TLS' line after 30 s")


def cli(*args, token=None, cert=None, ca="ca", check=True, env_token=None, unix=False):
    cmd = [os.path.join(BIN, "mobius")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOBIUS_")}
    if unix:
        cmd += ["--socket", SOCK]
    else:
        cmd += ["--daemon", "tcp://localhost:%d" % PORT]
        if ca:
            cmd += ["--tls_ca", path(ca + ".pem")]
        if token:
            cmd += ["--token_file", path("token-" + token)]
        if cert:
            cmd += ["--tls_cert", path(cert + ".pem"), "--tls_key", path(cert + ".key")]
        if env_token:
            env["MOBIUS_TOKEN"] = env_token
    r = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60, env=env)
    if check and r.returncode != 0:
        fail("%s -> exit %d\n%s%s" % (" ".join(cmd + list(args)), r.returncode, r.stdout, r.stderr))
    return r


def expect(r, code, text, what):
    if r.returncode != code or text not in r.stderr:
        fail("%s: want exit %d with %r, got exit %d: %s%s" % (what, code, text, r.returncode,
                                                              r.stdout, r.stderr))
    ok("%s -> exit %d: %s" % (what, code, r.stderr.strip().splitlines()[-1][:160]))


def write_spec(name):
    p = path(name + ".yaml")
    with open(p, "w") as f:
        f.write("""name: %s
model_dir: model
dataset:
  path: data.tok
training:
  steps: 4
  global_batch: 4
  microbatch: 2
  seq_len: 32
resources:
  gpus: 2
""" % name)
    return p


def audit_rows():
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(STATE, "jobs.db"), uri=True)
    try:
        rows = db.execute("SELECT uid, method, target, result FROM audit ORDER BY seq").fetchall()
        # The method may be written with its service ("JobService.SubmitJob"); compare the name.
        return [(uid, method.split(".")[-1], target, result) for uid, method, target, result in rows]
    finally:
        db.close()


PORT = 0


def main():
    global PORT
    make_ca("ca")
    make_ca("other-ca")
    make_cert("server", "ca", "localhost", san="DNS:localhost,IP:127.0.0.1")
    make_cert("client", "ca", CERT_USER[0])
    make_cert("stranger", "ca", "no-such-user-here")
    make_cert("untrusted", "other-ca", CERT_USER[0])
    make_cert("other-server", "other-ca", "localhost", san="DNS:localhost,IP:127.0.0.1")
    tokens = write_private("tokens", "# test tokens\n%s %s\n%s %d\n\n%s %s\n" % (
        TOKENS["alice"], ALICE[0], TOKENS["bob"], BOB[1], TOKENS["admin"], ADMIN[0]))
    for who, tok in TOKENS.items():
        write_private("token-" + who, tok + "\n")
    write_private("token-wrong", "wrong-token-0123456789abcdef\n")
    ok("certificates from two CAs and a token file made with openssl")

    # --- refused configurations.
    tls = ["--tls_cert", path("server.pem"), "--tls_key", path("server.key")]
    refused("TCP without TLS", ["--listen_tcp", "127.0.0.1:0"], "needs --tls_cert and --tls_key")
    refused("TCP with TLS but no authentication", ["--listen_tcp", "127.0.0.1:0", *tls],
            "every TCP caller must authenticate")
    refused("TLS flags without --listen_tcp", [*tls, "--token_file", tokens],
            "--tls_cert is set but --listen_tcp is empty")
    refused("a key that does not match the certificate",
            ["--listen_tcp", "127.0.0.1:0", "--tls_cert", path("server.pem"), "--tls_key",
             path("client.key"), "--token_file", tokens], "does not match the certificate")
    open_tokens = write_private("tokens-open", open(tokens).read(), 0o644)
    refused("a token file readable by others",
            ["--listen_tcp", "127.0.0.1:0", *tls, "--token_file", open_tokens], "chmod 600",
            secret=TOKENS["alice"])
    bad = write_private("tokens-bad", "# ok\n%s %s\n%s\n" % (TOKENS["alice"], ALICE[0],
                                                             TOKENS["bob"]))
    refused("a malformed token line", ["--listen_tcp", "127.0.0.1:0", *tls, "--token_file", bad],
            bad + ":3: expected 'TOKEN USER'", secret=TOKENS["bob"])
    unknown = write_private("tokens-unknown", "%s no-such-user-here\n" % TOKENS["alice"])
    refused("a token for an unknown user",
            ["--listen_tcp", "127.0.0.1:0", *tls, "--token_file", unknown],
            unknown + ":1: no user named", secret=TOKENS["alice"])
    refused("a bad --listen_tcp", ["--listen_tcp", "localhost", *tls, "--token_file", tokens],
            "is not HOST:PORT")

    # --- a tiny model and token file so that specs validate; the node is drained so jobs wait.
    run(os.path.join(BIN, "mobius-worker"), "init-model", "--family", "llama", "--preset", "tiny",
        "--vocab", "700", "--layers", "4", "--out", path("model"))
    with open(path("gpl.jsonl"), "w") as f:
        f.write(json.dumps({"text": open("/usr/share/common-licenses/GPL-3").read()}) + "\n")
    run(os.path.join(BIN, "mobius"), "tokenize", path("gpl.jsonl"), path("data.tok"),
        "--tokenizer", os.path.join(SRC, "test/data/tokenizers/gpt2"))
    for p in [path("model"), path("data.tok")]:
        os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)

    PORT = start_daemon("--listen_tcp", "127.0.0.1:0", *tls, "--tls_client_ca", path("ca.pem"),
                        "--token_file", tokens, "--admin_uids", str(ADMIN[1]))
    ok("daemon serves TLS on 127.0.0.1:%d (port 0 asked; the log names the real one)" % PORT)
    cli("drain", unix=True)  # root over the unix socket, as before
    spec = write_spec("tcp-job")

    # --- no credentials, wrong token.
    expect(cli("ls", check=False), 2, "no credentials", "ls over TLS without credentials")
    r = cli("ls", token="wrong", check=False)
    expect(r, 2, "bearer token not recognised", "ls with a wrong token")
    expect(cli("health", env_token="wrong-token-0123456789abcdef", check=False), 2,
           "bearer token not recognised", "health with a wrong $MOBIUS_TOKEN")

    # --- a good token: submit, ls, describe, cancel; the job is the token's user's.
    job = json.loads(cli("submit", spec, "--json", token="alice").stdout)
    if job["uid"] != ALICE[1] or job["user"] != ALICE[0]:
        fail("job submitted with alice's token belongs to %s (uid %s)" % (job["user"], job["uid"]))
    jid = job["id"]
    listed = json.loads(cli("ls", "--json", token="alice").stdout).get("jobs", [])
    if [j["id"] for j in listed] != [jid]:
        fail("alice's ls: %s" % listed)
    if json.loads(cli("describe", jid, "--json", token="alice").stdout)["state"] != \
            "JOB_STATE_QUEUED":
        fail("describe over TCP")
    if cli("health", env_token=TOKENS["alice"]).stdout.strip() != "SERVING":
        fail("health over TCP with $MOBIUS_TOKEN")
    ok("alice's token: submit -> %s owned by %s (uid %d), ls, describe, health ($MOBIUS_TOKEN)" %
       (jid, ALICE[0], ALICE[1]))

    # --- another user's token: PERMISSION_DENIED; the admin's: allowed.
    expect(cli("describe", jid, token="bob", check=False), 2, "another user",
           "bob describes alice's job")
    expect(cli("cancel", jid, token="bob", check=False), 2, "only its owner or an admin",
           "bob cancels alice's job")
    if json.loads(cli("ls", "--json", token="bob").stdout).get("jobs", []):
        fail("bob lists alice's job")
    expect(cli("drain", token="bob", check=False), 2, "admins", "bob drains the node")
    second = json.loads(cli("submit", write_spec("second"), "--json", token="alice").stdout)["id"]
    admin_ls = json.loads(cli("ls", "--json", token="admin").stdout).get("jobs", [])
    if {jid, second} - {j["id"] for j in admin_ls}:
        fail("the admin's ls lacks alice's jobs: %s" % admin_ls)
    cancelled = json.loads(cli("cancel", second, "--json", token="admin").stdout)
    if cancelled["state"] != "JOB_STATE_CANCELLED":
        fail("admin cancel: %s" % cancelled)
    mine = json.loads(cli("cancel", jid, "--json", token="alice").stdout)
    if mine["state"] != "JOB_STATE_CANCELLED":
        fail("alice's own cancel: %s" % mine)
    ok("bob: PERMISSION_DENIED for alice's job; %s (uid %d, --admin_uids) listed and cancelled "
       "%s; alice cancelled %s" % (ADMIN[0], ADMIN[1], second, jid))

    # --- client certificates.
    cjob = json.loads(cli("submit", spec, "--json", cert="client").stdout)
    if cjob["uid"] != CERT_USER[1] or cjob["user"] != CERT_USER[0]:
        fail("certificate job belongs to %s (uid %s)" % (cjob["user"], cjob["uid"]))
    if [j["id"] for j in json.loads(cli("ls", "--json", cert="client").stdout)["jobs"]] != \
            [cjob["id"]]:
        fail("ls with the client certificate")
    cli("cancel", cjob["id"], cert="client")
    ok("client certificate from the trusted CA (CN=%s): submit %s, ls, cancel" %
       (CERT_USER[0], cjob["id"]))
    expect(cli("ls", cert="untrusted", check=False), 3, "cannot reach mobiusd",
           "client certificate from an untrusted CA (handshake)")
    expect(cli("ls", cert="stranger", check=False), 2, "no user named",
           "client certificate whose CN is no user here")
    expect(cli("ls", token="alice", ca="other-ca", check=False), 3, "cannot reach mobiusd",
           "a client that does not trust the daemon's certificate")
    expect(cli("ls", token="alice", cert="untrusted", check=False), 3, "cannot reach mobiusd",
           "a good token over a connection with an untrusted certificate")

    # --- plaintext.
    r = run(os.path.join(TESTS_BIN, "reflection_probe"), "tcp://127.0.0.1:%d" % PORT, check=False)
    if r.returncode == 0:
        fail("a plaintext gRPC client talked to the TLS port:\n" + r.stdout)
    with socket.create_connection(("127.0.0.1", PORT), timeout=5) as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        try:
            reply = s.recv(64)
        except (socket.timeout, ConnectionResetError):
            reply = b""
    if reply[3:4] == b"\x04":  # an HTTP/2 SETTINGS frame: the server spoke plaintext HTTP/2
        fail("the TCP port answered a plaintext HTTP/2 preface with a SETTINGS frame")
    ok("plaintext: a gRPC client fails (%s), a raw HTTP/2 preface gets no HTTP/2 answer" %
       r.stderr.strip()[:100])

    # --- the audit log has the TCP calls with the credentials' uids.
    rows = audit_rows()
    want = [(ALICE[1], "SubmitJob", jid, "OK"), (BOB[1], "CancelJob", jid, "PERMISSION_DENIED"),
            (BOB[1], "Drain", "node", "PERMISSION_DENIED"),
            (ADMIN[1], "CancelJob", second, "OK"), (ALICE[1], "CancelJob", jid, "OK"),
            (CERT_USER[1], "SubmitJob", cjob["id"], "OK"),
            (CERT_USER[1], "CancelJob", cjob["id"], "OK")]
    missing = [w for w in want if w not in rows]
    if missing:
        fail("audit log lacks %s; it has %s" % (missing, rows))
    ok("audit log: %d rows, including %d TCP calls with the token's / certificate's uid" %
       (len(rows), len(want)))

    # --- the unix socket and metrics as before; no token in the log.
    all_jobs = json.loads(cli("ls", "--json", unix=True).stdout).get("jobs", [])
    if len(all_jobs) != 3:
        fail("root over the unix socket lists %d jobs" % len(all_jobs))
    with open(LOG) as f:
        text = f.read()
    for tok in list(TOKENS.values()) + ["wrong-token-0123456789abcdef"]:
        if tok in text:
            fail("a token appears in the daemon log")
    m = re.search(r"Prometheus metrics on http://\S+ \(port (\d+)\)", text)
    metrics = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % m.group(1), timeout=5).read()
    if b'mobius_rpc_duration_seconds_count{method="JobService.SubmitJob"}' not in metrics:
        fail("metrics lack the SubmitJob RPCs")
    ok("unix socket: root lists all 3 jobs; /metrics counts the TCP RPCs; no token in the log")

    H.daemon.send_signal(signal.SIGTERM)
    if H.daemon.wait(timeout=60) != 0:
        fail("daemon exit code %d after SIGTERM" % daemon.returncode)
    ok("SIGTERM: clean exit")


try:
    main()
finally:
    H.kill_daemon()
    shutil.rmtree(TMP, ignore_errors=True)
