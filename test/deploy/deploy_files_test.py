#!/usr/bin/env python3
"""Checks the deployment files in deploy/.

  files    every Kubernetes YAML parses, each object has apiVersion, kind and metadata.name, and
           the core objects pass a schema check against the Kubernetes API models of Debian's
           python3-kubernetes (unknown or misspelt fields, wrong types, missing required fields);
           the ServiceMonitor's fields are checked against the Prometheus Operator's API; the
           DaemonSet asks for nvidia.com/gpu, mounts the socket and state directories and a
           memory-backed /dev/shm, and probes health with `mobius health`; the Grafana
           provisioning files parse and point at the dashboard; prometheus.yml and the alert
           rules pass promtool; the Slurm scripts parse (bash -n) and the epilog removes exactly
           the orphaned host stores; docs/operations.md documents every daemon flag.
           deploy/kubernetes/multinode/ (the multi-node Indexed Job) gets the same parse and
           schema check, and its Job, headless Service and rendezvous name must agree
           (completions = parallelism = MOBIUS_NODES, subdomain = the Service, MOBIUS_RENDEZVOUS
           = pod 0 under it, checkpoints on the shared claim); mobius-multinode.sbatch runs one
           task per node.
  systemd  `systemd-analyze verify` on deploy/systemd/mobiusd.service (its ExecStart pointed at
           the built mobiusd, since /usr/local/bin/mobiusd is not installed here), its
           `systemd-analyze security` exposure stays at "OK" or better, and the sysusers file is
           valid (`systemd-sysusers --dry-run` in an empty root). Exits 77 (ctest: skipped)
           where systemd-analyze is missing or cannot run.

Usage: deploy_files_test.py files SOURCE_DIR
       deploy_files_test.py systemd SOURCE_DIR BIN_DIR
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

SKIP = 77


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def ok(msg):
    print("ok: " + msg, flush=True)


def run(*cmd, **kw):
    return subprocess.run(list(cmd), capture_output=True, text=True, **kw)


# --- Kubernetes -------------------------------------------------------------------------------

# The Prometheus Operator's ServiceMonitor (monitoring.coreos.com/v1) fields we may use.
SERVICE_MONITOR = {
    "spec": {"jobLabel", "targetLabels", "podTargetLabels", "endpoints", "selector",
             "namespaceSelector", "sampleLimit", "targetLimit", "labelLimit",
             "labelNameLengthLimit", "labelValueLengthLimit", "keepDroppedTargets",
             "attachMetadata"},
    "endpoint": {"port", "targetPort", "path", "scheme", "params", "interval", "scrapeTimeout",
                 "tlsConfig", "bearerTokenFile", "bearerTokenSecret", "authorization",
                 "honorLabels", "honorTimestamps", "basicAuth", "oauth2", "metricRelabelings",
                 "relabelings", "proxyUrl", "followRedirects", "enableHttp2", "filterRunning"},
    "relabel": {"sourceLabels", "separator", "targetLabel", "regex", "modulus", "replacement",
                "action"},
}


def check_schema(obj, type_name, path, models):
    """Walks `obj` against the python3-kubernetes model `type_name`; returns the problems."""
    problems = []
    if type_name in ("object",):
        return problems
    m = re.fullmatch(r"list\[(.*)\]", type_name)
    if m:
        if not isinstance(obj, list):
            return ["%s: must be a list" % path]
        for i, item in enumerate(obj):
            problems += check_schema(item, m.group(1), "%s[%d]" % (path, i), models)
        return problems
    m = re.fullmatch(r"dict\(str, (.*)\)", type_name)
    if m:
        if not isinstance(obj, dict):
            return ["%s: must be a mapping" % path]
        for k, v in obj.items():
            problems += check_schema(v, m.group(1), "%s[%s]" % (path, k), models)
        return problems
    scalar = {"str": str, "int": int, "bool": bool, "float": (int, float)}
    # Resource quantities are strings in the models, but the API also takes plain numbers
    # (`nvidia.com/gpu: 8`).
    if type_name == "str" and re.search(r"\.(limits|requests)\[[^\]]+\]$|\.sizeLimit$", path):
        if isinstance(obj, bool) or not isinstance(obj, (str, int, float)):
            return ["%s: must be a quantity (got %r)" % (path, obj)]
        return problems
    if type_name in scalar:
        if type_name != "bool" and isinstance(obj, bool) or not isinstance(obj, scalar[type_name]):
            return ["%s: must be %s (got %r)" % (path, type_name, obj)]
        return problems
    if type_name == "datetime":
        return problems
    model = getattr(models, type_name, None)
    if model is None:
        return ["%s: unknown model %s" % (path, type_name)]
    if not isinstance(obj, dict):
        return ["%s: must be a mapping (%s)" % (path, type_name)]
    by_json = {j: a for a, j in model.attribute_map.items()}
    for k, v in obj.items():
        if k not in by_json:
            problems.append("%s.%s: unknown field of %s" % (path, k, type_name))
            continue
        attr_type = model.openapi_types[by_json[k]]
        # IntOrString fields (ports, maxUnavailable) are typed "object".
        problems += check_schema(v, attr_type, "%s.%s" % (path, k), models)
    return problems


def deserialize(obj, type_name):
    """The client's own deserialisation: raises ValueError for a missing required field."""
    import kubernetes.client
    api = kubernetes.client.ApiClient()
    return api._ApiClient__deserialize(obj, type_name)  # pylint: disable=protected-access


