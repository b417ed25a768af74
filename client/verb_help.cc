#include "client/verb_help.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/init.h"

namespace mobius::cli {
namespace {

constexpr char kGlobalUsage[] =
    "mobius: client of the Mobius fine-tuning daemon.\n"
    "Usage: mobius [flags] COMMAND      (mobius COMMAND --help: the command's flags)\n"
    "Commands:\n"
    "  topo     show the server's GPU/PCIe/NUMA topology (--topology-file, --json, --xml)\n"
    "  plan     plan a fine-tuning job: stages, mapping, memory, step time, alternatives\n"
    "           (mobius plan JOB.yaml plans a job spec)\n"
    "           (--model DIR|config.json, --topology-file or the daemon, --batch, --microbatch,\n"
    "           --seq, --schedule, --partitioner, --mapper, --gpus 0,1, --json, --trace FILE)\n"
    "  health   check that the daemon is serving\n"
    "  submit JOB.yaml [--wait]   queue a fine-tuning job (docs/job-spec.md); --wait: progress\n"
    "                             bar\n"
    "  ls [--state S]             your jobs (admins: everyone's)\n"
    "  run JOB.yaml               run a job in the foreground, no daemon (Slurm job steps)\n"
    "  describe JOB | logs [-f] JOB | watch JOB | cancel JOB\n"
    "  queue                      queued and running jobs and why they wait\n"
    "  node                       GPUs (free / used by which job), memory budgets\n"
    "  drain | undrain | quota set UID --max-gpus N --max-running-jobs N | quota ls   (admins)\n"
    "  tokenize IN... OUT --tokenizer DIR  tokenize a dataset into a token file (no daemon)\n"
    "  export --merge ADAPTER_DIR OUT  merge a LoRA adapter into its base model (no daemon)\n"
    "  generate MODEL_DIR          generate text from a model (+ a LoRA adapter), no daemon\n"
    "  help [COMMAND]             this text, or the command's usage and flags\n"
    "Connection: --socket PATH (or $MOBIUS_SOCKET), or --daemon tcp://HOST:PORT (or\n"
    "  $MOBIUS_DAEMON) with --tls_ca CA.pem and either --token_file FILE ($MOBIUS_TOKEN) or\n"
    "  --tls_cert/--tls_key (a client certificate); TCP is always TLS.\n"
    "Exit codes: 0 ok, 1 job failed, 2 usage or invalid input, 3 daemon unreachable, "
    "4 daemon error (export: the merge failed; generate: generation failed).";

struct Verb {
  const char* name;
  const char* usage;     // the command line
  const char* summary;   // what it does
  bool daemon;           // talks to mobiusd: takes the connection flags
  std::vector<const char*> flags;
};

const std::vector<Verb>& Table() {
  static const auto* table = new std::vector<Verb>{
      {"topo", "mobius topo [--topology-file FILE] [--json | --xml]",
       "Shows the server's GPU/PCIe/NUMA topology (the daemon's, or an hwloc XML file's).", true,
       {"topology_file", "json", "xml"}},
      {"plan",
       "mobius plan --model DIR|config.json [flags]\n       mobius plan JOB.yaml [flags]",
       "Plans a fine-tuning job: stages, mapping, memory, predicted step time, alternatives.\n"
       "What --schedule, --dispatch, --optimizer-staleness, --microbatch and --precision do not\n"
       "pin is\n"
       "chosen by simulation: the fastest configuration the runtime executes (with the runner-up).\n"
       "With JOB.yaml the job's own training and plan settings are used (--model, --batch,\n"
       "--microbatch, --seq, --schedule, --partitioner, --mapper, --optimizer-staleness,\n"
       "--precision,\n"
       "--dispatch, --clip, --lora, --lora-rank, --lora-targets, --lora-base and --gpu-memory-gib\n"
       "apply to\n"
       "--model only). The prediction of an emulated run (mobiusd or mobius run on the CPU\n"
       "backend with --link-scale S): --emulated-gpus --profile measured --link-scale S.\n"
       "--nodes N (or 1,2,4,8) predicts N identical servers splitting --batch, each stage's\n"
       "gradients all-reduced across them over --internode-gbps / --internode-latency-us:\n"
       "per-node step, all-reduce bytes and time, exposed time, tokens/s and scaling\n"
       "efficiency against one node. The longest sequence that plans (full fine-tuning and\n"
       "LoRA, microbatch 1) is searched and printed unless --nolongest.",
       true,
       {"model", "topology_file", "batch", "microbatch", "seq", "schedule", "partitioner",
        "mapper", "optimizer_staleness", "dispatch", "precision", "clip", "lora", "lora_rank", "lora_targets", "lora_base",
        "gpus", "gpu_memory_gib",
        "host_memory_gib", "emulated_gpus", "efficiency",
        "peak_tflops", "mip_time_limit_seconds", "link_scale", "nodes", "internode_gbps",
        "internode_latency_us", "allreduce_bucket_mib", "profile", "profile_cache_dir",
        "worker_binary", "json", "trace", "longest"}},
      {"health", "mobius health", "Checks that the daemon is serving (exit 0 when it is).", true,
       {}},
      {"submit", "mobius submit JOB.yaml [--wait] [--submission-id ID] [--json]",
       "Queues a fine-tuning job (docs/job-spec.md) and prints its id.", true,
       {"wait", "submission_id", "json", "stream_idle_seconds"}},
      {"ls", "mobius ls [--state S] [--json]",
       "Lists your jobs (admins: everyone's), newest last, with step and latest training loss.",
       true, {"state", "json"}},
      {"run", "mobius run JOB.yaml [flags]",
       "Runs a job in the foreground without a daemon (Slurm job steps).\n"
       "Several nodes: one mobius run per node, each told its place by --nodes, --node-rank and\n"
       "--rendezvous, or by MOBIUS_NODES, MOBIUS_NODE_RANK, MOBIUS_RENDEZVOUS, Slurm's job step\n"
       "(SLURM_NTASKS, SLURM_PROCID, the first node) or a Kubernetes Indexed Job\n"
       "(JOB_COMPLETION_INDEX), in that order (docs/operations.md, Several nodes).",
       false,
       {"topology_file", "gpus", "run_dir", "link_scale", "emulate_links", "backend", "transport",
        "resume", "nodes", "node_rank", "rendezvous", "node_timeout", "internode_gbps",
        "internode_latency_us", "allreduce_bucket_mib", "report_file"}},
      {"describe", "mobius describe JOB [--json]",
       "Shows one job in full: state, progress, latest step and eval loss, predicted step time.",
       true, {"json"}},
      {"logs", "mobius logs [-f | --follow] JOB", "Prints the job's log.", true,
       {"follow", "f", "stream_idle_seconds"}},
      {"watch", "mobius watch JOB",
       "Shows the live progress bar of a submitted job until it ends (Ctrl-C detaches).", true,
       {"stream_idle_seconds"}},
      {"cancel", "mobius cancel JOB [--json]", "Cancels a queued or running job.", true,
       {"json"}},
      {"queue", "mobius queue [--json]", "Lists queued and running jobs and why they wait.", true,
       {"json"}},
      {"node", "mobius node [--json]",
       "Shows the node's GPUs (free / used by which job) and memory budgets.", true, {"json"}},
      {"drain", "mobius drain", "(admins) Stops starting jobs; running jobs continue.", true, {}},
      {"undrain", "mobius undrain", "(admins) Starts jobs again after a drain.", true, {}},
      {"quota",
       "mobius quota set UID [--max-gpus N] [--max-running-jobs N] [--max-queued-jobs N]\n"
       "                      [--max-host-memory SIZE]\n       mobius quota ls [--json]",
       "(admins) Sets (replaces) or lists per-user quotas; 0 or unset: no limit.", true,
       {"max_gpus", "max_running_jobs", "max_queued_jobs", "max_host_memory", "json"}},
      {"usage", "mobius usage [--user U] [--since WHEN] [--runs] [--json]",
       "GPU-hours, host-memory GiB-hours, tokens and steps per user (and group) over a window,\n"
       "with each user's fair-share factor. Users see their own; admins everyone's.", true,
       {"user", "since", "runs", "json"}},
      {"tokenize", "mobius tokenize IN... OUT --tokenizer DIR [flags]",
       "Tokenizes a dataset (JSONL or text) into a token file; no daemon.", false,
       {"tokenizer", "format", "text_field", "prompt_field", "completion_field", "messages_field",
        "chat_template", "chat_template_kwargs", "skip_bad_lines", "eos_id", "threads"}},
      {"export", "mobius export --merge ADAPTER_DIR OUT [--base DIR] [--dtype bf16|fp32|auto]",
       "Merges a PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors, e.g. a LoRA\n"
       "checkpoint's) into its base model and writes OUT, a Hugging Face model directory that\n"
       "loads without PEFT (config.json, model safetensors, generation_config.json, tokenizer\n"
       "files). Runs mobius-worker merge-adapter; no daemon. OUT must not exist (or be empty).",
       false, {"merge", "base", "dtype", "worker_binary"}},
      {"generate",
       "mobius generate MODEL_DIR [--adapter DIR] (--prompt TEXT [--chat [--system TEXT]] |\n"
       "       --prompt_ids 1,2,3) --max_new_tokens N [--temperature T --top_p P --seed S]\n"
       "       [--backend auto|cpu|cuda] [--expert_residency auto|resident|routed]",
       "Generates text from a Hugging Face model directory (config.json, model safetensors,\n"
       "tokenizer files), optionally with a PEFT LoRA adapter, with a KV cache: greedy, or top-p\n"
       "sampling with --temperature > 0 (the same --seed, the same text). Stops after\n"
       "--max_new_tokens or at the model's eos_token_id. --prompt uses the model's tokenizer;\n"
       "--prompt_ids prints the new ids (and their text when there is a tokenizer). With --chat,\n"
       "--prompt is a user message (after --system's, if any) rendered with the model's own chat\n"
       "template (--chat_template_kwargs NAME=VALUE,... for its variables), and generation also\n"
       "stops at the template's end-of-turn token. A mixture of experts larger than the GPU runs\n"
       "with routed experts: the experts stay in host memory and each step uploads only those\n"
       "its tokens are routed to (--expert_residency, --expert_cache_bytes). Runs mobius-worker\n"
       "generate; no daemon.",
       false,
       {"adapter", "prompt", "prompt_ids", "chat", "system", "chat_template_kwargs",
        "max_new_tokens", "temperature", "top_p", "seed", "backend", "threads",
        "expert_residency", "expert_cache_bytes", "worker_binary"}},
  };
  return *table;
}

constexpr const char* kConnectionFlags[] = {"socket",  "daemon",          "tls_ca",
                                            "tls_cert", "tls_key",        "tls_server_name",
                                            "token_file", "timeout_seconds"};

const Verb* Find(absl::string_view name) {
  for (const Verb& v : Table()) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

}  // namespace

absl::string_view GlobalUsage() { return kGlobalUsage; }

std::vector<std::string> Verbs() {
  std::vector<std::string> out;
  for (const Verb& v : Table()) out.push_back(v.name);
  return out;
}

std::vector<std::string> VerbFlags(absl::string_view verb) {
  const Verb* v = Find(verb);
  if (v == nullptr) return {};
  std::vector<std::string> out(v->flags.begin(), v->flags.end());
  if (v->daemon) out.insert(out.end(), std::begin(kConnectionFlags), std::end(kConnectionFlags));
  return out;
}

std::optional<std::string> VerbHelp(absl::string_view verb) {
  const Verb* v = Find(verb);
  if (v == nullptr) return std::nullopt;
  std::string out = absl::StrCat("Usage: ", v->usage, "\n", v->summary, "\n");
  if (!v->flags.empty()) {
    absl::StrAppend(&out, "\nFlags (dashes or underscores: --topology-file == --topology_file):\n");
    for (const char* f : v->flags) absl::StrAppend(&out, FlagHelpLine(f));
  }
  if (v->daemon) {
    absl::StrAppend(&out, "\nConnection to mobiusd:\n");
    for (const char* f : kConnectionFlags) absl::StrAppend(&out, FlagHelpLine(f));
  }
  absl::StrAppend(&out,
                  "\nExit codes: 0 ok, 1 job failed, 2 usage or invalid input, 3 daemon "
                  "unreachable, 4 daemon error (export: the merge failed).\n");
  return out;
}

}  // namespace mobius::cli
