#include "worker/checkpoint/worker_flags.h"

#include "absl/flags/flag.h"

// Sizes: 0 keeps the preset's value.
ABSL_FLAG(std::string, family, "", "init-model: gpt2 | llama | mistral | qwen2 | qwen3.");
ABSL_FLAG(std::string, preset, "tiny",
          "init-model: size preset, tiny or small (also \"<family>-<preset>\").");
ABSL_FLAG(int64_t, layers, 0, "init-model: decoder blocks (0: the preset's).");
ABSL_FLAG(int64_t, hidden, 0, "init-model: hidden size (0: the preset's).");
ABSL_FLAG(int64_t, heads, 0, "init-model: attention heads (0: the preset's).");
ABSL_FLAG(int64_t, kv_heads, 0, "init-model: key/value heads, GQA (0: the preset's).");
ABSL_FLAG(int64_t, head_dim, 0,
          "init-model: per-head width (0: the preset's, or hidden/heads when those change).");
ABSL_FLAG(int64_t, intermediate, 0, "init-model: MLP width (0: the preset's).");
ABSL_FLAG(int64_t, vocab, 0,
          "init-model: vocabulary size; match the tokenizer you will use (0: the preset's).");
ABSL_FLAG(int64_t, max_positions, 0, "init-model: max_position_embeddings (0: the preset's).");
ABSL_FLAG(uint64_t, seed, 0, "init-model: initialisation seed; same seed, same bytes.");
ABSL_FLAG(std::string, dtype, "bf16", "init-model: dtype of model.safetensors, bf16 or fp32.");
ABSL_FLAG(std::string, out, "", "init-model: output directory (created if missing).");
ABSL_FLAG(bool, force, false,
          "init-model: write into a non-empty --out directory, replacing the model files.");
ABSL_FLAG(bool, generation_config, true, "init-model: also write generation_config.json.");
