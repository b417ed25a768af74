#!/usr/bin/env python3
"""Several nodes on one machine (issue 20): `mobius run` once per node, each launched the way a
Slurm job step starts it (SLURM_JOB_ID, SLURM_NTASKS, SLURM_PROCID, ...; the rendezvous from
MOBIUS_RENDEZVOUS on loopback), each node with its own run directory, store and 2 emulated GPUs,
CPU backend.

  1. one node with the whole global batch (12 sequences = 6 microbatches of 2) is the reference;
     `mobius plan SPEC --nodes 1,2,3` predicts the three;
  2. two nodes and 3. three nodes with the same global batch: step 1's loss and gradient norm are
     the reference's to all 9 printed digits, and every later step's within TOL (relative: 1e-4 for
     the loss, 2e-3 for the gradient norm): the gradients are the same sums, but a node adds its
     own microbatches and the all-reduce then adds the nodes' sums, where one node adds all
     microbatches in one sequence, so float rounding differs in the last bits of the fp32 master
     weights, which flips a few bf16 roundings of the weights the next steps compute with
     (docs/multinode.md); the gradient norm, a sum of squares over every parameter, shows it most.
     Node 0 writes the checkpoints, the others none;
  4. a 3-node run whose node 1 is killed (SIGKILL to its whole process group) after node 0's
     step-3 checkpoint: nodes 0 and 2 exit non-zero within 60 s saying a node was lost;
  5. one node resumes from that checkpoint with the same global batch: steps 4..6 continue the
     curve (equal to the reference's within TOL);
  6. a node whose spec differs (another lr) is refused with a clear error on both nodes;
  7. the roundrobin schedule, the asynchronous optimizer (optimizer_staleness 1) and a LoRA job
     with dropout (the masks keyed by the row in the global batch) on 2 nodes against their own
     one-node runs, within the same tolerances;
  8. a node alone (its peer never starts) fails within --node-timeout naming the missing node.

Usage: multinode_test.py BIN_DIR SOURCE_DIR
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
import fixture  # noqa: E402

BIN, SRC = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
TMP = tempfile.mkdtemp(prefix="mobius-multinode-")
FIX = os.path.join(SRC, fixture.TOPOLOGY)
TOL = {"loss": 1e-4, "grad_norm": 2e-3}
STEPS = 6


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def ok(msg):
    print("ok: " + msg, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spec(name, lr="1e-3", plan="{stages: 4}", extra="", training=""):
    path = os.path.join(TMP, name + ".yaml")
    with open(path, "w") as f:
        f.write("""name: %s
