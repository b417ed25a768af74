#!/usr/bin/env python3
"""Checks deploy/grafana/mobius-dashboard.json without a daemon:

  - the JSON parses, is what deploy/grafana/make_dashboard.py writes, and is provisioning-ready
    (no numeric id, a fixed uid, the data source through the `datasource` variable);
  - it has the rows Cluster overview, GPUs, PCIe links, Jobs and the variables node, gpu and job;
  - the grid has no overlapping panels, panel ids are unique, every panel has a query;
  - every metric a query uses is in the catalogue (server/metrics/daemon_metrics.cc), with the
    suffixes its type allows (_bucket/_sum/_count for histograms);
  - every query is valid PromQL (`promtool check rules` on the queries as recording rules);
  - the panels listed in docs/operations.md ("Dashboards") are exactly the dashboard's, and its
    metric list ("Metrics") is exactly the catalogue.

prometheus_integration_test.py imports this module to check the same queries against a live
scrape and a real Prometheus.

Usage: dashboard_test.py SOURCE_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROWS = ["Cluster overview", "GPUs", "PCIe links", "Jobs", "Users"]
VARIABLES = ["datasource", "node", "gpu", "job"]
# Grafana's built-in variables, replaced by fixed values to evaluate a query outside Grafana.
SUBSTITUTIONS = {"$__rate_interval": "10s", "$__interval": "1s", "$__range": "10m",
                 "$node": ".*", "$gpu": ".*", "$job": ".*"}
METRIC = re.compile(r"\bmobius_[a-z0-9_]+\b")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def load(src):
    with open(os.path.join(src, "deploy/grafana/mobius-dashboard.json")) as f:
        return json.load(f)


def panels(dash):
    """Every panel, rows included, with its row's title: [(row_title, panel)]."""
    out, row = [], None
    for p in dash["panels"]:
        if p.get("type") == "row":
            row = p["title"]
            for child in p.get("panels", []):  # a collapsed row keeps its panels inside
                out.append((row, child))
        out.append((row, p))
    return out


def queries(dash):
    """[(where, PromQL)] for every panel target and query variable."""
    out = []
    for row, p in panels(dash):
        for t in p.get("targets", []):
            out.append(("panel %r target %s" % (p["title"], t.get("refId")), t["expr"]))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            out.append(("variable %r" % v["name"], v["query"]))
    return out


def substitute(expr):
    for k in sorted(SUBSTITUTIONS, key=len, reverse=True):
        expr = expr.replace(k, SUBSTITUTIONS[k])
    return expr


def label_values_as_promql(expr):
    """label_values(metric{...}, label) is Grafana's; as PromQL: count by (label) (metric{...})."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*", expr)
    return "count by (%s) (%s)" % (m.group(2), m.group(1)) if m else expr


def catalogue(src):
    """{family: type} from the .Name("...") registrations in daemon_metrics.cc."""
    with open(os.path.join(src, "server/metrics/daemon_metrics.cc")) as f:
        text = f.read()
    out = {}
    for kind, name in re.findall(r"Build(Counter|Gauge|Histogram|Summary)\(\)\s*\.Name\(\"([a-z0-9_]+)\"\)",
                                 text):
        out[name] = kind.lower()
    return out


def sample_names(family, kind):
    if kind == "histogram":
        return [family + s for s in HISTOGRAM_SUFFIXES]
    return [family]


def operations_panels(src):
    """(row, panel) pairs of the table in docs/operations.md's "## Dashboards" section."""
    with open(os.path.join(src, "docs/operations.md")) as f:
        text = f.read()
    m = re.search(r"^## Dashboards\n(.*?)(?=^## )", text, re.S | re.M)
    if not m:
        raise AssertionError('docs/operations.md has no "## Dashboards" section')
    pairs = []
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2 or set(cells[0]) <= {"-", " ", ":"}:
            continue
        if cells[0] == "row":
            continue
        pairs.append((cells[0], cells[1].strip("`")))
    return pairs


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def ok(msg):
    print("ok: " + msg, flush=True)


