#!/usr/bin/env python3
"""Integration test of text datasets end to end: a real mobiusd, real workers, the real CLI.

  - a job naming two JSONL files (dataset.paths, a custom text field) and the model's own
    SentencePiece tokenizer, for one epoch with a 10% eval split: the daemon tokenizes them in
    `mobius-worker tokenize` (SentencePiece cannot live in the daemon's process), learns the step
    count from the token file, trains with an eval loss every 50 steps and at the end, succeeds;
    the log says what was tokenized;
  - a second job on the same files reuses the cached token file;
  - a dataset with a malformed line fails the job, without retries, naming file and line; with
    skip_bad_lines it runs;
  - `mobius run` tokenizes a prompt/completion dataset into $XDG_CACHE_HOME and trains on it;
  - a chat dataset with the model's own template (Qwen3's, the chat fixture's tokenizer.json):
    rendered by Python's jinja2 in the tokenizer child, trained, the conversation without an
    assistant turn counted in the log; a chat dataset for a model without a template fails the
    job naming dataset.chat_template;
  - `mobius tokenize` with a SentencePiece tokenizer (runs in mobius-worker);
  - neither mobius nor mobiusd links libsentencepiece.

Usage: text_dataset_test.py BIN_DIR SOURCE_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness  # noqa: E402

BIN, SRC = sys.argv[1], sys.argv[2]
FIXTURE = os.path.join(SRC, "test/data/topology/paper_testbed_2s_2sw_8x3090.xml")
H = Harness("mobius-text-it-")
TMP = H.tmp
SOCK = os.path.join(TMP, "d.sock")
STATE = os.path.join(TMP, "state")
ENV = dict(os.environ, MOBIUS_SOCKET=SOCK, XDG_CACHE_HOME=os.path.join(TMP, "cache"))
fail, ok = H.fail, H.ok


def run(cmd, check=True, timeout=300):
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        fail("%s -> exit %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def cli(*args, check=True):
    return run([os.path.join(BIN, "mobius"), *args], check=check)


def job(id_):
    return H.job(cli, id_)


def wait_terminal(id_, seconds=240):
    return H.wait_state(cli, id_, seconds=seconds)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def spec(name, dataset, training="epochs: 1"):
    return write(os.path.join(TMP, name + ".yaml"), """name: %s
model_dir: model
dataset:
%s
training:
  %s
  global_batch: 4
  microbatch: 2
  seq_len: 32
  lr: 1e-3
resources:
  gpus: 2
plan:
  stages: 4
