#include "client/flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, socket, "",
          "mobiusd's unix socket (default: $MOBIUS_SOCKET, else /run/mobius/mobiusd.sock).");
ABSL_FLAG(std::string, daemon, "",
          "Where mobiusd listens: a unix socket path (or unix:PATH), or tcp://HOST:PORT for its "
          "TLS port (default: $MOBIUS_DAEMON, else --socket / $MOBIUS_SOCKET).");
ABSL_FLAG(std::string, tls_ca, "",
          "tcp://: PEM CA bundle that signed the daemon's certificate (default: the system's CAs).");
ABSL_FLAG(std::string, tls_cert, "",
          "tcp://: client certificate (PEM) to authenticate with; its CN is your user name on the "
          "server. Needs --tls_key.");
ABSL_FLAG(std::string, tls_key, "", "tcp://: private key (PEM) of --tls_cert.");
ABSL_FLAG(std::string, tls_server_name, "",
          "tcp://: the name to expect in the daemon's certificate (default: the HOST of "
          "--daemon).");
ABSL_FLAG(std::string, token_file, "",
          "tcp://: file holding your bearer token (mode 0600; default: $MOBIUS_TOKEN).");
ABSL_FLAG(double, timeout_seconds, 10,
          "Deadline of each call to the daemon, in seconds (exit 3 when it does not answer).");
ABSL_FLAG(double, stream_idle_seconds, 30,
          "watch, logs, submit --wait: fail (exit 3) when the daemon sends nothing for this many "
          "seconds; it sends a heartbeat every 10 s while there is no news (so keep this above "
          "10). 0: wait forever.");
ABSL_FLAG(bool, json, false, "Print machine-readable JSON instead of text.");
ABSL_FLAG(bool, xml, false, "topo: print the topology as hwloc XML (lstopo --input can read it).");
ABSL_FLAG(std::string, topology_file, "",
          "topo, plan: read this hwloc XML file instead of asking the daemon.");
ABSL_FLAG(std::string, tokenizer, "", "tokenize: model directory or tokenizer.json to use.");
ABSL_FLAG(std::string, format, "jsonl", "tokenize: jsonl | prompt_completion | chat | text.");
ABSL_FLAG(std::string, text_field, "text", "tokenize: JSON field holding a document.");
ABSL_FLAG(std::string, prompt_field, "prompt", "tokenize: JSON field of the prompt.");
ABSL_FLAG(std::string, completion_field, "completion", "tokenize: JSON field of the completion.");
ABSL_FLAG(std::string, messages_field, "messages", "tokenize: JSON field of a chat's messages.");
ABSL_FLAG(std::string, chat_template, "",
          "tokenize: chat rendering: the model's own template (default; or model:NAME for a "
          "named one), chatml or plain.");
ABSL_FLAG(std::string, chat_template_kwargs, "",
          "tokenize, generate --chat: extra variables of the model's chat template, "
          "NAME=VALUE,... (e.g. enable_thinking=false).");
ABSL_FLAG(bool, skip_bad_lines, false, "tokenize: skip (and count) malformed lines.");
ABSL_FLAG(int, eos_id, -1, "tokenize: end-of-document token id (default: from the model).");
ABSL_FLAG(int, threads, 0, "tokenize: threads (0: all cores).");
ABSL_FLAG(std::string, model, "", "plan: model directory or config.json.");
ABSL_FLAG(int64_t, batch, 8, "plan: global batch (sequences per optimizer step).");
ABSL_FLAG(int64_t, microbatch, 0,
          "plan: sequences per microbatch (must divide --batch); 0: chosen by simulation.");
ABSL_FLAG(int64_t, seq, 1024, "plan: tokens per sequence.");
ABSL_FLAG(std::string, schedule, "auto",
          "plan: auto (the fastest the runtime executes, by simulation) | mobius | roundrobin | "
          "resident | zero.");
ABSL_FLAG(std::string, partitioner, "exact", "plan: exact | mip | uniform.");
ABSL_FLAG(std::string, mapper, "cross", "plan: cross | sequential.");
ABSL_FLAG(int, optimizer_staleness, -1,
          "plan: 0 | 1, the job's training.optimizer_staleness (1: the CPU optimizer of a step "
          "overlaps the next step; steady state of 3 simulated steps); -1: chosen by simulation.");
ABSL_FLAG(std::string, dispatch, "auto",
          "plan: roundrobin's dispatch, auto | static | pool (auto chooses static: pool's "
          "prediction is not validated, docs/planner.md).");
ABSL_FLAG(std::string, precision, "auto",
          "plan: the job's training.precision, auto (chosen by simulation: fp16 where the GPU sums "
          "fp16 faster, e.g. GeForce; else bf16) | bf16 | fp16.");
ABSL_FLAG(bool, clip, true,
          "plan: the job clips gradients (training.grad_clip > 0, the default), so the CPU "
          "optimizer waits for the whole backward's global norm.");
