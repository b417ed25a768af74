"""Inputs shared by the deploy integration tests: a tiny Llama model made by
`mobius-worker init-model` and a token file made from a licence text every Debian system has
(the same setup as test/integration/job_service_test.py)."""
import json
import os
import subprocess

TOPOLOGY = "test/data/topology/paper_testbed_2s_2sw_8x3090.xml"  # 8 GPUs behind 2 switches


def make_model_and_data(bin_dir, src, tmp):
    """Writes tmp/model (Hugging Face layout) and tmp/data.tok; raises on failure."""
    subprocess.run([os.path.join(bin_dir, "mobius-worker"), "init-model", "--family", "llama",
                    "--preset", "tiny", "--vocab", "700", "--layers", "4", "--out",
                    os.path.join(tmp, "model")], check=True, capture_output=True)
    with open("/usr/share/common-licenses/GPL-3") as f:
        text = f.read()
    with open(os.path.join(tmp, "gpl.jsonl"), "w") as f:
        f.write(json.dumps({"text": text}) + "\n")
    subprocess.run([os.path.join(bin_dir, "mobius"), "tokenize", os.path.join(tmp, "gpl.jsonl"),
                    os.path.join(tmp, "data.tok"), "--tokenizer",
                    os.path.join(src, "test/data/tokenizers/gpt2")],
                   check=True, capture_output=True)


def write_spec(tmp, name, steps, gpus, batch=4, seq=32, every_steps=0):
    """A job spec for the tiny model (relative paths: the CLI resolves them)."""
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write("""name: %s
model_dir: model
dataset: {path: data.tok}
training: {steps: %d, global_batch: %d, microbatch: 2, seq_len: %d, lr: 1e-3}
resources: {gpus: %d}
plan: {stages: 4}
checkpoint: {every_steps: %d}
""" % (name, steps, batch, seq, gpus, every_steps))
    return path