""" % (name, dataset, training))


def main():
    for binary in ["mobius", "mobiusd"]:
        linked = run(["ldd", os.path.join(BIN, binary)]).stdout
        if "sentencepiece" in linked:
            fail("%s links libsentencepiece:\n%s" % (binary, linked))
    ok("mobius and mobiusd do not link libsentencepiece")

    # A tiny Llama whose own tokenizer is the SentencePiece fixture (vocab 600 <= 700).
    model = os.path.join(TMP, "model")
    run([os.path.join(BIN, "mobius-worker"), "init-model", "--family", "llama", "--preset",
         "tiny", "--vocab", "700", "--layers", "4", "--out", model])
    shutil.copy(os.path.join(SRC, "test/data/tokenizers/sentencepiece/tokenizer.model"), model)
    paragraphs = [p.strip() for p in open("/usr/share/common-licenses/GPL-3").read().split("\n\n")
                  if p.strip()]
    half = len(paragraphs) // 2
    write(os.path.join(TMP, "a.jsonl"),
          "".join(json.dumps({"body": p}) + "\n" for p in paragraphs[:half]))
    write(os.path.join(TMP, "b.jsonl"),
          "".join(json.dumps({"body": p}) + "\n" for p in paragraphs[half:]))

    log = open(H.log, "a")
    H.daemon = subprocess.Popen(
        [os.path.join(BIN, "mobiusd"), "--socket", SOCK, "--state-dir", STATE,
         "--topology-file", FIXTURE, "--link-scale", "0.02", "--metrics-address", "127.0.0.1:0"],
        stdout=log, stderr=log)
    H.wait_healthy(lambda: cli("--timeout-seconds", "1", "health", check=False).returncode == 0)

    # --- two JSONL files, custom field, SentencePiece, one epoch.
    dataset = "  paths: [a.jsonl, b.jsonl]\n  format: jsonl\n  text_field: body"
    first = json.loads(cli("submit", spec("sp-epoch", dataset + "\n  eval_fraction: 0.1",
                                          "epochs: 1\n  eval_every: 50"), "--json").stdout)["id"]
    j = wait_terminal(first)
    logs = "\n".join(cli("logs", first).stdout.splitlines())
    if j["state"] != "JOB_STATE_SUCCEEDED":
        fail("text job: %s\n%s" % (j, logs))
    if "dataset: tokenized" not in logs or "%d documents" % len(paragraphs) not in logs:
        fail("the log does not say what was tokenized:\n%s" % logs)
    steps, total = int(j["steps_done"]), int(j.get("total_steps", 0))
    if steps <= 0 or steps != total:
        fail("epoch step count: done %d of %d" % (steps, total))
    evals = [line for line in logs.splitlines() if "eval loss" in line]
    if len(evals) != steps // 50 + (1 if steps % 50 else 0):
        fail("expected an eval loss every 50 steps and at the end (%d steps):\n%s" %
             (steps, "\n".join(evals)))
    # The cache is the submitting user's (root here): state/users/<uid>/datasets.
    cached = [f for f in os.listdir(os.path.join(STATE, "users", str(os.getuid()), "datasets"))
              if f.endswith(".tok")]
    if len(cached) != 1:
        fail("expected one cached token file, found %s" % cached)
    ok("jsonl x2 + SentencePiece, 1 epoch = %d steps, %d evals, SUCCEEDED; cached %s" %
       (steps, len(evals), cached[0]))

    # --- the same files again: the cache.
    second = json.loads(cli("submit", spec("sp-again", dataset, "steps: 2"), "--json").stdout)["id"]
    j = wait_terminal(second)
    logs = cli("logs", second).stdout
    if j["state"] != "JOB_STATE_SUCCEEDED" or "reusing the token file" not in logs:
        fail("second job did not reuse the token file: %s\n%s" % (j, logs))
    ok("a second job on the same files reused the token file")

    # --- a malformed line: failed with file and line, no retries; skip_bad_lines runs.
    write(os.path.join(TMP, "bad.jsonl"),
          json.dumps({"body": paragraphs[0]}) + "\n{\"bdy\": \"typo\"}\n" +
          "".join(json.dumps({"body": p}) + "\n" for p in paragraphs[1:]))
    bad_ds = "  path: bad.jsonl\n  format: jsonl\n  text_field: body"
    bad = json.loads(cli("submit", spec("bad-line", bad_ds, "steps: 2"), "--json").stdout)["id"]
    j = wait_terminal(bad)
    reason = j.get("state_reason", "")
    if j["state"] != "JOB_STATE_FAILED" or "bad.jsonl line 2" not in reason or \
            int(j.get("restarts", 0)) != 0:
        fail("bad line: %s" % j)
    ok("malformed line -> FAILED without retry: " + reason)
    skip = json.loads(cli("submit", spec("skip-line", bad_ds + "\n  skip_bad_lines: true",
                                         "steps: 2"), "--json").stdout)["id"]
    j = wait_terminal(skip)
    if j["state"] != "JOB_STATE_SUCCEEDED" or "1 bad lines skipped" not in cli("logs", skip).stdout:
        fail("skip_bad_lines: %s" % j)
    ok("skip_bad_lines: the job ran and the log counts the skipped line")

    # --- chat with the model's own template (default chat_template), in the daemon's tokenizer
    # child; then a model without a template.
    chat_model = os.path.join(TMP, "chat-model")
    run([os.path.join(BIN, "mobius-worker"), "init-model", "--family", "llama", "--preset",
         "tiny", "--vocab", "896", "--layers", "4", "--out", chat_model])
    fixtures = os.path.join(SRC, "test/data/chat_templates")
    shutil.copy(os.path.join(fixtures, "tokenizer.json"), chat_model)
    shutil.copy(os.path.join(fixtures, "qwen3/tokenizer_config.json"), chat_model)
    convs = [json.loads(line) for line in open(os.path.join(fixtures, "conversations.jsonl"))]
    write(os.path.join(TMP, "chat.jsonl"),
          "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in convs * 8))
    chat_ds = "  path: chat.jsonl\n  format: chat\n  chat_template_kwargs: {enable_thinking: false}"
    chat_spec = spec("chat-model", chat_ds, "steps: 2")
    write(chat_spec, open(chat_spec).read().replace("model_dir: model\n",
                                                    "model_dir: chat-model\n"))
    chat = json.loads(cli("submit", chat_spec, "--json").stdout)["id"]
    j = wait_terminal(chat)
    logs = cli("logs", chat).stdout
    if j["state"] != "JOB_STATE_SUCCEEDED" or "32 documents" not in logs or \
            "8 conversations without an assistant turn skipped" not in logs:
        fail("chat with the model's template: %s\n%s" % (j, logs))
    ok("chat with the model's template: rendered, trained; skipped conversations counted")
    # Trained on one conversation, the checkpoint answers it under `mobius generate --chat` and
    # stops at the template's end-of-turn token (<|im_end|>): the answer, nothing after it.
    memo = {"messages": [{"role": "system", "content": "Answer in one word."},
                         {"role": "user", "content": "What is the capital of France?"},
                         {"role": "assistant", "content": "Paris."}]}
    write(os.path.join(TMP, "memo.jsonl"), (json.dumps(memo) + "\n") * 64)
    memo_spec = spec("chat-memo", "  path: memo.jsonl\n  format: chat\n"
                     "  chat_template_kwargs: {enable_thinking: false}", "steps: 60")
    write(memo_spec, open(memo_spec).read().replace("model_dir: model\n", "model_dir: chat-model\n")
          .replace("lr: 1e-3", "lr: 1e-2") + "checkpoint:\n  dir: memo-ckpt\n")
    memo_job = json.loads(cli("submit", memo_spec, "--json").stdout)["id"]
    j = wait_terminal(memo_job)
    if j["state"] != "JOB_STATE_SUCCEEDED":
        fail("chat memo job: %s\n%s" % (j, cli("logs", memo_job).stdout))
    export = os.path.join(TMP, "memo-ckpt", "export-00000060")
    if not os.path.exists(os.path.join(export, "tokenizer_config.json")):
        fail("the export has no tokenizer_config.json (the chat template): %s" %
             os.listdir(export))
    r = cli("generate", export, "--chat", "--system", "Answer in one word.", "--prompt",
            "What is the capital of France?", "--chat_template_kwargs", "enable_thinking=false",
            "--max_new_tokens", "16", "--backend", "cpu")
    if r.stdout != "Paris.\n":
        fail("generate --chat on the trained checkpoint: %r\n%s" % (r.stdout, r.stderr))
    ok("generate --chat on the job's checkpoint: %r, stopped at <|im_end|>" % r.stdout.strip())
    no_tmpl = json.loads(cli("submit", spec("chat-none", "  path: chat.jsonl\n  format: chat",
                                            "steps: 2"), "--json").stdout)["id"]
    j = wait_terminal(no_tmpl)
    reason = j.get("state_reason", "")
    if j["state"] != "JOB_STATE_FAILED" or "has no chat template" not in reason or \
            "chatml or plain" not in reason:
        fail("chat for a model without a template: %s" % j)
    ok("chat for a model without a template -> FAILED: " + reason)
    H.daemon.terminate()
    H.daemon.wait(timeout=60)
    H.daemon = None

    # --- mobius run: prompt/completion into $XDG_CACHE_HOME.
    pc = write(os.path.join(TMP, "pc.jsonl"), "".join(
        json.dumps({"prompt": "Q: " + p[:80], "completion": " " + p[80:400]}) + "\n"
        for p in paragraphs))
    r = run([os.path.join(BIN, "mobius"), "run",
             spec("run-pc", "  path: pc.jsonl\n  format: prompt_completion", "steps: 2"),
             "--topology-file", FIXTURE, "--link-scale", "0.02",
             "--run-dir", os.path.join(TMP, "run")])
    if "tokenized" not in r.stderr or "done: 2 steps" not in r.stdout:
        fail("mobius run with a prompt/completion dataset:\n%s%s" % (r.stdout, r.stderr))
    if not any(f.endswith(".tok") for f in os.listdir(os.path.join(TMP, "cache/mobius/datasets"))):
        fail("mobius run did not cache the token file under $XDG_CACHE_HOME")
    ok("mobius run: prompt/completion tokenized into the cache and trained")

    # --- mobius tokenize with SentencePiece (in mobius-worker).
    out = os.path.join(TMP, "sp.tok")
    r = cli("tokenize", os.path.join(TMP, "a.jsonl"), os.path.join(TMP, "b.jsonl"), out,
            "--tokenizer", model, "--text-field", "body")
    if "%d documents" % len(paragraphs) not in r.stdout or "vocab 600" not in r.stdout:
        fail("mobius tokenize (SentencePiece): %s%s" % (r.stdout, r.stderr))
    ok("mobius tokenize with SentencePiece: " + r.stdout.strip())
    shutil.rmtree(TMP, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    try:
        main()
    finally:
        H.kill_daemon()
