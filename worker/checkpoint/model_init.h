// Seeded, randomly initialised models written as Hugging Face model directories: the tiny models
// every test, benchmark and demo trains, and the config.json writer the checkpoint reuses.
//
//   MOBIUS_ASSIGN_OR_RETURN(ModelConfig config, PresetConfig(Family::kLlama, "tiny", {}));
//   reference::Parameters params = InitModelParameters(config, /*seed=*/1);
//   MOBIUS_RETURN_IF_ERROR(WriteModelDirectory("/tmp/llama-tiny", config, params, {}));
//
// Presets (vocab 512 for "tiny" unless overridden; pick the vocab of the tokenizer you will use),
// defaults and config.json text are the family's (common/model/family.h, families/<family>.cc):
//   family   preset  L   C    H   KV  head_dim  I     V      P     tied  notes
//   gpt2     tiny    2   64   4   4   16        256   512    256   yes   biases everywhere
//   gpt2     small   12  768  12  12  64        3072  50257  1024  yes   = GPT-2 124M
//   llama    tiny    2   64   4   2   16        192   512    256   no    GQA, untied lm_head
//   llama    small   12  768  12  4   64        2048  32000  2048  no
//   mistral  tiny    2   64   4   2   16        192   512    256   no    sliding_window null
//   mistral  small   12  768  12  4   64        2048  32768  4096  no
//   qwen2    tiny    2   64   4   2   16        192   512    256   yes   q/k/v biases
//   qwen2    small   12  768  12  2   64        2048  32000  2048  yes
//   qwen3    tiny    2   64   4   2   32        192   512    256   yes   qk_norm, heads*hd != C
//   qwen3    small   12  768  12  4   128       2048  32000  2048  yes
// "<family>-<preset>" (e.g. "llama-tiny") is accepted as well. Token ids: GPT-2 and Qwen use
// bos = eos = V - 1 (GPT-2's <|endoftext|> is its last token); Llama/Mistral bos 1, eos 2.
//
// Initialisation (transformers' _init_weights with initializer_range 0.02): matrices and
// embeddings ~ N(0, 0.02); GPT-2 additionally scales both c_proj weights (attention output and MLP
// output) to N(0, 0.02 / sqrt(2 L)), as GPT2PreTrainedModel does ("scale the weights of residual
// layers at initialization", GPT-2 paper); norm weights 1, biases 0.
// Deterministic on every platform: each tensor draws from its own std::mt19937_64 seeded with
// SplitMix64(seed ^ FNV-1a(name)), through our own Box-Muller (std::normal_distribution is
// implementation-defined), so a tensor's values depend only on (seed, name, shape).
//
// Thread-safety: pure functions (WriteModelDirectory writes the file system).
#ifndef MOBIUS_WORKER_CHECKPOINT_MODEL_INIT_H_
#define MOBIUS_WORKER_CHECKPOINT_MODEL_INIT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/numeric/nf4.h"
#include "absl/strings/string_view.h"
#include "common/model/model_config.h"
#include "worker/checkpoint/tensor_files.h"
#include "worker/io/safetensors.h"
#include "worker/reference/parameters.h"