def model_name(api_version, kind):
    """apps/v1 DaemonSet -> V1DaemonSet (the python3-kubernetes model class)."""
    version = api_version.rpartition("/")[2]
    return version[0].upper() + version[1:] + kind


def check_service_monitor(obj, where):
    spec = obj.get("spec", {})
    for k in spec:
        if k not in SERVICE_MONITOR["spec"]:
            fail("%s: spec.%s is not a ServiceMonitor field" % (where, k))
    if not spec.get("endpoints") or not spec.get("selector"):
        fail("%s: a ServiceMonitor needs spec.selector and spec.endpoints" % where)
    for i, e in enumerate(spec["endpoints"]):
        for k in e:
            if k not in SERVICE_MONITOR["endpoint"]:
                fail("%s: spec.endpoints[%d].%s is not an Endpoint field" % (where, i, k))
        for j, r in enumerate(e.get("relabelings", []) + e.get("metricRelabelings", [])):
            for k in r:
                if k not in SERVICE_MONITOR["relabel"]:
                    fail("%s: endpoints[%d] relabeling %d: %s is not a RelabelConfig field" %
                         (where, i, j, k))
        if e.get("honorLabels") is not True:
            fail("%s: endpoints[%d] must set honorLabels (the job label)" % (where, i))


def load_kubernetes_folder(src, folder):
    """Parses every YAML file of `folder` (not its subfolders) and schema-checks each object;
    returns ({kind: object}, number of files). A Kustomization must list exactly the folder's
    other files."""
    try:
        import kubernetes.client as models
    except ImportError:
        fail("python3-kubernetes is missing (deploy/install-deps.sh installs it)")
    objects = {}
    files = sorted(glob.glob(os.path.join(src, folder, "*.yaml")))
    if not files:
        fail("no Kubernetes files in %s/" % folder)
    for path in files:
        name = os.path.relpath(path, src)
        with open(path) as f:
            try:
                docs = [d for d in yaml.safe_load_all(f) if d is not None]
            except yaml.YAMLError as e:
                fail("%s: %s" % (name, e))
        for d in docs:
            for key in ("apiVersion", "kind"):
                if not isinstance(d.get(key), str) or not d[key]:
                    fail("%s: no %s" % (name, key))
            where = "%s (%s)" % (name, d["kind"])
            if d["kind"] in objects:
                fail("%s: a second %s in %s/" % (where, d["kind"], folder))
            if d["kind"] == "Kustomization":
                for r in d.get("resources", []):
                    if not os.path.isfile(os.path.join(os.path.dirname(path), r)):
                        fail("%s: resource %s does not exist" % (where, r))
                listed = set(d.get("resources", []))
                others = {os.path.basename(p) for p in files} - {os.path.basename(path)}
                if listed != others:
                    fail("%s lists %s, the folder has %s" % (where, sorted(listed), sorted(others)))
                objects[d["kind"]] = d
                continue
            if not isinstance(d.get("metadata"), dict) or not d["metadata"].get("name"):
                fail("%s: no metadata.name" % where)
            if d["kind"] == "ServiceMonitor":
                if d["apiVersion"] != "monitoring.coreos.com/v1":
                    fail("%s: apiVersion %s" % (where, d["apiVersion"]))
                check_service_monitor(d, where)
            else:
                type_name = model_name(d["apiVersion"], d["kind"])
                if type_name is None or not hasattr(models, type_name):
                    fail("%s: no schema for %s %s" % (where, d["apiVersion"], d["kind"]))
                problems = check_schema(d, type_name, d["kind"], models)
                if problems:
                    fail("%s: schema:\n  %s" % (where, "\n  ".join(problems)))
                try:
                    deserialize(d, type_name)
                except (ValueError, TypeError) as e:
                    fail("%s: %s" % (where, e))
            objects[d["kind"]] = d
    return objects, len(files)


