#!/usr/bin/env python3
"""Writes deploy/grafana/mobius-dashboard.json, the Grafana dashboard for mobiusd's metrics.

The JSON is generated so that its queries stay consistent (the same label filters everywhere) and
reviewable here in one screen; edit this file, run it, and commit both:

    deploy/grafana/make_dashboard.py            # rewrites mobius-dashboard.json
    deploy/grafana/make_dashboard.py --check    # exit 1 if the JSON is not what this writes

The dashboard is provisioning-ready (no numeric id, a fixed uid, the Prometheus data source chosen
by a variable), so Grafana can load it from a file provider (provisioning/dashboards/mobius.yaml)
or an operator can import it. Panel titles are listed in docs/operations.md ("Dashboards");
test/deploy/dashboard_test.py checks the two agree and that every metric queried here exists.
"""
import json
import os
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mobius-dashboard.json")
DS = {"type": "prometheus", "uid": "${datasource}"}
NODE = 'node=~"$node"'
GPU = 'node=~"$node", gpu=~"$gpu"'
JOB = 'node=~"$node", job=~"$job"'
RATE = "$__rate_interval"


class Layout:
    """Places panels left to right in rows of 24 grid units."""

    def __init__(self):
        self.panels, self.y, self.x, self.row_h, self.next_id = [], 0, 0, 0, 1

    def row(self, title):
        self.newline()
        self.panels.append({"type": "row", "title": title, "collapsed": False, "id": self.take_id(),
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.y += 1

    def newline(self):
        self.y += self.row_h
        self.x, self.row_h = 0, 0

    def take_id(self):
        self.next_id += 1
        return self.next_id - 1

    def add(self, panel, w, h=8):
        if self.x + w > 24:
            self.newline()
        panel["id"] = self.take_id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.row_h = max(self.row_h, h)
        self.panels.append(panel)


def target(ref, expr, legend):
    return {"refId": ref, "datasource": DS, "expr": expr, "legendFormat": legend, "range": True}


def timeseries(title, description, unit, targets, stack=False, min0=True, overrides=None):
    custom = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
              "spanNulls": False, "stacking": {"mode": "normal" if stack else "none",
                                               "group": "A"}}
    defaults = {"unit": unit, "custom": custom}
    if min0:
        defaults["min"] = 0
    return {"type": "timeseries", "title": title, "description": description, "datasource": DS,
            "targets": [target(chr(ord("A") + i), e, l) for i, (e, l) in enumerate(targets)],
            "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom",
                                   "showLegend": True},
                        "tooltip": {"mode": "multi", "sort": "desc"}}}


def stat(title, description, unit, expr, legend):
    return {"type": "stat", "title": title, "description": description, "datasource": DS,
            "targets": [target("A", expr, legend)],
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "area", "justifyMode": "auto",
                        "orientation": "auto", "textMode": "auto"}}


def bars(title, description, unit, expr, legend):
    return {"type": "bargauge", "title": title, "description": description, "datasource": DS,
            "targets": [dict(target("A", expr, legend), instant=True, range=False)],
            "fieldConfig": {"defaults": {"unit": unit, "min": 0}, "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "orientation": "horizontal", "displayMode": "gradient",
                        "showUnfilled": True}}


def dashed(regex):
    """An override drawing the series whose name matches `regex` as a dashed line."""
    return {"matcher": {"id": "byRegexp", "options": regex},
            "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
                           {"id": "custom.fillOpacity", "value": 0}]}


def quantiles(metric, by, labels, qs=(0.5, 0.99), window=RATE):
    return [("histogram_quantile(%s, sum by (%s) (rate(%s_bucket{%s}[%s])))"
             % (q, ", ".join(["le"] + by), metric, labels, window),
             "p%d%s" % (round(q * 100), "".join(" {{%s}}" % b for b in by)))
            for q in qs]


