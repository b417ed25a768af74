// Reading a Hugging Face config.json into a ModelConfig.
//
// The text is untrusted: it is parsed without exceptions, every field is type- and range-checked,
// and nothing in it can crash, hang or overflow the arithmetic done later on the config (each size
// has an upper bound, below). Unknown keys are ignored; a key whose value is null counts as absent.
//
// Families and the keys read (HF names; defaults are those of the transformers config classes);
// each family's reading is its file in families/ (through family.h's table):
//   gpt2:    vocab_size, n_embd, n_layer, n_head, n_inner (null -> 4*n_embd), n_positions,
//            layer_norm_epsilon (1e-5), activation_function (gelu_new | gelu_pytorch_tanh),
//            tie_word_embeddings (true). Biases on every linear, LayerNorm, learned positions.
//   llama:   vocab_size, hidden_size, num_hidden_layers, num_attention_heads,
//            num_key_value_heads (= heads), intermediate_size, max_position_embeddings,
//            head_dim (hidden_size / heads), rms_norm_eps (1e-6), rope_theta (1e4), rope_scaling,
//            tie_word_embeddings (false), attention_bias (false; q, k, v and o), mlp_bias (false),
//            hidden_act (silu).
//   mistral: as llama, but no biases at all, num_key_value_heads defaults to 8 (MistralConfig),
//            and "sliding_window" (null = none) becomes ModelConfig::sliding_window.
//   qwen2:   as llama; q/k/v biases always, o_proj never; no head_dim key.
//   qwen3:   as llama plus qk_norm; head_dim is required; attention_bias (false) on q, k, v and o.
//   qwen2/qwen3 with "use_sliding_window": true are rejected (per-layer windows are not modelled).
//   rope_scaling: null, or {"rope_type" (or "type"): "default" | "linear" (factor) | "llama3"
//            (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings)}.
//   bos_token_id / eos_token_id: integer or list of integers (the first is taken), in [0, vocab).
//
// Limits (beyond them the config is rejected, so that parameter and FLOP counts fit in int64):
//   hidden_size <= 131072, intermediate_size <= 1048576, num_layers <= 16384, vocab <= 16777216,
//   heads and kv heads <= 16384, head_dim <= 16384 (heads*head_dim <= 262144),
//   max_position_embeddings <= 2^32, text <= 1 MiB.
//
// Errors are INVALID_ARGUMENT with one line naming the origin and the JSON field path:
//   config.json: field "num_attention_heads": missing
//   config.json: field "rope_scaling.factor": must be a positive number (got "8")
//   config.json: field "model_type": unknown model_type "bert" (supported: gpt2, llama, mistral,
//   qwen2, qwen3, qwen3_moe, mixtral)
//
// Thread-safe: pure functions (LoadModelConfig reads the file system).
#ifndef MOBIUS_COMMON_MODEL_MODEL_CONFIG_PARSE_H_
#define MOBIUS_COMMON_MODEL_MODEL_CONFIG_PARSE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/model/model_config.h"

namespace mobius::model {

// The limits above, shared by the parser and ValidateModelConfig.
inline constexpr int64_t kMaxConfigJsonBytes = int64_t{1} << 20;
inline constexpr int64_t kMaxHiddenSize = int64_t{1} << 17;
inline constexpr int64_t kMaxIntermediateSize = int64_t{1} << 20;
inline constexpr int64_t kMaxLayers = int64_t{1} << 14;
inline constexpr int64_t kMaxVocabSize = int64_t{1} << 24;
inline constexpr int64_t kMaxHeads = int64_t{1} << 14;
inline constexpr int64_t kMaxHeadDim = int64_t{1} << 14;
inline constexpr int64_t kMaxAttentionWidth = int64_t{1} << 18;  // heads * head_dim
inline constexpr int64_t kMaxPositions = int64_t{1} << 32;
inline constexpr int64_t kMaxExperts = int64_t{1} << 12;

// Parses config.json text. `origin` names the source in error messages (a path or "config.json").
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text, absl::string_view origin);

// Reads `path_or_dir` (a config.json file, or a model directory holding config.json) and parses it
// with the file's path as origin. NOT_FOUND / PERMISSION_DENIED when the file cannot be read.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path_or_dir);

// Checks a ModelConfig built in code (the parser's result always passes): positive sizes within the
// limits above, heads divisible by kv heads, even head_dim for RoPE, token ids inside the vocab.
// INVALID_ARGUMENT naming the ModelConfig member ("ModelConfig.num_kv_heads: ...").
absl::Status ValidateModelConfig(const ModelConfig& config);

}  // namespace mobius::model

#endif  // MOBIUS_COMMON_MODEL_MODEL_CONFIG_PARSE_H_