def check_kubernetes(src):
    objects, n = load_kubernetes_folder(src, "deploy/kubernetes")
    for kind in ("Namespace", "DaemonSet", "Service", "ServiceMonitor", "Kustomization"):
        if kind not in objects:
            fail("deploy/kubernetes has no %s" % kind)
    ok("%d Kubernetes files parse; core objects pass the python3-kubernetes schema; the "
       "ServiceMonitor uses Prometheus Operator fields" % n)
    check_daemonset(objects["DaemonSet"], objects["Service"], objects["ServiceMonitor"])
    objects, n = load_kubernetes_folder(src, "deploy/kubernetes/multinode")
    for kind in ("Job", "Service", "ConfigMap", "PersistentVolumeClaim", "Kustomization"):
        if kind not in objects:
            fail("deploy/kubernetes/multinode has no %s" % kind)
    ok("deploy/kubernetes/multinode: %d files parse; Job, Service, ConfigMap and "
       "PersistentVolumeClaim pass the python3-kubernetes schema" % n)
    check_multinode_job(objects)


def check_multinode_job(objects):
    """The Indexed Job, its headless Service and the rendezvous name agree (docs/operations.md,
    "Several nodes")."""
    job, svc = objects["Job"], objects["Service"]
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    if spec.get("completionMode") != "Indexed":
        fail("the multi-node Job is not an Indexed Job (completionMode: Indexed)")
    if pod.get("restartPolicy") not in ("Never", "OnFailure"):
        fail("the Job's pods need restartPolicy Never or OnFailure")
    c = [c for c in pod["containers"] if c["name"] == "mobius"][0]
    env = {e["name"]: e for e in c.get("env", [])}
    nodes = int(env.get("MOBIUS_NODES", {}).get("value", "0"))
    if not (nodes >= 2 and spec.get("completions") == nodes and spec.get("parallelism") == nodes):
        fail("completions %s, parallelism %s and MOBIUS_NODES %s must be the same node count >= 2"
             % (spec.get("completions"), spec.get("parallelism"), nodes))
    if svc["spec"].get("clusterIP") != "None":
        fail("the rendezvous Service is not headless (clusterIP: None)")
    labels = job["spec"]["template"]["metadata"]["labels"]
    if not svc["spec"].get("selector") or svc["spec"]["selector"].items() - labels.items():
        fail("the rendezvous Service does not select the Job's pods")
    if pod.get("subdomain") != svc["metadata"]["name"]:
        fail("the pods' subdomain %r is not the Service's name %r" %
             (pod.get("subdomain"), svc["metadata"]["name"]))
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    if ports.get("rendezvous") != 29560:
        fail("the container does not declare the rendezvous port 29560: %s" % ports)
    svc_ports = [p for p in svc["spec"]["ports"] if p.get("targetPort") == "rendezvous"]
    if len(svc_ports) != 1 or svc_ports[0]["port"] != 29560:
        fail("the Service does not expose the rendezvous port 29560: %s" % svc["spec"]["ports"])
    want = "%s-0.%s:29560" % (job["metadata"]["name"], svc["metadata"]["name"])
    if env.get("MOBIUS_RENDEZVOUS", {}).get("value") != want:
        fail("MOBIUS_RENDEZVOUS is %r, not pod 0 under the Service (%s)" %
             (env.get("MOBIUS_RENDEZVOUS", {}).get("value"), want))
    if "MOBIUS_NODE_RANK" in env:
        fail("MOBIUS_NODE_RANK would give every pod the same rank (JOB_COMPLETION_INDEX is it)")
    if "nvidia.com/gpu" not in c["resources"].get("limits", {}):
        fail("the Job's pods ask for no nvidia.com/gpu")
    argv = c.get("command", []) + c.get("args", [])
    if argv[:3] != ["/usr/local/bin/mobius", "run", "/spec/job.yaml"] or \
            "--run-dir" not in argv or argv[argv.index("--run-dir") + 1] != "/work/run":
        fail("the container does not run `mobius run /spec/job.yaml --run-dir /work/run`: %s" % argv)
    # The spec comes from the ConfigMap; its checkpoint.dir is on the shared (ReadWriteMany) claim.
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in c["volumeMounts"]}
    cm = objects["ConfigMap"]
    if mounts.get("/spec", {}).get("configMap", {}).get("name") != cm["metadata"]["name"] or \
            "job.yaml" not in cm.get("data", {}):
        fail("/spec/job.yaml does not come from the ConfigMap %s" % cm["metadata"]["name"])
    job_spec = yaml.safe_load(cm["data"]["job.yaml"])
    ckpt = job_spec.get("checkpoint", {}).get("dir", "")
    shared = [p for p, v in mounts.items()
              if "persistentVolumeClaim" in v and ckpt.startswith(p.rstrip("/") + "/")]
    pvc = objects["PersistentVolumeClaim"]
    if not shared or \
            mounts[shared[0]]["persistentVolumeClaim"]["claimName"] != pvc["metadata"]["name"]:
        fail("the spec's checkpoint.dir %r is not on the shared claim %s" %
             (ckpt, pvc["metadata"]["name"]))
    if "ReadWriteMany" not in pvc["spec"].get("accessModes", []):
        fail("the shared claim is not ReadWriteMany (every node mounts it)")
    ok("multi-node Job: Indexed, %d completions = parallelism = MOBIUS_NODES, headless Service %s "
       "= the pods' subdomain, MOBIUS_RENDEZVOUS=%s, checkpoints on the ReadWriteMany claim" %
       (nodes, svc["metadata"]["name"], want))