ABSL_FLAG(bool, lora, false,
          "plan: LoRA (the base frozen in bf16, adapters trained) at --lora-rank, default 8.");
ABSL_FLAG(int64_t, lora_rank, 0,
          "plan: LoRA adapter rank (> 0 plans LoRA; 0: full fine-tuning unless --lora or "
          "--lora-targets).");
ABSL_FLAG(std::string, lora_targets, "",
          "plan: LoRA target modules, e.g. q_proj,v_proj (empty: the family's PEFT default).");
ABSL_FLAG(std::string, lora_base, "bf16",
          "plan: the LoRA job's frozen base: bf16, or nf4 (QLoRA: its linears in 4-bit NF4; "
          "implies --lora). A LoRA plan also reports the other base for comparison. generate: "
          "the base the --adapter was trained over (an NF4 run's checkpoint says so itself).");
ABSL_FLAG(std::string, gpus, "", "plan: granted GPU subset, e.g. 0,1,2 (default: all).");
ABSL_FLAG(std::string, trace, "", "plan: write the simulated step as a Chrome trace (JSON).");
ABSL_FLAG(bool, longest, true,
          "plan: also find the longest sequence that plans on this hardware at the job's batch "
          "and microbatch 1, for full fine-tuning and LoRA (--nolongest: skip the search).");
ABSL_FLAG(double, gpu_memory_gib, 0, "plan: cap per-GPU memory at this many GiB (0: as reported).");
ABSL_FLAG(double, host_memory_gib, 0,
          "plan: host RAM in GiB (0: the topology's NUMA nodes together).");
ABSL_FLAG(bool, emulated_gpus, false,
          "plan: the GPUs are emulated on the CPU backend (as mobiusd and mobius run do without "
          "a CUDA device), so their memory counts as host memory in the estimate.");
ABSL_FLAG(double, efficiency, 0.5, "plan: fraction of peak FLOP/s a layer reaches.");
ABSL_FLAG(double, peak_tflops, 0,
          "plan: the GPU's dense bf16 peak TFLOP/s (0: preset from the GPU name).");
ABSL_FLAG(double, mip_time_limit_seconds, 10, "plan: wall-clock limit of the mip partitioner.");
ABSL_FLAG(std::string, nodes, "",
          "plan: N identical servers splitting --batch (data parallelism: each stage's gradients "
          "all-reduced across them before its optimizer step), or a list 1,2,4,8 for a scaling "
          "table. Empty: one node. run: the job's node count N, one `mobius run` per node (with "
          "--node-rank and --rendezvous); empty: from MOBIUS_NODES, Slurm or Kubernetes, else "
          "one node (docs/operations.md, Several nodes).");
ABSL_FLAG(double, node_timeout, 300,
          "run, several nodes: seconds to wait for the other nodes at the rendezvous, and for any "
          "one collective across nodes before the step fails (a hung peer).");
ABSL_FLAG(std::string, report_file, "",
          "run: append every step's report to this file, one JSON object per line (loss and "
          "gradient norm at full precision, step seconds, bytes moved).");
ABSL_FLAG(int32_t, node_rank, -1,
          "run: this node's rank 0..N-1 with --nodes N (node 0 hosts the rendezvous and writes the "
          "checkpoints); -1: from MOBIUS_NODE_RANK, SLURM_PROCID or JOB_COMPLETION_INDEX.");
ABSL_FLAG(std::string, rendezvous, "",
          "run: HOST[:PORT] of node 0's rendezvous (default port 29560); empty: "
          "MOBIUS_RENDEZVOUS, else under Slurm the step's first node.");
ABSL_FLAG(double, internode_gbps, 25,
          "plan --nodes, run on several nodes: the inter-node link in Gb/s per direction per node "
          "(25: 25 GbE's line rate; a measured all-reduce bus bandwidth, e.g. nccl-tests' busbw, "
          "is better); run with emulated PCIe links also emulates it, scaled by --link-scale.");
ABSL_FLAG(double, internode_latency_us, 20,
          "plan --nodes, run on several nodes: one inter-node message's latency in microseconds (a ring all-reduce "
          "pays 2 (N - 1) of them per bucket; 20: TCP over switched 10/25 GbE).");
ABSL_FLAG(double, allreduce_bucket_mib, 0,
          "plan --nodes: all-reduce each stage's gradients in buckets of this many MiB, each as "
          "soon as its bytes are in host memory (0: one bucket per stage); run on several nodes: "
          "the runtime's buckets (0: 25 MiB; a stage's buckets start after its whole offload).");
ABSL_FLAG(bool, wait, false,
          "submit: follow the job with a live progress bar until it ends (Ctrl-C detaches; the "
          "job keeps running). Exit code 1 unless it succeeded.");