namespace mobius::checkpoint {

// Explicit sizes that replace a preset's; unset fields keep the preset's value. Changing hidden or
// heads without head_dim recomputes head_dim = hidden / heads (qwen3: keeps the preset's ratio
// only when head_dim is given).
struct SizeOverrides {
  std::optional<int64_t> layers, hidden, heads, kv_heads, head_dim, intermediate, vocab,
      max_positions;
  // Mixtures of experts only (INVALID_ARGUMENT for a dense family): E, k, and (Qwen3-MoE) the
  // experts' width.
  std::optional<int64_t> experts, experts_per_token, expert_intermediate;
};

// The seed of one tensor's generator: SplitMix64(seed ^ FNV-1a(name)) (above).
uint64_t TensorSeed(uint64_t seed, const std::string& name);

// A model_type of the family table ("gpt2", "llama", ..., "qwen3_moe", "mixtral"); INVALID_ARGUMENT
// otherwise, listing them.
absl::StatusOr<model::Family> ParseFamily(absl::string_view name);

// The preset with the overrides applied, checked by model::ValidateModelConfig and
// reference::ValidateConfig. INVALID_ARGUMENT for an unknown preset (listing the known ones) or an
// inconsistent size ("heads 6 is not a multiple of kv_heads 4").
absl::StatusOr<model::ModelConfig> PresetConfig(model::Family family, absl::string_view preset,
                                                const SizeOverrides& overrides);

// The config.json text for `config`, with the real transformers field names and values of its
// family (architectures, model_type, sizes, eps, rope, biases, tie_word_embeddings, token ids,
// torch_dtype from `dtype`). ParseModelConfig of the result gives `config` back. Dropout
// probabilities are written as 0 so that transformers in train mode computes what we compute.
std::string ModelConfigJson(const model::ModelConfig& config, io::DType dtype);
// generation_config.json: bos/eos token ids.
std::string GenerationConfigJson(const model::ModelConfig& config);

// Freshly initialised parameters (see the header comment). REQUIRES:
// reference::ValidateConfig(config).ok().
reference::Parameters InitModelParameters(const model::ModelConfig& config, uint64_t seed);

struct WriteModelOptions {
  io::DType dtype = io::DType::kBF16;  // of model.safetensors; kF32 or kBF16
  bool generation_config = true;       // also write generation_config.json
  int64_t max_shard_bytes = kDefaultMaxShardBytes;
  // config.json to write verbatim instead of ModelConfigJson(config) (keeps fields ModelConfig
  // does not model, e.g. of a downloaded model being fine-tuned). Empty: generate.
  std::string config_json;
};

// Writes config.json, model.safetensors (or shards + index) and generation_config.json into the
// existing directory `dir`, each file atomically. A stale model.safetensors.index.json is removed
// when a single file is written (and vice versa: a stale model.safetensors when sharding), so the
// directory holds exactly one model. Other files (tokenizer.json, ...) are left alone.
absl::Status WriteModelDirectory(const std::string& dir, const model::ModelConfig& config,
                                 const reference::Parameters& params,
                                 const WriteModelOptions& options);

// config.json + the model's tensors of a Hugging Face directory, as fp32, checked against the
// config's names and shapes (INVALID_ARGUMENT naming the tensor).
// A bitsandbytes 4-bit checkpoint (bnb4bit.h) loads dequantised; the weights stored in QLoRA's
// exact NF4 are also kept as such in `nf4`, for an NF4 run to use without requantising.
struct LoadedModel {
  model::ModelConfig config;
  reference::Parameters params;
  std::map<std::string, numeric::Nf4Tensor> nf4;
};
absl::StatusOr<LoadedModel> ReadModelDirectory(const std::string& dir);

// The same, as bf16 bits: each tensor rounded to nearest even from the fp32 values
// ReadModelDirectory gives (so the bits equal Fp32ToBf16 of those), read tensor by tensor in
// 1 Mi-element slices. The peak is the bf16 copy plus one slice, 2 bytes/parameter, where the fp32
// read held 4 (generation, which computes in bf16, reads its model this way). `nf4_names`: the
// weights stored in QLoRA's exact NF4 (LoadedModel::nf4's keys; their bf16 values are those NF4
// codes dequantised).
struct LoadedModelBf16 {
  model::ModelConfig config;
  std::map<std::string, std::vector<uint16_t>> tensors;
  std::set<std::string> nf4_names;
};
absl::StatusOr<LoadedModelBf16> ReadModelDirectoryBf16(const std::string& dir);

}  // namespace mobius::checkpoint

#endif  // MOBIUS_WORKER_CHECKPOINT_MODEL_INIT_H_