def check_daemonset(ds, svc, sm):
    pod = ds["spec"]["template"]["spec"]
    if ds["spec"]["selector"]["matchLabels"].items() - \
            ds["spec"]["template"]["metadata"]["labels"].items():
        fail("DaemonSet selector does not match its pod labels")
    c = [c for c in pod["containers"] if c["name"] == "mobiusd"][0]
    if "nvidia.com/gpu" not in c["resources"].get("limits", {}):
        fail("the DaemonSet asks for no nvidia.com/gpu")
    args = " ".join(c.get("command", []) + c.get("args", []))
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    for path, kind in (("/run/mobius", "hostPath"), ("/var/lib/mobius", "hostPath")):
        if path not in mounts or kind not in volumes[mounts[path]]:
            fail("%s is not a %s mount" % (path, kind))
    socket = re.search(r"--socket[=\s](\S+)", args).group(1)
    state = re.search(r"--state_dir[=\s](\S+)", args).group(1)
    if os.path.dirname(socket) != "/run/mobius" or state != "/var/lib/mobius":
        fail("daemon flags %s do not use the mounted directories" % args)
    shm = volumes.get(mounts.get("/dev/shm"), {}).get("emptyDir", {})
    if shm.get("medium") != "Memory" or not shm.get("sizeLimit"):
        fail("/dev/shm is not a size-limited memory emptyDir: %s" % shm)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        cmd = c.get(probe, {}).get("exec", {}).get("command", [])
        if "health" not in cmd or not any(socket in a for a in cmd):
            fail("%s does not run `mobius health` on %s: %s" % (probe, socket, cmd))
    port = [p for p in c["ports"] if p["name"] == "metrics"][0]["containerPort"]
    if "--metrics_address=0.0.0.0:%d" % port not in args:
        fail("the metrics flag does not serve on the container port %d: %s" % (port, args))
    if svc["spec"]["selector"].items() - ds["spec"]["template"]["metadata"]["labels"].items():
        fail("the Service does not select the DaemonSet's pods")
    if sm["spec"]["selector"]["matchLabels"].items() - svc["metadata"]["labels"].items():
        fail("the ServiceMonitor does not select the Service")
    if sm["spec"]["endpoints"][0]["port"] not in [p["name"] for p in svc["spec"]["ports"]]:
        fail("the ServiceMonitor's port is not the Service's")
    ok("DaemonSet: nvidia.com/gpu, hostPath socket and state dirs, /dev/shm emptyDir %s, exec "
       "probes via `mobius health`; Service and ServiceMonitor select it" % shm["sizeLimit"])


# --- Prometheus and Grafana -----------------------------------------------------------------------