def check_static(src):
    dash = load(src)
    gen = subprocess.run([sys.executable, os.path.join(src, "deploy/grafana/make_dashboard.py"),
                          "--check"], capture_output=True, text=True)
    if gen.returncode != 0:
        fail("mobius-dashboard.json is not what make_dashboard.py writes: " + gen.stderr)
    ok("the JSON parses and matches make_dashboard.py")

    if dash.get("id") is not None or dash.get("uid") != "mobius-overview" or not dash.get("title"):
        fail("not provisioning-ready: id %r uid %r" % (dash.get("id"), dash.get("uid")))
    names = [v["name"] for v in dash["templating"]["list"]]
    if names != VARIABLES:
        fail("variables %s, want %s" % (names, VARIABLES))
    for row, p in panels(dash):
        for ds in [p.get("datasource")] + [t.get("datasource") for t in p.get("targets", [])]:
            if ds is not None and ds.get("uid") != "${datasource}":
                fail("panel %r names data source %r instead of ${datasource}" % (p["title"], ds))
    ok("provisioning-ready: uid %s, variables %s, data source by variable" %
       (dash["uid"], ", ".join(names)))

    rows = [p["title"] for _, p in panels(dash) if p["type"] == "row"]
    if rows != ROWS:
        fail("rows %s, want %s" % (rows, ROWS))
    ids, cells = set(), {}
    for row, p in panels(dash):
        if p["id"] in ids:
            fail("duplicate panel id %d" % p["id"])
        ids.add(p["id"])
        g = p["gridPos"]
        if g["x"] < 0 or g["w"] <= 0 or g["x"] + g["w"] > 24 or g["h"] <= 0:
            fail("panel %r outside the 24-column grid: %s" % (p["title"], g))
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    fail("panels %r and %r overlap" % (cells[(x, y)], p["title"]))
                cells[(x, y)] = p["title"]
        if p["type"] != "row" and not any(t.get("expr") for t in p.get("targets", [])):
            fail("panel %r has no query" % p["title"])
    ok("%d rows, %d panels, no overlaps, unique ids" % (len(rows), len(ids) - len(rows)))

    cat = catalogue(src)
    if len(cat) < 20:
        fail("found only %d metric families in daemon_metrics.cc" % len(cat))
    known = {n for f, k in cat.items() for n in sample_names(f, k)}
    used = set()
    for where, expr in queries(dash):
        for name in METRIC.findall(expr):
            if name not in known:
                fail("%s uses %s, which is not in the catalogue" % (where, name))
            used.add(name)
    # The panels the operators asked for, by what they query.
    for needed in ["mobius_jobs", "mobius_job_queue_wait_seconds_bucket",
                   "mobius_admission_rejections_total", "mobius_rpc_duration_seconds_bucket",
                   "mobius_gpu_memory_used_bytes", "mobius_gpu_memory_capacity_bytes",
                   "mobius_stage_swap_bytes_total", "mobius_swap_stall_seconds_total",
                   "mobius_gpu_compute_seconds_total", "mobius_pcie_link_bytes_total",
                   "mobius_job_loss", "mobius_job_tokens_total",
                   "mobius_job_step_duration_seconds_bucket", "mobius_job_planned_step_seconds",
                   "mobius_job_measured_step_seconds", "mobius_job_mfu_ratio"]:
        if needed not in used:
            fail("no panel queries %s" % needed)
    if not any("rate(mobius_job_tokens_total" in e for _, e in queries(dash)):
        fail("tokens/s is not rate(mobius_job_tokens_total)")
    ok("%d metric names used, all in the catalogue of %d families" % (len(used), len(cat)))

    promtool = shutil.which("promtool")
    if promtool is None:
        fail("promtool not found (Debian package prometheus; deploy/install-deps.sh installs it)")
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        rules = [{"record": "dashboard:query_%d" % i,
                  "expr": label_values_as_promql(substitute(expr))}
                 for i, (_, expr) in enumerate(queries(dash))]
        json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)  # JSON is YAML
    r = subprocess.run([promtool, "check", "rules", f.name], capture_output=True, text=True)
    os.unlink(f.name)
    if r.returncode != 0:
        fail("a dashboard query is not valid PromQL:\n" + r.stdout + r.stderr)
    ok("%d queries are valid PromQL (promtool check rules)" % len(rules))

    documented = operations_panels(src)
    actual = [(row, p["title"]) for row, p in panels(dash) if p["type"] != "row"]
    if sorted(documented) != sorted(actual):
        missing = sorted(set(documented) - set(actual))
        undocumented = sorted(set(actual) - set(documented))
        fail("docs/operations.md and the dashboard disagree: documented but missing %s; "
             "undocumented %s" % (missing, undocumented))
    ok("the %d panels of docs/operations.md exist in their rows" % len(documented))

    with open(os.path.join(src, "docs/operations.md")) as f:
        m = re.search(r"^## Metrics\n(.*?)(?=^## )", f.read(), re.S | re.M)
    listed = dict(re.findall(r"^\| `(mobius_[a-z0-9_]+)` \| (\w+) \|", m.group(1) if m else "",
                             re.M))
    if listed != cat:
        fail("docs/operations.md's metric list differs from the catalogue: %s" %
             sorted(set(listed.items()) ^ set(cat.items())))
    ok("docs/operations.md lists the %d catalogue metrics with their types" % len(cat))
    return dash


def check_against_scrapes(dash, src, scrapes):
    """Every metric name used by a query appears as a sample in one of the exposition texts."""
    seen = set()
    for text in scrapes:
        for line in text.splitlines():
            if line and not line.startswith("#"):
                seen.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    missing = sorted({n for _, e in queries(dash) for n in METRIC.findall(e)} - seen)
    return missing


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../..")
    check_static(os.path.abspath(src))


if __name__ == "__main__":
    main()