ABSL_FLAG(bool, follow, false, "logs: keep streaming until the job ends.");
ABSL_FLAG(bool, f, false, "logs: short for --follow.");
ABSL_FLAG(std::string, submission_id, "",
          "submit: idempotency key; submitting the same spec again with it returns the same job "
          "(a different spec is refused). Empty: a random one.");
ABSL_FLAG(std::string, state, "", "ls: only jobs in this state (queued, running, succeeded, "
                                  "failed, cancelled).");
ABSL_FLAG(std::string, user, "",
          "usage: one user's usage (a name or uid; yours by default, everyone's for an admin).");
ABSL_FLAG(std::string, since, "",
          "usage: the window's start: a date (2026-12-01, local midnight), an RFC 3339 time "
          "(2026-12-01T08:00:00Z), or a duration back from now (30d, 12h, 90m). Empty: all "
          "recorded usage.");
ABSL_FLAG(bool, runs, false, "usage: also list every run (job, GPUs, start, wall time, usage).");
ABSL_FLAG(int32_t, max_gpus, 0, "quota set: GPUs the user's running jobs may hold; 0: no limit.");
ABSL_FLAG(int32_t, max_running_jobs, 0, "quota set: running jobs of the user; 0: no limit.");
ABSL_FLAG(int32_t, max_queued_jobs, 0,
          "quota set: jobs the user may have queued at once (a submit past it is refused); 0: no "
          "limit.");
ABSL_FLAG(std::string, max_host_memory, "",
          "quota set: host memory the user's running jobs may use together (their plans' "
          "estimates), e.g. 64GiB; empty or 0: no limit.");
ABSL_FLAG(double, link_scale, 1.0,
          "run: multiplies every emulated PCIe link's bandwidth (CPU backend). plan: the same "
          "for the simulator's links, so that with --emulated-gpus and --profile measured the "
          "plan predicts a run emulated at this scale.");
ABSL_FLAG(bool, resume, false,
          "run: continue from the newest complete checkpoint in the spec's checkpoint.dir (a "
          "requeued Slurm step); without one the run starts from the model.");
ABSL_FLAG(std::string, emulate_links, "auto",
          "run: auto | on | off; auto emulates the topology's links when no CUDA device is usable.");
ABSL_FLAG(std::string, backend, "auto",
          "run: auto | cpu | cuda; auto: each worker's GPU where one is usable, else the CPU "
          "backend (logged).");
ABSL_FLAG(std::string, transport, "auto",
          "run: activation gradients between GPUs: auto | host | nccl | emulated "
          "(docs/runtime.md, Transport).");
ABSL_FLAG(std::string, run_dir, "", "run: run directory (run.json, default checkpoints); "
                                    "empty: ./mobius-run-<name>.");
ABSL_FLAG(std::string, worker_binary, "",
          "plan (--profile=measured), export, generate: the mobius-worker to run; empty: the one "
          "next to "
          "mobius.");
ABSL_FLAG(bool, merge, false,
          "export: merge the PEFT LoRA adapter ADAPTER_DIR into its base model (mobius export "
          "--merge ADAPTER_DIR OUT).");
ABSL_FLAG(std::string, base, "",
          "export: base model directory; empty: the adapter's adapter_config.json "
          "base_model_name_or_path.");
ABSL_FLAG(std::string, dtype, "auto",
          "export: dtype of the merged weights, bf16 | fp32 | auto (each tensor as the base "
          "stores it).");
// generate (client/generate_command.h); also --backend, --threads, --worker_binary.
ABSL_FLAG(std::string, adapter, "", "generate: a PEFT LoRA adapter directory on top of the model.");
ABSL_FLAG(std::string, prompt, "", "generate: the prompt text (the model directory's tokenizer).");
ABSL_FLAG(std::string, prompt_ids, "", "generate: the prompt as comma-separated token ids.");
ABSL_FLAG(bool, chat, false,
          "generate: --prompt is a user message, rendered with the model's chat template; "
          "generation stops at its end-of-turn token too.");
ABSL_FLAG(std::string, system, "", "generate --chat: a system message before the prompt.");
ABSL_FLAG(int64_t, max_new_tokens, 0, "generate: tokens to generate at most (>= 1).");
ABSL_FLAG(std::string, expert_residency, "auto",
          "generate, a mixture of experts: resident, routed (experts in host memory, a step "
          "uploads the ones its tokens are routed to) or auto (routed when it does not fit).");
ABSL_FLAG(uint64_t, expert_cache_bytes, 0,
          "generate with routed experts: device bytes for experts (0: what is left).");
ABSL_FLAG(double, temperature, 0.0,
          "generate: 0 greedy; > 0 sampling from softmax(logits / temperature) with --top_p.");
ABSL_FLAG(double, top_p, 1.0,
          "generate: nucleus sampling: the likeliest tokens holding this share of the "
          "probability, in (0, 1].");
ABSL_FLAG(uint64_t, seed, 0, "generate: sampling seed (the same seed, the same text).");