def check_prometheus(src):
    promtool = shutil.which("promtool")
    if promtool is None:
        fail("promtool not found (Debian package prometheus; deploy/install-deps.sh installs it)")
    conf = os.path.join(src, "deploy/prometheus/prometheus.yml")
    r = run(promtool, "check", "config", conf)
    if r.returncode != 0:
        fail("promtool check config:\n" + r.stdout + r.stderr)
    with open(conf) as f:
        c = yaml.safe_load(f)
    jobs = [s for s in c["scrape_configs"] if s["job_name"] == "mobiusd"]
    if len(jobs) != 1 or jobs[0].get("honor_labels") is not True:
        fail("prometheus.yml needs one `mobiusd` scrape job with honor_labels: true")
    targets = [t for sc in jobs[0]["static_configs"] for t in sc["targets"]]
    if "127.0.0.1:9464" not in targets:
        fail("the mobiusd scrape job does not target the default port 9464: %s" % targets)
    ok("prometheus.yml and its rule files pass promtool check config")


def check_grafana(src):
    base = os.path.join(src, "deploy/grafana/provisioning")
    with open(os.path.join(base, "datasources/mobius-prometheus.yaml")) as f:
        ds = yaml.safe_load(f)
    if ds.get("apiVersion") != 1 or not ds.get("datasources"):
        fail("datasource provisioning: apiVersion 1 and a datasources list expected")
    for d in ds["datasources"]:
        for k in ("name", "type", "url", "access"):
            if not d.get(k):
                fail("datasource provisioning: %s lacks %s" % (d, k))
        if d["type"] != "prometheus":
            fail("datasource type %s" % d["type"])
    with open(os.path.join(base, "dashboards/mobius.yaml")) as f:
        dp = yaml.safe_load(f)
    if dp.get("apiVersion") != 1 or not dp.get("providers"):
        fail("dashboard provisioning: apiVersion 1 and a providers list expected")
    for p in dp["providers"]:
        if p.get("type") != "file" or not p.get("options", {}).get("path"):
            fail("dashboard provider %s: type file with options.path expected" % p)
    ok("Grafana provisioning: %d data source(s), %d dashboard provider(s)" %
       (len(ds["datasources"]), len(dp["providers"])))


# --- Slurm ------------------------------------------------------------------------------------------

def check_slurm(src):
    scripts = sorted(glob.glob(os.path.join(src, "deploy/slurm/*")))
    for s in scripts:
        r = run("bash", "-n", s)
        if r.returncode != 0:
            fail("%s: %s" % (s, r.stderr))
    sbatch = os.path.join(src, "deploy/slurm/mobius-finetune.sbatch")
    with open(sbatch) as f:
        text = f.read()
    for want in ("#SBATCH --gres=gpu", "mobius\" submit --wait", "--gpus=", "--submission-id"):
        if want not in text:
            fail("the sbatch script lacks %r" % want)
    with open(os.path.join(src, "deploy/slurm/mobius-multinode.sbatch")) as f:
        text = f.read()
    for want in ("#SBATCH --ntasks-per-node=1\n", "#SBATCH --gres=gpu", "srun ", "mobius\" run"):
        if want not in text:
            fail("mobius-multinode.sbatch lacks %r" % want.strip())
    # The epilog against a scratch directory: dead creators' stores go, live ones and other files
    # stay.
    tmp = tempfile.mkdtemp(prefix="mobius-epilog-")
    dead = subprocess.Popen(["true"])
    dead.wait()
    files = {"mobius-store-j-000001-%d" % dead.pid: False,
             "mobius-store-j-000002-%d" % os.getpid(): True,
             "mobius-store-odd-name": True,
             "other-file-%d" % dead.pid: True}
    for name in files:
        open(os.path.join(tmp, name), "w").close()
    r = run("bash", os.path.join(src, "deploy/slurm/epilog.sh"),
            env=dict(os.environ, MOBIUS_SHM_DIR=tmp))
    if r.returncode != 0:
        fail("epilog.sh exit %d: %s" % (r.returncode, r.stderr))
    for name, keep in files.items():
        if os.path.exists(os.path.join(tmp, name)) != keep:
            fail("epilog.sh %s %s" % ("removed" if keep else "kept", name))
    shutil.rmtree(tmp)
    ok("%d Slurm scripts parse; the epilog removes only orphaned host stores" % len(scripts))


# --- docs -----------------------------------------------------------------------------------------

