// `mobius generate MODEL_DIR [--adapter DIR] (--prompt TEXT | --prompt_ids 1,2,3)
// --max_new_tokens N [--temperature T --top_p P --seed S] [--backend auto|cpu|cuda]`: text from a
// Hugging Face model directory (as `mobius-worker init-model` or `mobius export --merge` write
// them), optionally with a PEFT LoRA adapter on top, with a KV cache. Greedy by default; with
// --temperature > 0, top-p sampling seeded by --seed. Stops after --max_new_tokens or at the
// model's eos_token_id. A mixture of experts too large for the device runs with routed experts
// (--expert_residency, --expert_cache_bytes: the worker's decoder uploads only the experts each
// step's tokens are routed to). With --chat, --prompt is a user message (after --system's) rendered with
// the model's own chat template (common/data/chat_template.h) with the generation prompt, and the
// template's end-of-turn token stops generation too.
//
// No daemon. Generation runs in a `mobius-worker generate` child (the CLI links none of the
// worker's code: docs/architecture.md), the one next to `mobius` unless --worker_binary names
// another, on --backend (default auto: the GPU when usable, else the CPU backend). Its stdout is
// printed as it is: with --prompt, the new text; with --prompt_ids, "ids: ..." and, when the model
// directory has a tokenizer, "text: ...". Its error line is relayed ("mobius generate: <the
// worker's message>"). What it does and checks: worker/generate/generate_command.h, docs/generate.md.
//
// Exit codes (client/exit_codes.h): 0 done; 2 bad usage or input (no MODEL_DIR, both or neither
// of --prompt / --prompt_ids, bad ids or sampling flags, a bad model directory, adapter or
// tokenizer: the worker names the flag or file); 4 generation failed otherwise (the worker
// missing or killed, I/O).
//
// Blocks until the child exits. Thread-compatible.
#ifndef MOBIUS_CLIENT_GENERATE_COMMAND_H_
#define MOBIUS_CLIENT_GENERATE_COMMAND_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace mobius::cli {

inline constexpr char kGenerateUsage[] =
    "mobius generate MODEL_DIR [--adapter DIR [--lora_base nf4]] (--prompt TEXT [--chat "
    "[--system TEXT]] | "
    "--prompt_ids 1,2,3) --max_new_tokens N [--temperature T --top_p P --seed S] "
    "[--backend auto|cpu|cuda]";

struct GenerateOptions {
  std::vector<std::string> args;  // positional: MODEL_DIR
  std::string adapter_dir;
  // "nf4": the adapter was trained over an NF4 base (QLoRA); an adapter checkpoint of an NF4 run
  // says so itself (its trainer_state.json), so this is for adapters from elsewhere.
  std::string lora_base = "bf16";
  std::string prompt, prompt_ids;
  bool chat = false;                 // --prompt is a user message for the model's chat template
  std::string system;                // --chat: a system message first
  std::string chat_template_kwargs;  // --chat: NAME=VALUE,...
  int64_t max_new_tokens = 0;
  std::string expert_residency = "auto";  // auto | resident | routed (the worker checks it)
  uint64_t expert_cache_bytes = 0;
  double temperature = 0, top_p = 1;
  uint64_t seed = 0;
  std::string backend = "auto";
  int threads = 0;                // 0: all cores
  std::string worker_binary;      // empty: mobius-worker next to this executable
};

int RunGenerate(const GenerateOptions& options, std::ostream& out, std::ostream& err);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_GENERATE_COMMAND_H_
