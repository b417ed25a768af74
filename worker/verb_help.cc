#include "worker/verb_help.h"


#include "absl/strings/str_cat.h"
#include "common/init.h"

namespace mobius::worker {
namespace {

struct Verb {
  const char* name;
  const char* summary;
  std::vector<const char*> flags;
};

const std::vector<Verb>& Table() {
  static const std::vector<Verb>* table = new std::vector<Verb>{
      {"devices", "Lists the compute devices and the backend this worker would use.", {}},
      {"init-model",
       "Writes a seeded, randomly initialised Hugging Face model directory (config.json,\n"
       "model.safetensors, a byte-level tokenizer): test and benchmark models of any size.",
       {"family", "preset", "layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate",
        "experts", "experts_per_token", "expert_intermediate", "vocab", "max_positions", "seed",
        "dtype", "out", "force", "generation_config"}},
      {"train",
       "Trains a model directory on a token file in this one process, the whole model resident\n"
       "on one backend (--standalone): the reference the pipeline runtime is checked against.",
       {"standalone", "model", "data", "data_raw_bytes", "steps", "batch", "microbatch", "seq", "lr",
        "min_lr", "warmup", "schedule", "weight_decay", "grad_clip", "seed", "eval_every",
        "eval_fraction", "checkpoint_dir", "checkpoint_every", "resume", "device_memory_bytes",
        "threads", "backend", "recompute", "chunk_tokens", "precision", "loss_scale_init",
        "loss_scale_window", "optimizer_staleness", "lora_rank", "lora_alpha", "lora_dropout",
        "lora_targets", "lora_init", "lora_base"}},
      {"run",
       "One rank of a pipeline run, started by mobiusd or `mobius run` (its configuration comes\n"
       "from the launcher; no flags).",
       {}},
      {"tokenize",
       "Tokenizes a text dataset into a token file, as the job's user (started by mobiusd or the\n"
       "CLI with a request file; no flags).",
       {}},
      {"merge-adapter",
       "Merges a PEFT LoRA adapter into its base model and writes a Hugging Face model directory.",
       {"adapter", "base", "out", "dtype", "max_shard_bytes"}},
      {"generate",
       "Text from a model directory (and a PEFT adapter) with a KV cache.",
       {"prompt", "prompt_ids", "chat", "system", "chat_template_kwargs", "max_new_tokens",
        "temperature", "top_p", "seed", "adapter", "lora_base", "backend", "threads",
        "device_memory_bytes", "expert_residency", "expert_cache_bytes"}},
      {"profile",
       "Measures the model's layer units and the copy bandwidths on the backend for the planner\n"
       "(cached).",
       {"model", "microbatch", "seq", "precision", "backend", "threads", "device_memory_bytes",
        "cache_dir", "out", "refresh", "profile_warmup", "profile_repetitions", "copy_mib",
        "devices", "links"}},
  };
  return *table;
}

const Verb* Find(absl::string_view name) {
  for (const Verb& v : Table()) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> Verbs() {
  std::vector<std::string> out;
  for (const Verb& v : Table()) out.push_back(v.name);
  return out;
}

std::vector<std::string> VerbFlags(absl::string_view verb) {
  const Verb* v = Find(verb);
  if (v == nullptr) return {};
  return std::vector<std::string>(v->flags.begin(), v->flags.end());
}

std::optional<std::string> VerbHelp(absl::string_view verb, absl::string_view usage) {
  const Verb* v = Find(verb);
  if (v == nullptr) return std::nullopt;
  std::string out = absl::StrCat("Usage: ", usage, "\n", v->summary, "\n");
  if (!v->flags.empty()) {
    absl::StrAppend(&out, "\nFlags (dashes or underscores: --kv-heads == --kv_heads):\n");
    for (const char* f : v->flags) absl::StrAppend(&out, FlagHelpLine(f));
  }
  absl::StrAppend(&out, "\nExit codes: 0 ok, 1 failure, 2 usage.\n");
  return out;
}

std::string GlobalHelp(const std::vector<std::string>& usages) {
  std::string out =
      "mobius-worker: runs one GPU's part of a Mobius job (started by mobiusd or `mobius run`),\n"
      "and the tools around it.\nUsage (mobius-worker VERB --help: the verb's flags):\n";
  for (const std::string& u : usages) absl::StrAppend(&out, "  ", u, "\n");
  return out;
}

}  // namespace mobius::worker