def check_docs(src):
    """docs/operations.md's configuration table names every daemon flag, and only those."""
    with open(os.path.join(src, "server/daemon/flags.cc")) as f:
        flags = set(re.findall(r"ABSL_FLAG\(\s*[\w:]+\s*,\s*(\w+)\s*,", f.read()))
    with open(os.path.join(src, "docs/operations.md")) as f:
        text = f.read()
    m = re.search(r"^## Configuration\n(.*?)(?=^## )", text, re.S | re.M)
    if not m or len(flags) < 10:
        fail("no Configuration section in docs/operations.md, or no flags in flags.cc")
    documented = set(re.findall(r"^\| `--(\w+)` \|", m.group(1), re.M))
    if documented != flags:
        fail("docs/operations.md flags differ from server/daemon/flags.cc: undocumented %s, "
             "no such flag %s" % (sorted(flags - documented), sorted(documented - flags)))
    ok("docs/operations.md documents all %d daemon flags" % len(flags))


# --- systemd --------------------------------------------------------------------------------------

def check_systemd(src, bin_dir):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        print("SKIPPED: systemd-analyze is not installed (Debian package systemd)")
        sys.exit(SKIP)
    probe = run(analyze, "--version")
    if probe.returncode != 0:
        print("SKIPPED: systemd-analyze cannot run here: " + probe.stderr.strip())
        sys.exit(SKIP)
    unit = os.path.join(src, "deploy/systemd/mobiusd.service")
    with open(unit) as f:
        text = f.read()
    mobiusd = os.path.abspath(os.path.join(bin_dir, "mobiusd"))
    if not os.access(mobiusd, os.X_OK):
        fail("%s is not built (ninja mobiusd)" % mobiusd)
    exec_start = re.search(r"^ExecStart=(\S+)", text, re.M)
    if exec_start is None or exec_start.group(1) != "/usr/local/bin/mobiusd":
        fail("ExecStart does not run /usr/local/bin/mobiusd")
    # Multi-user mode (docs/operations.md, "Security model"): root with exactly the capabilities
    # the identity switch needs (tenancy_test.py runs the daemon with this set), cgroups delegated.
    for want in ("CapabilityBoundingSet=CAP_SETUID CAP_SETGID CAP_CHOWN CAP_KILL\n",
                 "Delegate=yes", "UMask=0077", "StateDirectoryMode=0711", "--socket_group=mobius",
                 "RuntimeDirectory=mobius", "StateDirectory=mobius",
                 "--socket=/run/mobius/mobiusd.sock", "--state_dir=/var/lib/mobius"):
        if want not in text:
            fail("the unit lacks %s" % want.strip())
    if re.search(r"^(User|Group)=", text, re.M):
        fail("the unit sets User=/Group=: an unprivileged daemon is single-user only")
    tmp = tempfile.mkdtemp(prefix="mobius-unit-")
    local = os.path.join(tmp, "mobiusd.service")
    with open(local, "w") as f:
        f.write(text.replace("/usr/local/bin/mobiusd", mobiusd))
    r = run(analyze, "verify", local)
    if r.returncode != 0 or r.stderr.strip():
        if "Failed to" in r.stderr and "bus" in r.stderr:
            print("SKIPPED: systemd-analyze verify cannot run here: " + r.stderr.strip())
            sys.exit(SKIP)
        fail("systemd-analyze verify (exit %d):\n%s%s" % (r.returncode, r.stdout, r.stderr))
    ok("systemd-analyze verify mobiusd.service: no warnings")
    r = run(analyze, "security", "--offline=true", "--threshold=35", local)
    score = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", r.stdout)
    if r.returncode != 0 or score is None:
        fail("systemd-analyze security: exposure above 3.5 or unreadable:\n" + r.stdout[-2000:] +
             r.stderr)
    ok("systemd-analyze security: exposure %s %s" % (score.group(1), score.group(2)))
    sysusers = shutil.which("systemd-sysusers")
    if sysusers:
        root = os.path.join(tmp, "root")
        os.makedirs(root)
        r = run(sysusers, "--root=" + root, "--dry-run",
                os.path.join(src, "deploy/systemd/mobius.sysusers"))
        if r.returncode != 0 or "Creating user 'mobius'" not in r.stdout + r.stderr:
            fail("systemd-sysusers --dry-run:\n" + r.stdout + r.stderr)
        ok("mobius.sysusers creates the mobius user and group (dry run)")
    shutil.rmtree(tmp)


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("files", "systemd"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    src = os.path.abspath(sys.argv[2])
    if sys.argv[1] == "systemd":
        check_systemd(src, sys.argv[3])
        return
    check_kubernetes(src)
    check_prometheus(src)
    check_grafana(src)
    check_slurm(src)
    check_docs(src)


if __name__ == "__main__":
    main()
