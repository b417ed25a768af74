// `mobius-worker generate MODEL_DIR`: text from a Hugging Face model directory (config.json,
// model.safetensors or shards, tokenizer files) and optionally a PEFT LoRA adapter, with a KV
// cache (decoder.h, generate.h). Spawned by `mobius generate` (client/generate_command.h); runs
// by hand as well.
//
//   mobius-worker generate MODEL_DIR (--prompt TEXT | --prompt_ids 1,2,3) --max_new_tokens N
//       [--adapter DIR] [--temperature T] [--top_p P] [--seed S] [--backend auto|cpu|cuda]
//       [--threads N] [--device_memory_bytes B] [--expert_residency auto|resident|routed]
//       [--expert_cache_bytes B]
//
// A mixture of experts larger than the device runs with routed experts (decoder.h): the experts
// stay in host memory and each step uploads only those its tokens were routed to, into a cache
// of --expert_cache_bytes (default: what the device has left). auto routes when the resident model
// would not fit; the log's last lines say how many experts and bytes moved against what copying
// every expert of each block would have moved.
//
// --prompt is encoded with the model directory's tokenizer (data::LoadTokenizer: tokenizer.json
// or SentencePiece's tokenizer.model; the tokenizer's special tokens added, e.g. Llama's BOS).
// With --chat, --prompt is a user message (after --system's) rendered with the model's own chat
// template and the generation prompt (common/data/chat_template.h; --chat_template_kwargs for
// its variables), encoded without added special tokens (the template writes them), and the
// template's end-of-turn token, when it is one token, stops generation as eos_token_id does.
// Greedy unless --temperature > 0 (then top-p sampling seeded by --seed: the same seed, the
// same text). Stops after --max_new_tokens or at the model's eos_token_id (generate.h
// StopTokenIds). --backend as train's (default cpu); `mobius generate` passes auto unless told
// otherwise (the GPU when usable, else the CPU backend with a log line saying why).
//
// stdout: with --prompt, the new text (special tokens skipped, ids past the tokenizer's vocabulary,
// which a padded model vocabulary allows, too) and a newline; with --prompt_ids,
// "ids: " + the new ids (space-separated, a stop token included) and, when the directory has a
// tokenizer, "text: " + their text. stderr: the effective flags and a summary (glog INFO), and on
// failure the error as one line "mobius-worker generate: <message>" naming the flag or file.
// Exit codes: 0 done; 2 bad input (usage, flags, the model directory, the adapter, ids, the
// tokenizer); 1 other failures. The process dies with its parent (PR_SET_PDEATHSIG).
//
// Call from main() after InitProcess; not thread-safe (reads flags).
#ifndef MOBIUS_WORKER_GENERATE_GENERATE_COMMAND_H_
#define MOBIUS_WORKER_GENERATE_GENERATE_COMMAND_H_

#include <string>
#include <vector>

namespace mobius::generate {

inline constexpr char kGenerateUsage[] =
    "mobius-worker generate MODEL_DIR (--prompt TEXT [--chat [--system TEXT]] | --prompt_ids "
    "1,2,3) --max_new_tokens N [--adapter DIR] [--temperature T --top_p P --seed S] "
    "[--backend auto|cpu|cuda] [--expert_residency auto|resident|routed]";

// `args`: positional arguments, argv[0] first ("generate" second). Returns the exit code.
int RunGenerateCommand(const std::vector<std::string>& args);

}  // namespace mobius::generate

#endif  // MOBIUS_WORKER_GENERATE_GENERATE_COMMAND_H_
