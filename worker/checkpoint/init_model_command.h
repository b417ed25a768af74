// `mobius-worker init-model`: writes a seeded, randomly initialised Hugging Face model directory
// (model_init.h) from the flags in worker_flags.h.
//
//   mobius-worker init-model --family llama --preset tiny --seed 1 --dtype bf16 --out DIR
//       [--layers N --hidden C --heads H --kv-heads K --head-dim D --intermediate I --vocab V
//        --max-positions P] [--force] [--nogeneration_config]
//
// Exit codes: 0 written; 2 bad usage (unknown family/preset/dtype, inconsistent sizes, missing
// --out, a non-empty --out without --force); 1 I/O failure. Errors are one line on stderr.
//
// Call from main() after InitProcess; not thread-safe (reads flags).
#ifndef MOBIUS_WORKER_CHECKPOINT_INIT_MODEL_COMMAND_H_
#define MOBIUS_WORKER_CHECKPOINT_INIT_MODEL_COMMAND_H_

#include <string>
#include <vector>

namespace mobius::checkpoint {

inline constexpr char kInitModelUsage[] =
    "mobius-worker init-model --family gpt2|llama|mistral|qwen2|qwen3|qwen3_moe|mixtral "
    "[--preset tiny|small] [--layers N --hidden C --heads H --kv_heads K --head_dim D "
    "--intermediate I --vocab V --max_positions P] [--experts E --experts_per_token K "
    "--expert_intermediate I] [--seed S] [--dtype bf16|fp32] --out DIR [--force]";

// `args` are the positional arguments, argv[0] first ("init-model" second). Returns the exit code.
int RunInitModelCommand(const std::vector<std::string>& args);

}  // namespace mobius::checkpoint

#endif  // MOBIUS_WORKER_CHECKPOINT_INIT_MODEL_COMMAND_H_
