#!/usr/bin/env python3
"""A real Prometheus scraping a real mobiusd that trains a job (Debian's prometheus package;
nothing is installed at test time).

  - Prometheus runs with deploy/prometheus/prometheus.yml, changed only to scrape every second
    and to point at the test daemon's metrics port (its relabeling and alert rules are kept and
    must load);
  - the daemon runs the emulated paper testbed (2 sockets, 2 PCIe switches, 8 RTX 3090s) on the
    CPU backend with emulated links; a submission that can never fit is refused; then a small
    job runs to completion with `mobius submit --wait`;
  - while it runs, Prometheus has its per-job series (mobius_job_tokens_total{job="j-..."}); after
    it ends they go stale; mobius_stage_swap_bytes_total{direction="h2d"}, link bytes and
    mobius_train_tokens_total are non-zero, the token count is exactly steps x batch x sequence;
  - `promtool check metrics` passes on scrapes taken during and after the job;
  - the Grafana dashboard: every metric it queries is in a live scrape, and every panel and
    variable query returns data from this Prometheus (during the run or at the end).

Usage: prometheus_integration_test.py BIN_DIR SOURCE_DIR
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dashboard_test  # noqa: E402  (same folder)
import fixture  # noqa: E402

BIN, SRC = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
FIXTURE = os.path.join(SRC, fixture.TOPOLOGY)
TMP = tempfile.mkdtemp(prefix="mobius-prom-it-")
SOCK = os.path.join(TMP, "d.sock")
ENV = dict(os.environ, MOBIUS_SOCKET=SOCK)
STEPS, BATCH, SEQ = 160, 4, 32  # long enough (~5 s) for several 1 s scrapes of per-job series
procs = {}


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    for name in ("daemon", "prometheus"):
        path = os.path.join(TMP, name + ".log")
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                sys.stderr.write("--- %s.log (tail)\n%s\n" % (name, f.read()[-4000:]))
    stop_all()
    sys.exit(1)


def ok(msg):
    print("ok: " + msg, flush=True)


def stop_all():
    for p in procs.values():
        if p.poll() is None:
            p.kill()
            p.wait()


def cli(*args, check=True, timeout=120):
    r = subprocess.run([os.path.join(BIN, "mobius"), *args], env=ENV, capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        fail("mobius %s -> exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def wait_for(what, fn, seconds, interval=0.2):
    deadline = time.time() + seconds
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(interval)
    fail("timed out after %d s waiting for %s" % (seconds, what))


# --- the daemon ---------------------------------------------------------------------------------

def start_daemon():
    log = open(os.path.join(TMP, "daemon.log"), "w")
    procs["daemon"] = subprocess.Popen(
        [os.path.join(BIN, "mobiusd"), "--socket", SOCK, "--state-dir", os.path.join(TMP, "state"),
         "--topology-file", FIXTURE, "--link-scale", "0.02", "--metrics-address", "127.0.0.1:0"],
        stdout=log, stderr=subprocess.STDOUT)

    def port():
        if procs["daemon"].poll() is not None:
            fail("mobiusd exited during start-up")
        with open(os.path.join(TMP, "daemon.log"), errors="replace") as f:
            m = re.search(r"Prometheus metrics on http://\S+ \(port (\d+)\)", f.read())
        return int(m.group(1)) if m else None

    metrics_port = wait_for("the daemon's metrics port in its log", port, 30)
    wait_for("mobius health", lambda: cli("--timeout-seconds", "1", "health",
                                          check=False).returncode == 0, 30)
    return metrics_port


def scrape(port):
    status, text = http_get("http://127.0.0.1:%d/metrics" % port)
    if status != 200:
        fail("GET /metrics -> %d" % status)
    return text


# --- Prometheus ---------------------------------------------------------------------------------

def prometheus_config(metrics_port):
    """The shipped config, scraping every second and pointed at the test daemon."""
    with open(os.path.join(SRC, "deploy/prometheus/prometheus.yml")) as f:
        conf = yaml.safe_load(f)
    conf["global"]["scrape_interval"] = "1s"
    conf["global"]["evaluation_interval"] = "1s"
    rules_dir = os.path.join(SRC, "deploy/prometheus")
    conf["rule_files"] = [os.path.join(rules_dir, r) for r in conf.get("rule_files", [])]
    jobs = [j for j in conf["scrape_configs"] if j["job_name"] == "mobiusd"]
    if len(jobs) != 1:
        fail("prometheus.yml has no single `mobiusd` scrape job")
    jobs[0]["scrape_interval"] = "1s"
    jobs[0]["scrape_timeout"] = "1s"
    jobs[0]["static_configs"][0]["targets"] = ["127.0.0.1:%d" % metrics_port]
    path = os.path.join(TMP, "prometheus.yml")
    with open(path, "w") as f:
        yaml.safe_dump(conf, f)
    return path


def start_prometheus(config):
    port = free_port()
    log = open(os.path.join(TMP, "prometheus.log"), "w")
    procs["prometheus"] = subprocess.Popen(
        ["/usr/bin/prometheus", "--config.file=" + config,
         "--storage.tsdb.path=" + os.path.join(TMP, "tsdb"),
         "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT)
    base = "http://127.0.0.1:%d" % port

    def ready():
        if procs["prometheus"].poll() is not None:
            fail("prometheus exited during start-up")
        try:
            return http_get(base + "/-/ready", timeout=1)[0] == 200
        except OSError:
            return False

    wait_for("Prometheus /-/ready", ready, 60)
    return base


def query(base, expr, at=None):
    """The result vector of an instant query; fails the test on a query error."""
    params = {"query": expr}
    if at is not None:
        params["time"] = "%.3f" % at
    url = base + "/api/v1/query?" + urllib.parse.urlencode(params)
    try:
        _, body = http_get(url)
    except urllib.error.HTTPError as e:
        fail("query %r: HTTP %d %s" % (expr, e.code, e.read().decode()[:500]))
    r = json.loads(body)
    if r.get("status") != "success":
        fail("query %r: %s" % (expr, r))
    return r["data"]["result"]


def scalar(base, expr, at=None):
    res = query(base, expr, at)
    return float(res[0]["value"][1]) if res else None


def promtool_check(text, what):
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True)
    if r.returncode != 0 or r.stdout.strip() or r.stderr.strip():
        fail("promtool check metrics on %s (exit %d):\n%s%s" % (what, r.returncode, r.stdout,
                                                                 r.stderr))


# --- the test -----------------------------------------------------------------------------------

def run_job(base, metrics_port):
    """Runs the job with submit --wait; returns (job id, scrapes during the run, last time
    Prometheus had the job's series)."""
    spec = fixture.write_spec(TMP, "prom", STEPS, 2, batch=BATCH, seq=SEQ)
    wait = subprocess.Popen([os.path.join(BIN, "mobius"), "submit", spec, "--wait"], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    job_id, running_scrapes, prom_seen_at, prom_tokens = None, [], None, 0.0
    deadline = time.time() + 200
    while wait.poll() is None and time.time() < deadline:
        if job_id is None:
            jobs = json.loads(cli("ls", "--json").stdout or "{}").get("jobs", [])
            job_id = jobs[-1]["id"] if jobs else None
        if job_id is not None:
            text = scrape(metrics_port)
            if 'job="%s"' % job_id in text:
                running_scrapes.append(text)
            v = scalar(base, 'mobius_job_tokens_total{job="%s"}' % job_id)
            if v is not None and v > 0:
                prom_seen_at, prom_tokens = time.time(), v
        time.sleep(0.25)
    if wait.poll() is None:
        wait.kill()
        fail("the job did not finish in 200 s")
    out = wait.stdout.read()
    if wait.returncode != 0 or "SUCCEEDED" not in out:
        fail("submit --wait exit %d:\n%s" % (wait.returncode, out[-3000:]))
    if job_id is None or not running_scrapes:
        fail("never saw the job's per-job series in a scrape of the daemon (job %s)" % job_id)
    if prom_seen_at is None:
        fail("Prometheus never had mobius_job_tokens_total{job=%r} > 0 while the job ran" % job_id)
    ok("job %s SUCCEEDED via submit --wait; Prometheus had its per-job tokens (%d) while it ran; "
       "%d daemon scrapes with its series" % (job_id, prom_tokens, len(running_scrapes)))
    return job_id, running_scrapes, prom_seen_at


def check_after_job(base, job_id, metrics_port):
    expected = STEPS * BATCH * SEQ
    wait_for("Prometheus to scrape the final token count",
             lambda: scalar(base, "mobius_train_tokens_total") == expected, 20)
    h2d = scalar(base, 'sum(mobius_stage_swap_bytes_total{direction="h2d"})')
    d2h = scalar(base, 'sum(mobius_stage_swap_bytes_total{direction="d2h"})')
    links = scalar(base, "sum(mobius_pcie_link_bytes_total)")
    if not h2d or h2d <= 0 or not d2h or d2h <= 0:
        fail("swap bytes h2d %s d2h %s" % (h2d, d2h))
    if not links or links <= 0:
        fail("no PCIe link bytes: %s" % links)
    per_gpu = query(base, 'mobius_stage_swap_bytes_total{direction="h2d"} > 0')
    ok("Prometheus: mobius_train_tokens_total = %d (= %d steps x %d x %d), H2D %d bytes on %d "
       "GPU(s), D2H %d, %d bytes over emulated links" %
       (expected, STEPS, BATCH, SEQ, h2d, len(per_gpu), d2h, links))
    # The job's series over its lifetime, then stale once the daemon removed them.
    peak = scalar(base, 'max_over_time(mobius_job_tokens_total{job="%s"}[10m])' % job_id)
    if peak is None or not 0 < peak <= expected:
        fail("max_over_time of the job's tokens: %s (want 0 < x <= %d)" % (peak, expected))
    steps = scalar(base, 'max_over_time(mobius_job_step_duration_seconds_count{job="%s"}[10m])'
                   % job_id)
    if not steps or steps <= 0:
        fail("the job's step histogram never had a count: %s" % steps)
    wait_for("the job's series to go stale",
             lambda: not query(base, 'mobius_job_tokens_total{job="%s"}' % job_id), 20)
    if 'job="%s"' % job_id in scrape(metrics_port):
        fail("the daemon still exports series of the finished job")
    ok("per-job series: peak %d tokens, %d steps in the histogram; stale after the job" %
       (peak, steps))
    if scalar(base, 'mobius_admission_rejections_total{reason="never_fits"}') != 1:
        fail("the refused submission is not counted as never_fits")
    if scalar(base, 'up{job="mobiusd"}') != 1:
        fail('up{job="mobiusd"} is not 1: honor_labels must keep the target\'s job for up')
    if not query(base, 'mobius_build_info{node="127.0.0.1"}'):
        fail("the shipped relabeling did not add node=127.0.0.1")
    ok('never_fits rejection counted; up{job="mobiusd"} = 1; relabeling adds node="127.0.0.1"')


def check_rules(base):
    _, body = http_get(base + "/api/v1/rules")
    groups = json.loads(body)["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    bad = [r["name"] for r in rules if r.get("health") == "err"]
    if not rules or bad:
        fail("alert rules: %d loaded, failing: %s" % (len(rules), bad))
    firing = [r["name"] for r in rules if r.get("state") == "firing"]
    if "MobiusDaemonDown" in firing:
        fail("MobiusDaemonDown fires while the daemon is up")
    ok("%d alert rules of mobius-alerts.yml loaded and evaluate without errors" % len(rules))


def check_dashboard(base, running_scrapes, final_scrape, seen_at):
    dash = dashboard_test.load(SRC)
    missing = dashboard_test.check_against_scrapes(dash, SRC, running_scrapes + [final_scrape])
    if missing:
        fail("dashboard metrics not in any live scrape: %s" % missing)
    empty = []
    for where, expr in dashboard_test.queries(dash):
        promql = dashboard_test.label_values_as_promql(dashboard_test.substitute(expr))
        if not query(base, promql, at=seen_at) and not query(base, promql):
            empty.append("%s: %s" % (where, promql))
    if empty:
        fail("dashboard queries without data:\n  " + "\n  ".join(empty))
    ok("dashboard: every metric it uses is in a live scrape; all %d queries return data" %
       len(dashboard_test.queries(dash)))


def main():
    for tool in ("/usr/bin/prometheus", shutil.which("promtool")):
        if not tool or not os.access(tool, os.X_OK):
            fail("Prometheus is not installed (Debian package prometheus; deploy/install-deps.sh)")
    t0 = time.time()
    fixture.make_model_and_data(BIN, SRC, TMP)
    metrics_port = start_daemon()
    base = start_prometheus(prometheus_config(metrics_port))
    wait_for('Prometheus to scrape the daemon (up{job="mobiusd"} == 1)',
             lambda: scalar(base, 'up{job="mobiusd"}') == 1, 30)
    ok("daemon metrics on port %d, Prometheus on %s scraping it (%.1f s)" %
       (metrics_port, base, time.time() - t0))

    # Refused before queueing (FAILED_PRECONDITION, CLI exit 2): counted as never_fits.
    r = cli("submit", fixture.write_spec(TMP, "too-big", 2, 16), check=False)
    if r.returncode != 2:
        fail("a 16-GPU job on an 8-GPU node: exit %d %s" % (r.returncode, r.stderr))
    job_id, running_scrapes, seen_at = run_job(base, metrics_port)
    promtool_check(running_scrapes[len(running_scrapes) // 2], "a scrape during the job")
    check_after_job(base, job_id, metrics_port)
    final_scrape = scrape(metrics_port)
    promtool_check(final_scrape, "a scrape after the job")
    ok("promtool check metrics passes on scrapes during and after the job")
    check_rules(base)
    check_dashboard(base, running_scrapes, final_scrape, seen_at)

    procs["daemon"].send_signal(signal.SIGTERM)
    if procs["daemon"].wait(timeout=60) != 0:
        fail("daemon exit %d after SIGTERM" % procs["daemon"].returncode)
    procs["prometheus"].send_signal(signal.SIGTERM)
    procs["prometheus"].wait(timeout=30)
    ok("clean shutdown; %.1f s in all" % (time.time() - t0))


try:
    main()
finally:
    stop_all()
    shutil.rmtree(TMP, ignore_errors=True)