def panels():
    p = Layout()

    p.row("Cluster overview")
    p.add(timeseries("Jobs by state", "Queued and running jobs per node (mobius_jobs).", "short",
                     [("sum by (node, state) (mobius_jobs{%s})" % NODE, "{{node}} {{state}}")],
                     stack=True), 6)
    p.add(timeseries("Queue wait (p50, p99)",
                     "Time from submission to start of the jobs that started in the last hour "
                     "(mobius_job_queue_wait_seconds).", "s",
                     quantiles("mobius_job_queue_wait_seconds", [], NODE, window="1h")), 6)
    p.add(timeseries("Admission rejections by reason",
                     "Submissions refused before queueing: invalid_spec (a bad file or path), "
                     "never_fits (needs more GPUs or memory than the node has).", "short",
                     [("sum by (reason) (increase(mobius_admission_rejections_total{%s}[%s]))"
                       % (NODE, RATE), "{{reason}}")], stack=True), 6)
    p.add(timeseries("RPC latency p99 by method",
                     "99th percentile of the daemon's gRPC handling time "
                     "(mobius_rpc_duration_seconds); streaming calls (watch, logs -f) last as "
                     "long as the client follows.", "s",
                     quantiles("mobius_rpc_duration_seconds", ["method"], NODE, qs=(0.99,))), 6)
    p.add(timeseries("Tokens/s, all jobs", "Training throughput of the node "
                     "(rate of mobius_train_tokens_total).", "short",
                     [("sum by (node) (rate(mobius_train_tokens_total{%s}[%s]))" % (NODE, RATE),
                       "{{node}}")]), 8)
    p.add(timeseries("Host memory: pinned and model store",
                     "Page-locked host memory (planner estimate) and the shared host model stores "
                     "(/dev/shm) of running jobs.", "bytes",
                     [("sum by (node) (mobius_host_pinned_bytes{%s})" % NODE, "{{node}} pinned"),
                      ("sum by (node) (mobius_host_store_bytes{%s})" % NODE, "{{node}} store")]),
          8)
    p.add(stat("Worker restarts", "Jobs restarted from their last checkpoint after a worker "
               "failure, in the selected time range.", "short",
               "sum(increase(mobius_worker_restarts_total{%s}[$__range]))" % NODE, "restarts"), 4)
    p.add(stat("Daemons by version", "mobiusd processes answering scrapes, by version "
               "(mobius_build_info).", "short",
               "count by (version) (mobius_build_info{%s})" % NODE, "{{version}}"), 4)

    p.row("GPUs")
    p.add(timeseries("GPU memory used / capacity",
                     "What the running job's plan uses on each GPU (solid) against the GPU's "
                     "memory (dashed). Mobius's own use only; NVIDIA's DCGM exporter reports the "
                     "driver's view.", "bytes",
                     [("mobius_gpu_memory_used_bytes{%s}" % GPU, "gpu {{gpu}} used"),
                      ("mobius_gpu_memory_capacity_bytes{%s}" % GPU, "gpu {{gpu}} capacity")],
                     overrides=[dashed(".*capacity")]), 12)
    p.add(timeseries("Swap bytes/s per GPU and direction",
                     "Stage weights, activations and gradients copied between host and GPU "
                     "(h2d: host to device, d2h: device to host).", "Bps",
                     [("sum by (gpu, direction) (rate(mobius_stage_swap_bytes_total{%s}[%s]))"
                       % (GPU, RATE), "gpu {{gpu}} {{direction}}")]), 12)
    p.add(timeseries("Swap stall seconds/s per GPU",
                     "Share of time each GPU's worker waited for stage weights, activations or "
                     "updates (1 = always waiting): high means PCIe-bound.", "percentunit",
                     [("sum by (gpu) (rate(mobius_swap_stall_seconds_total{%s}[%s]))"
                       % (GPU, RATE), "gpu {{gpu}}")]), 12)
    p.add(timeseries("Compute seconds/s per GPU",
                     "Share of time each GPU's worker spent waiting for its compute queue "
                     "(1 = always computing).", "percentunit",
                     [("sum by (gpu) (rate(mobius_gpu_compute_seconds_total{%s}[%s]))"
                       % (GPU, RATE), "gpu {{gpu}}")]), 12)

    p.row("PCIe links")
    p.add(timeseries("PCIe link bytes/s by link and direction",
                     "Traffic over each PCIe link of the topology: a GPU's own link (gpuN) and "
                     "shared switch uplinks. On the CPU backend these are the emulated links.",
                     "Bps",
                     [("sum by (link, direction) (rate(mobius_pcie_link_bytes_total{%s}[%s]))"
                       % (NODE, RATE), "{{link}} {{direction}}")]), 16)
    p.add(bars("PCIe bytes moved in range", "Bytes over each link in the selected time range.",
               "bytes",
               "sum by (link, direction) (increase(mobius_pcie_link_bytes_total{%s}[$__range]))"
               % NODE, "{{link}} {{direction}}"), 8)

    p.row("Jobs")
    p.add(timeseries("Loss", "Training loss of each running job's last step.", "none",
                     [("mobius_job_loss{%s}" % JOB, "{{job}}")], min0=False), 8)
    p.add(timeseries("Tokens/s per job", "rate(mobius_job_tokens_total): trained tokens per "
                     "second.", "short",
                     [("sum by (job) (rate(mobius_job_tokens_total{%s}[%s]))" % (JOB, RATE),
                       "{{job}}")]), 8)
    p.add(timeseries("MFU", "Model FLOPs utilisation: 6 x parameters FLOPs per token over the "
                     "peak of the job's GPUs (mobius_job_mfu_ratio).", "percentunit",
                     [("mobius_job_mfu_ratio{%s}" % JOB, "{{job}}")]), 8)
    p.add(timeseries("Step duration (p50, p99)", "Optimizer step wall time per job "
                     "(mobius_job_step_duration_seconds).", "s",
                     quantiles("mobius_job_step_duration_seconds", ["job"], JOB)), 12)
    p.add(timeseries("Planned vs measured step time",
                     "The planner's predicted step time (dashed) against the last measured one: "
                     "a wide gap means the cost model or the topology is off.", "s",
                     [("mobius_job_planned_step_seconds{%s}" % JOB, "{{job}} planned"),
                      ("mobius_job_measured_step_seconds{%s}" % JOB, "{{job}} measured")],
                     overrides=[dashed(".*planned")]), 12)
    p.add(timeseries("Progress", "Completed steps over total steps of each running job "
                     "(mobius_job_progress_ratio; mobius_job_current_step and "
                     "mobius_job_total_steps hold the counts).", "percentunit",
                     [("mobius_job_progress_ratio{%s}" % JOB, "{{job}}")]), 12)
    p.add(timeseries("Tokens/s per job (last step)", "Each running job's throughput over its "
                     "last step, as the trainer measured it (mobius_job_tokens_per_second).",
                     "short", [("mobius_job_tokens_per_second{%s}" % JOB, "{{job}}")]), 12)

    p.row("Users")
    p.add(bars("GPU-hours by user", "GPUs held x wall time of each user's runs in the selected "
               "range (mobius_user_gpu_seconds_total; `mobius usage` has the durable record).",
               "h", "sum by (user) (increase(mobius_user_gpu_seconds_total{%s}[$__range])) / 3600"
               % NODE, "{{user}}"), 8)
    p.add(timeseries("GPUs in use by user", "GPUs held by each user's running jobs (rate of "
                     "mobius_user_gpu_seconds_total).", "short",
                     [("sum by (user) (rate(mobius_user_gpu_seconds_total{%s}[%s]))"
                       % (NODE, RATE), "{{user}}")], stack=True), 8)
    p.add(timeseries("Fair-share factor", "Each user's fair-share factor (1: no recent usage; "
                     "lower goes later among equal priorities), users with queued or running "
                     "jobs (mobius_user_fair_share).", "short",
                     [("mobius_user_fair_share{%s}" % NODE, "{{node}} {{user}}")]), 8)
    p.add(bars("Tokens by user", "Tokens trained by each user's runs in the selected range "
               "(mobius_user_tokens_total).", "short",
               "sum by (user) (increase(mobius_user_tokens_total{%s}[$__range]))" % NODE,
               "{{user}}"), 8)
    p.add(bars("Host memory GiB-hours by user", "The plans' host-memory estimates x wall time "
               "of each user's runs in the selected range "
               "(mobius_user_host_memory_gib_seconds_total).", "short",
               "sum by (user) (increase(mobius_user_host_memory_gib_seconds_total{%s}[$__range]))"
               " / 3600" % NODE, "{{user}}"), 8)
    return p.panels