model_dir: model
dataset: {path: data.tok}
training: {steps: %d, global_batch: 12, microbatch: 2, seq_len: 32, lr: %s, grad_clip: 1.0%s}
resources: {gpus: 2}
plan: %s
checkpoint: {every_steps: 3, dir: %s}
%s""" % (name, STEPS, lr, training, plan, os.path.join(TMP, "ckpt-" + name), extra))
    return path


def mobius_run(spec_path, run_dir, extra=(), env=None):
    report = run_dir + ".jsonl"
    cmd = [BIN + "/mobius", "run", spec_path, "--topology-file", FIX, "--gpus", "0,1",
           "--run-dir", run_dir, "--report-file", report] + list(extra)
    return subprocess.Popen(cmd, cwd=TMP, env=env or os.environ, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True), report


def slurm_env(nodes, rank, port, job="4711"):
    env = dict(os.environ, SLURM_JOB_ID=job, SLURM_NTASKS=str(nodes), SLURM_NNODES=str(nodes),
               SLURM_PROCID=str(rank), SLURM_NODEID=str(rank), SLURM_LOCALID="0",
               SLURM_JOB_NODELIST="localhost", MOBIUS_RENDEZVOUS="127.0.0.1:%d" % port,
               MOBIUS_RENDEZVOUS_TOKEN="secret-%s" % job)  # as the sbatch does
    for k in ("MOBIUS_NODES", "MOBIUS_NODE_RANK"):
        env.pop(k, None)
    return env


def reports(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def finish(procs, what, timeout=600):
    outs = []
    for i, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                os.killpg(q.pid, signal.SIGKILL)
            fail("%s: node %d did not finish in %d s" % (what, i, timeout))
        if p.returncode != 0:
            fail("%s: node %d exited %d\n%s\n%s" % (what, i, p.returncode, out[-3000:],
                                                    err[-3000:]))
        outs.append((out, err))
    return outs


def close(a, b, tol):
    return abs(a - b) <= tol * max(abs(a), abs(b), 1e-6)


def compare(ref, got, what, steps=None):
    by_step = {r["step"]: r for r in ref}
    checked = 0
    for r in got:
        if steps is not None and r["step"] not in steps:
            continue
        e = by_step[r["step"]]
        for key in ("loss", "grad_norm"):
            tol = TOL[key] if r["step"] > 1 else 1e-8
            if not close(e[key], r[key], tol):
                fail("%s, step %d: %s %.9g, one node %.9g (tolerance %g relative)" %
                     (what, r["step"], key, r[key], e[key], tol))
        checked += 1
    rows = [r for r in got if steps is None or r["step"] in steps]
    worst = {k: max(abs(r[k] - by_step[r["step"]][k]) / abs(by_step[r["step"]][k]) for r in rows)
             for k in ("loss", "grad_norm")}
    return checked, "loss %.1e, grad norm %.1e" % (worst["loss"], worst["grad_norm"])


def main():
    fixture.make_model_and_data(BIN, SRC, TMP)

    # 1. the reference: one node, the whole global batch.
    p, one_report = mobius_run(spec("one"), os.path.join(TMP, "one"))
    finish([p], "one node")
    ref = reports(one_report)
    if len(ref) != STEPS:
        fail("one node: %d reports" % len(ref))
    ok("one node: loss %.4f -> %.4f" % (ref[0]["loss"], ref[-1]["loss"]))
    # The prediction for the spec on 1-3 nodes, before running them.
    plan = subprocess.run([BIN + "/mobius", "plan", spec("one"), "--topology-file", FIX,
                           "--nodes", "1,2,3"], cwd=TMP, capture_output=True, text=True)
    if plan.returncode != 0 or "batch/node" not in plan.stdout or "\n      3  " not in plan.stdout:
        fail("mobius plan SPEC --nodes 1,2,3: exit %d\n%s%s" % (plan.returncode, plan.stdout,
                                                                plan.stderr))
    ok("mobius plan SPEC --nodes 1,2,3: a row per node count")

    # 2, 3. two and three nodes with the Slurm variables.
    for nodes in (2, 3):
        port = free_port()
        name = "n%d" % nodes
        path = spec(name)
        started = [mobius_run(path, os.path.join(TMP, "%s-node%d" % (name, r)),
                              env=slurm_env(nodes, r, port, job=str(5000 + nodes)))
                   for r in range(nodes)]
        outs = finish([s[0] for s in started], "%d nodes" % nodes)
        got = reports(started[0][1])
        if [r["step"] for r in got] != list(range(1, STEPS + 1)):
            fail("%d nodes: node 0 reported steps %s" % (nodes, [r["step"] for r in got]))
        checked, worst = compare(ref, got, "%d nodes" % nodes)
        for r in range(1, nodes):  # every node knows the global loss
            compare(got, reports(started[r][1]), "%d nodes, node %d against node 0" % (nodes, r))
        if not any(r.get("internode_bytes", 0) > 0 for r in got):
            fail("%d nodes: no bytes reported to other nodes" % nodes)
        ckpts = sorted(os.listdir(os.path.join(TMP, "ckpt-" + name)))
        if "checkpoint-00000003" not in ckpts or "checkpoint-00000006" not in ckpts:
            fail("%d nodes: checkpoints %s" % (nodes, ckpts))
        if "node 1 of %d" % nodes not in outs[1][1]:
            fail("%d nodes: node 1 did not say which node it is:\n%s" % (nodes, outs[1][1][-2000:]))
        ok("%d nodes (Slurm variables): %d steps' loss and grad norm within %s of one node "
           "(worst relative: %s); checkpoints %s by node 0"
           % (nodes, checked, TOL, worst, ",".join(c for c in ckpts if c.startswith("checkpoint"))))

    # 4. node 1 dies after node 0's step-3 checkpoint; node 0 must fail within 60 s.
    port = free_port()
    path = spec("kill")
    # Three nodes; slow links (x0.002) so the run is still going when the checkpoint appears.
    started = [mobius_run(path, os.path.join(TMP, "kill-node%d" % r), ["--link-scale", "0.002"],
                          env=slurm_env(3, r, port, job="6001")) for r in range(3)]
    procs = [s[0] for s in started]
    deadline = time.time() + 300
    while time.time() < deadline:
        if os.path.exists(os.path.join(TMP, "ckpt-kill", "checkpoint-00000003", "DONE")):
            break
        if any(p.poll() is not None for p in procs):
            fail("kill run: a node ended before the step-3 checkpoint")
        time.sleep(0.05)
    else:
        fail("kill run: no step-3 checkpoint in 300 s")
    if any(p.poll() is not None for p in procs):
        fail("kill run: a node finished before node 1 could be killed (make the run slower)")
    os.killpg(procs[1].pid, signal.SIGKILL)
    t0 = time.time()
    for r in (0, 2):
        try:
            _, err = procs[r].communicate(timeout=max(1, 60 - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            for p in procs:
                os.killpg(p.pid, signal.SIGKILL)
            fail("kill run: node %d still running 60 s after node 1 was killed" % r)
        if procs[r].returncode == 0:
            fail("kill run: node %d exited 0 after a peer died" % r)
        # The gloo error or the launcher's heartbeat watchdog, whichever notices first.
        if not any(w in err for w in ("node 1 failed", "peer node died", "node 0 (the rendezvous",
                                      "node 1 stopped responding")):
            fail("kill run: node %d's error does not say a node was lost:\n%s" % (r, err[-3000:]))
        if "node 1 stopped responding" not in err:
            fail("kill run: node %d does not name node 1 as the silent node:\n%s" % (r, err[-3000:]))
        errors = [l for l in err.splitlines()
                  if "stopped responding" in l or "error: rank" in l][-2:]
        ok("kill run (3 nodes): node 1 SIGKILLed after step 3; node %d exited %d %.1f s later:\n  %s"
           % (r, procs[r].returncode, time.time() - t0, "\n  ".join(l[:260] for l in errors)))
    procs[1].communicate()

    # 5. one node resumes from node 0's checkpoint and continues the curve.
    p, resume_report = mobius_run(path, os.path.join(TMP, "kill-resume"), ["--resume"])
    out, err = finish([p], "resume on one node")[0]
    got = reports(resume_report)
    if not got or got[0]["step"] != 4 or got[-1]["step"] != STEPS:
        fail("resume: steps %s (expected 4..%d)\n%s" % ([r["step"] for r in got], STEPS, err))
    checked, worst = compare(ref, got, "one-node resume of the 3-node checkpoint", range(4, 7))
    ok("one node resumed from the 3-node run's step-3 checkpoint: steps 4-%d within %s of the "
       "uninterrupted one-node run (worst relative: %s)" % (STEPS, TOL, worst))

    # 6. a different spec on node 1.
    port = free_port()
    a, b = spec("same"), spec("differ", lr="2e-3")
    with open(b) as f:  # the same name and checkpoint dir as "same", another lr
        text = f.read().replace("name: differ", "name: same").replace("ckpt-differ", "ckpt-same")
    with open(b, "w") as f:
        f.write(text)
    started = [mobius_run(s, os.path.join(TMP, "differ-node%d" % r),
                          ["--node-timeout", "60"], env=slurm_env(2, r, port, job="6002"))
               for r, s in enumerate((a, b))]
    errs = []
    for p, _ in started:
        try:
            _, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for q, _ in started:
                os.killpg(q.pid, signal.SIGKILL)
            fail("different specs: a node hangs")
        if p.returncode == 0:
            fail("different specs: a node exited 0")
        errs.append(err)
    if not any("run different jobs" in e for e in errs):
        fail("different specs: no clear error:\n" + errs[0][-2000:] + "\n" + errs[1][-2000:])
    ok("different specs on two nodes: refused (\"run different jobs\")")

    # 7. roundrobin, and LoRA with dropout, on 2 nodes against one node each.
    for label, kw in (("roundrobin", {"plan": "{schedule: roundrobin}"}),
                      ("async", {"training": ", optimizer_staleness: 1"}),
                      ("lora", {"extra": "adapter: {type: lora, rank: 4, alpha: 8, dropout: 0.1, "
                                         "target_modules: [q_proj, v_proj, down_proj]}\n"})):
        p, one = mobius_run(spec(label + "-one", **kw), os.path.join(TMP, label + "-one"))
        finish([p], label + " on one node")
        port = free_port()
        path = spec(label + "-two", **kw)
        started = [mobius_run(path, os.path.join(TMP, "%s-two-node%d" % (label, r)),
                              env=slurm_env(2, r, port, job="70%d" % len(label)))
                   for r in range(2)]
        finish([s[0] for s in started], label + " on 2 nodes")
        checked, worst = compare(reports(one), reports(started[0][1]), label + " on 2 nodes")
        ok("%s on 2 nodes: %d steps within %s of one node (worst relative: %s)"
           % (label, checked, TOL, worst))

    # 8. node 0 alone: its peer never comes.
    port = free_port()
    t0 = time.time()
    p, _ = mobius_run(spec("alone"), os.path.join(TMP, "alone-node0"), ["--node-timeout", "3"],
                      env=slurm_env(2, 0, port, job="7100"))
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        fail("node 0 alone: still running after 120 s")
    if p.returncode == 0 or "node 1 did not join the rendezvous" not in err:
        fail("node 0 alone: exit %d, no clear error:\n%s" % (p.returncode, err[-2000:]))
    line = [l for l in err.splitlines() if "did not join" in l][0]
    ok("node 0 alone: exit %d after %.1f s: ...%s" % (p.returncode, time.time() - t0,
                                                     line[line.find("node 1 did not"):][:160]))
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
