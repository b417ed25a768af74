"""Host memory at a real (if small) size, measured: the PSS of every process of a job, shared memory
counted once (bench/memory/pss.py), against the planner's estimate and the bytes-per-parameter
bound; and refusals of a model that does not fit this machine, before any worker starts.

  1. `mobius run` of a ~58M-parameter Llama on (up to) 4 emulated GPUs of the paper testbed (checkpoint at
     the end): peak PSS <= 20 bytes/parameter + the stated allowance (per emulated GPU its memory
     cap and one worker process), and the estimate `mobius run` prints within 15% of the peak.
  1b. The same as a LoRA job (rank 16 on every linear, the base frozen in bf16): peak PSS <= 3
     bytes/parameter + the same allowance, the estimate not below the peak and within 40% of it
     (at this size the emulated GPUs' fixed terms, which the estimate bounds from above, are most
     of it; on a 1.07B model the estimate is 3% above, on the 0.91B MoE with adapters on every
     expert 3% below: docs/benchmarks.md; since the LoRA store fill trims its heap, 2026-12-06,
     the peak here is ~20-50 MB lower and the estimate +37.5%), the checkpoint a PEFT adapter.
  2. The standalone trainer on the same model: <= 20 bytes/parameter + one process, one tensor of
     scratch and activations.
  3. A 70B config (the paper testbed claims 1.5 TB): `mobius run` exits 2 naming the estimate and
     this machine's memory; no worker ran. The daemon refuses the same spec at submit.

Usage: host_memory_test.py BIN_DIR SOURCE_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

from harness import Harness

BIN, SRC = sys.argv[1], sys.argv[2]
H = Harness("mobius-hostmem-")
TMP = H.tmp
FIX = os.path.join(SRC, "test/data/topology/paper_testbed_2s_2sw_8x3090.xml")
PSS = os.path.join(SRC, "bench/memory/pss.py")
TOKENS = os.path.join(SRC, "bench/memory/tokens.py")
GIB = 1 << 30
MIB = 1 << 20
CAP = 512 * MIB          # resources.device_memory_bytes per emulated GPU
PROCESS = 128 * MIB      # one worker process's own footprint (host/planner/estimator.h)
VOCAB = 32000


def run(*args, check=True, timeout=600):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        H.fail("%s: exit %d\n%s\n%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def peak(path):
    with open(path) as f:
        return json.load(f)["peak"]


def main():
    model = os.path.join(TMP, "llama-58m")
    run(BIN + "/mobius-worker", "init-model", "--family", "llama", "--layers", "8", "--hidden",
        "512", "--heads", "8", "--kv_heads", "4", "--intermediate", "1536", "--vocab", str(VOCAB),
        "--out", model)
    with open(os.path.join(model, "config.json")) as f:
        config = json.load(f)
    c, i, v, layers = config["hidden_size"], config["intermediate_size"], VOCAB, 8
    kv = config["num_key_value_heads"] * (c // config["num_attention_heads"])
    params = 2 * v * c + c + layers * (2 * c * c + 2 * c * kv + 3 * c * i + 2 * c)
    data = os.path.join(TMP, "data.tok")
    run(sys.executable, TOKENS, data, "--vocab", str(VOCAB), "--tokens", "20000")

    # 1. The pipeline on 4 emulated GPUs.
    spec = os.path.join(TMP, "job.yaml")
    with open(spec, "w") as f:
        f.write("name: hostmem\nmodel_dir: %s\ndataset: {path: %s}\n"
                "training: {steps: 2, global_batch: 2, microbatch: 1, seq_len: 64}\n"
                "resources: {gpus: 4, device_memory_bytes: %d}\n"
                "checkpoint: {dir: %s}\n" % (model, data, CAP, os.path.join(TMP, "ckpt")))
    out = os.path.join(TMP, "pipeline.json")
    r = run(sys.executable, PSS, "--out", out, "--interval", "0.05", "--", BIN + "/mobius", "run",
            spec, "--topology-file", FIX, "--run-dir", os.path.join(TMP, "run"))
    m = re.search(r"host memory estimate ([0-9.]+) GiB", r.stderr)
    if not m:
        H.fail("no estimate line:\n" + r.stderr)
    estimate = float(m.group(1)) * GIB
    p = peak(out)
    workers = [q for q in p["processes"] if q["comm"] == "mobius-worker"]
    measured = p["pss_bytes"]
    with open(os.path.join(TMP, "run", "run.json")) as f:
        num_workers = json.load(f)["num_workers"]
    if len(workers) != num_workers:
        H.fail("the peak sample holds %d of the %d workers: %s" % (len(workers), num_workers, p))
    allowance = num_workers * (CAP + PROCESS)
    bound = 20 * params + allowance
    print("pipeline: %d parameters, peak PSS %.1f MiB = %.1f B/param (bound 20 B/param + %d MiB); "
          "estimate %.1f MiB (%+.1f%%)" % (params, measured / MIB, measured / params, allowance // MIB,
                                          estimate / MIB, 100 * (estimate - measured) / measured))
    if measured > bound:
        H.fail("peak PSS %d > bound %d" % (measured, bound))
    if abs(estimate - measured) > 0.15 * measured:
        H.fail("estimate %d is not within 15%% of the measured %d" % (estimate, measured))
    export = os.path.join(TMP, "ckpt", "export-00000002")
    if not os.path.isfile(os.path.join(export, "model.safetensors")):
        H.fail("no model-only export at " + export)
    H.ok("pipeline: %.1f B/param, estimate within 15%%" % (measured / params))

    # 1b. The same job with LoRA adapters: the store holds the base once, in bf16.
    lora_spec = os.path.join(TMP, "lora.yaml")
    with open(lora_spec, "w") as f:
        f.write("name: hostmem-lora\nmodel_dir: %s\ndataset: {path: %s}\n"
                "training: {steps: 2, global_batch: 2, microbatch: 1, seq_len: 64}\n"
                "resources: {gpus: 4, device_memory_bytes: %d}\n"
                "checkpoint: {dir: %s}\n"
                "adapter: {type: lora, rank: 16, alpha: 32, target_modules: [q_proj, k_proj, "
                "v_proj, o_proj, gate_proj, up_proj, down_proj]}\n"
                % (model, data, CAP, os.path.join(TMP, "ckpt-lora")))
    out = os.path.join(TMP, "lora.json")
    r = run(sys.executable, PSS, "--out", out, "--interval", "0.05", "--", BIN + "/mobius", "run",
            lora_spec, "--topology-file", FIX, "--run-dir", os.path.join(TMP, "run-lora"))
    m = re.search(r"host memory estimate ([0-9.]+) GiB", r.stderr)
    if not m:
        H.fail("LoRA: no estimate line:\n" + r.stderr)
    estimate = float(m.group(1)) * GIB
    measured = peak(out)["pss_bytes"]
    bound = 3 * params + allowance
    print("LoRA pipeline: peak PSS %.1f MiB = %.1f B/param (bound 3 B/param + %d MiB); estimate "
          "%.1f MiB (%+.1f%%)" % (measured / MIB, measured / params, allowance // MIB,
                                  estimate / MIB, 100 * (estimate - measured) / measured))
    if measured > bound:
        H.fail("LoRA: peak PSS %d > bound %d" % (measured, bound))
    if not measured <= estimate <= 1.40 * measured:
        H.fail("LoRA: estimate %d is below or more than 40%% above the measured %d"
               % (estimate, measured))
    ckpt = os.path.join(TMP, "ckpt-lora", "checkpoint-00000002")
    if not os.path.isfile(os.path.join(ckpt, "adapter_model.safetensors")) or \
            os.path.exists(os.path.join(ckpt, "model.safetensors")):
        H.fail("LoRA: %s is not an adapter checkpoint: %s" % (ckpt, os.listdir(ckpt)))
    H.ok("LoRA pipeline: %.1f B/param, estimate above it, within 35%%" % (measured / params))

    # 2. The standalone trainer.
    out = os.path.join(TMP, "standalone.json")
    run(sys.executable, PSS, "--out", out, "--interval", "0.05", "--", BIN + "/mobius-worker",
        "train", "--standalone", "--model", model, "--data", data, "--steps", "2", "--batch", "1",
        "--seq", "64", "--threads", "2")
    measured = peak(out)["pss_bytes"]
    # Beyond 18 B/param (fp32 master and moments on the host, bf16 weights and fp32 gradients on
    # the device): one process, one tensor of host scratch for the streamed update (fp32 gradient
    # + bf16 weights: 6 B x the largest tensor), the CPU GEMM's fp32 copy of the largest weight
    # (4 B x V x C), and one 1 x 64 microbatch's kept activations (well under 64 MiB here).
    bound = 20 * params + PROCESS + 10 * v * c + 64 * MIB
    print("standalone: peak PSS %.1f MiB = %.1f B/param (bound %.1f MiB)"
          % (measured / MIB, measured / params, bound / MIB))
    if measured > bound:
        H.fail("standalone trainer: peak PSS %d > %d" % (measured, bound))
    H.ok("standalone trainer: %.1f B/param" % (measured / params))

    # 3. A model this machine cannot hold: refused with the numbers, no worker started.
    big = os.path.join(TMP, "llama-70b")
    os.makedirs(big)
    with open(os.path.join(big, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                   "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
                   "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 32000,
                   "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
                   "tie_word_embeddings": False, "hidden_act": "silu"}, f)
    open(os.path.join(big, "model.safetensors"), "w").close()
    big_spec = os.path.join(TMP, "big.yaml")
    with open(big_spec, "w") as f:
        f.write("name: big\nmodel_dir: %s\ndataset: {path: %s}\n"
                "training: {steps: 1, global_batch: 1, seq_len: 64}\nresources: {gpus: 4}\n"
                % (big, data))
    r = run(BIN + "/mobius", "run", big_spec, "--topology-file", FIX, "--run-dir",
            os.path.join(TMP, "run-big"), check=False)
    if r.returncode != 2 or "host RAM" not in r.stderr or "this machine" not in r.stderr:
        H.fail("70B on this machine: exit %d\n%s" % (r.returncode, r.stderr))
    if os.path.exists(os.path.join(TMP, "run-big", "run.json")):
        H.fail("a run was started for the 70B model")
    H.ok("mobius run refuses 70B before any worker: " + r.stderr.strip().splitlines()[-1][:200])

    sock = os.path.join(TMP, "mobiusd.sock")
    H.daemon = subprocess.Popen(
        [BIN + "/mobiusd", "--socket", sock, "--state-dir", os.path.join(TMP, "state"),
         "--topology-file", FIX, "--metrics-address", "127.0.0.1:0"],
        stdout=open(H.log, "w"), stderr=subprocess.STDOUT)
    H.wait_healthy(lambda: run(BIN + "/mobius", "--socket", sock, "--timeout-seconds", "1",
                               "health", check=False).returncode == 0)
    r = run(BIN + "/mobius", "--socket", sock, "submit", big_spec, check=False)
    if r.returncode != 2 or "host RAM" not in r.stderr:
        H.fail("daemon accepted or mis-refused the 70B job: exit %d\n%s%s"
               % (r.returncode, r.stdout, r.stderr))
    H.kill_daemon()
    H.ok("the daemon refuses 70B at submit: " + r.stderr.strip()[:200])


if __name__ == "__main__":
    try:
        main()
    finally:
        H.kill_daemon()
    shutil.rmtree(TMP, ignore_errors=True)  # checkpoints of ~0.8 GB; kept on failure (H.fail exits)