def query_variable(name, label, query):
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": query, "definition": query, "refresh": 2, "sort": 1, "regex": "",
            "includeAll": True, "multi": True, "allValue": ".*", "hide": 0, "options": [],
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}}


def dashboard():
    return {
        "id": None,
        "uid": "mobius-overview",
        "title": "Mobius",
        "description": "mobiusd: jobs, GPUs, PCIe links and per-job training progress "
                       "(docs/operations.md).",
        "tags": ["mobius", "fine-tuning", "gpu"],
        "timezone": "",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 38,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-3h", "to": "now"},
        "timepicker": {},
        "links": [],
        "annotations": {"list": [{
            "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
            "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
            "name": "Annotations & Alerts", "type": "dashboard"}]},
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource",
             "query": "prometheus", "regex": "", "hide": 0, "includeAll": False, "multi": False,
             "options": [], "refresh": 1, "current": {}},
            query_variable("node", "Node", "label_values(mobius_build_info, node)"),
            query_variable("gpu", "GPU",
                           'label_values(mobius_gpu_memory_capacity_bytes{node=~"$node"}, gpu)'),
            query_variable("job", "Job",
                           'label_values(mobius_job_tokens_total{node=~"$node"}, job)'),
        ]},
        "panels": panels(),
    }


def render():
    return json.dumps(dashboard(), indent=2) + "\n"


def main():
    text = render()
    if sys.argv[1:] == ["--check"]:
        with open(OUT) as f:
            if f.read() != text:
                print("%s is stale: run %s" % (OUT, sys.argv[0]), file=sys.stderr)
                return 1
        return 0
    if sys.argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    with open(OUT, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
