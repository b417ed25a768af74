#include "worker/checkpoint/model_init.h"

#include <unistd.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/model/model_config_parse.h"
#include "common/status_macros.h"

namespace mobius::checkpoint {
namespace {

using model::Family;
using model::ModelConfig;
using Json = nlohmann::ordered_json;

struct Preset {
  Family family;
  const char* name;
  int64_t layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, positions;
};

// The table of model_init.h.
constexpr Preset kPresets[] = {
    {Family::kGpt2, "tiny", 2, 64, 4, 4, 16, 256, 512, 256},
    {Family::kGpt2, "small", 12, 768, 12, 12, 64, 3072, 50257, 1024},
    {Family::kLlama, "tiny", 2, 64, 4, 2, 16, 192, 512, 256},
    {Family::kLlama, "small", 12, 768, 12, 4, 64, 2048, 32000, 2048},
    {Family::kMistral, "tiny", 2, 64, 4, 2, 16, 192, 512, 256},
    {Family::kMistral, "small", 12, 768, 12, 4, 64, 2048, 32768, 4096},
    {Family::kQwen2, "tiny", 2, 64, 4, 2, 16, 192, 512, 256},
    {Family::kQwen2, "small", 12, 768, 12, 2, 64, 2048, 32000, 2048},
    {Family::kQwen3, "tiny", 2, 64, 4, 2, 32, 192, 512, 256},
    {Family::kQwen3, "small", 12, 768, 12, 4, 128, 2048, 32000, 2048},
};

// The family's fixed math and defaults (what its transformers config class implies).
void SetFamilyDefaults(ModelConfig& c) {
  c.model_type = model::FamilyName(c.family);
  const bool gpt2 = c.family == Family::kGpt2;
  const bool qwen = c.family == Family::kQwen2 || c.family == Family::kQwen3;
  c.norm = gpt2 ? model::NormKind::kLayerNorm : model::NormKind::kRmsNorm;
  c.mlp = gpt2 ? model::MlpKind::kGeluTanh : model::MlpKind::kSwiGlu;
  c.position = gpt2 ? model::PositionKind::kLearned : model::PositionKind::kRope;
  c.norm_eps = gpt2 ? 1e-5 : qwen ? 1e-6 : 1e-5;
  c.rope_theta = gpt2 || c.family == Family::kLlama ? 10000.0 : 1000000.0;
  c.tie_word_embeddings = gpt2 || qwen;
  c.attention_bias = gpt2 || c.family == Family::kQwen2;
  c.attention_output_bias = gpt2;
  c.mlp_bias = gpt2;
  c.qk_norm = c.family == Family::kQwen3;
  const bool last_token_ids = gpt2 || qwen;
  c.bos_token_id = last_token_ids ? c.vocab_size - 1 : 1;
  c.eos_token_id = last_token_ids ? c.vocab_size - 1 : 2;
}

// Standard normal samples: Box-Muller over mt19937_64, identical on every standard library.
class Normal {
 public:
  explicit Normal(uint64_t seed) : engine_(seed) {}
  double Next() {
    const double u1 = (static_cast<double>(engine_() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(engine_() >> 11) * 0x1.0p-53;          // [0, 1)
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 engine_;
};

uint64_t TensorSeed(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  uint64_t z = seed ^ h;  // SplitMix64 finaliser: nearby seeds give unrelated streams
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

Json TokenId(int64_t id) { return id >= 0 ? Json(id) : Json(nullptr); }

Json RopeScalingJson(const model::RopeScaling& s) {
  switch (s.type) {
    case model::RopeScaling::Type::kNone:
      return nullptr;
    case model::RopeScaling::Type::kLinear:
      return {{"rope_type", "linear"}, {"factor", s.factor}};
    case model::RopeScaling::Type::kLlama3:
      return {{"rope_type", "llama3"},
              {"factor", s.factor},
              {"low_freq_factor", s.low_freq_factor},
              {"high_freq_factor", s.high_freq_factor},
              {"original_max_position_embeddings", s.original_max_position_embeddings}};
  }
  return nullptr;
}

const char* Architecture(Family family) {
  switch (family) {
    case Family::kGpt2: return "GPT2LMHeadModel";
    case Family::kLlama: return "LlamaForCausalLM";
    case Family::kMistral: return "MistralForCausalLM";
    case Family::kQwen2: return "Qwen2ForCausalLM";
    case Family::kQwen3: return "Qwen3ForCausalLM";
  }
  return "";
}

}  // namespace

absl::StatusOr<Family> ParseFamily(absl::string_view name) {
  for (Family f : {Family::kGpt2, Family::kLlama, Family::kMistral, Family::kQwen2,
                   Family::kQwen3}) {
    if (name == model::FamilyName(f)) return f;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model family \"", name, "\" (supported: gpt2, llama, mistral, qwen2, qwen3)"));
}

absl::StatusOr<ModelConfig> PresetConfig(Family family, absl::string_view preset,
                                         const SizeOverrides& o) {
  const std::string prefix = absl::StrCat(model::FamilyName(family), "-");
  if (absl::StartsWith(preset, prefix)) preset.remove_prefix(prefix.size());
  const Preset* p = nullptr;
  std::string known;
  for (const Preset& candidate : kPresets) {
    if (candidate.family != family) continue;
    if (candidate.name == preset) p = &candidate;
    absl::StrAppend(&known, known.empty() ? "" : ", ", candidate.name);
  }
  if (p == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown preset \"", preset, "\" for ",
                                                   model::FamilyName(family), " (known: ", known,
                                                   ")"));
  }
  ModelConfig c;
  c.family = family;
  c.num_layers = o.layers.value_or(p->layers);
  c.hidden_size = o.hidden.value_or(p->hidden);
  c.num_heads = o.heads.value_or(p->heads);
  const int64_t default_kv = family == Family::kGpt2 ? c.num_heads : p->kv_heads;
  c.num_kv_heads = o.kv_heads.value_or(default_kv);
  const bool sizes_changed = o.hidden.has_value() || o.heads.has_value();
  const int64_t derived_hd = c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
  c.head_dim = o.head_dim.value_or(sizes_changed ? derived_hd : p->head_dim);
  c.intermediate_size = o.intermediate.value_or(p->intermediate);
  c.vocab_size = o.vocab.value_or(p->vocab);
  c.max_position_embeddings = o.max_positions.value_or(p->positions);
  SetFamilyDefaults(c);
  if (family == Family::kGpt2 && c.num_kv_heads != c.num_heads) {
    return absl::InvalidArgumentError("gpt2 has no grouped-query attention: kv_heads must equal heads");
  }
  if (family == Family::kQwen2 && c.num_heads * c.head_dim != c.hidden_size) {
    return absl::InvalidArgumentError("qwen2 has no head_dim field: heads x head_dim must equal hidden");
  }
  MOBIUS_RETURN_IF_ERROR(model::ValidateModelConfig(c));
  MOBIUS_RETURN_IF_ERROR(reference::ValidateConfig(c));
  // The parser derives what a loader will see; returning its result keeps the two in step.
  return model::ParseModelConfig(ModelConfigJson(c, io::DType::kBF16), "generated config.json");
}

std::string ModelConfigJson(const ModelConfig& c, io::DType dtype) {
  Json j = Json::object();
  j["architectures"] = {Architecture(c.family)};
  j["model_type"] = model::FamilyName(c.family);
  j["vocab_size"] = c.vocab_size;
  if (c.family == Family::kGpt2) {
    j["n_positions"] = c.max_position_embeddings;
    j["n_ctx"] = c.max_position_embeddings;
    j["n_embd"] = c.hidden_size;
    j["n_layer"] = c.num_layers;
    j["n_head"] = c.num_heads;
    j["n_inner"] = c.intermediate_size;
    j["activation_function"] = "gelu_new";
    j["layer_norm_epsilon"] = c.norm_eps;
    j["resid_pdrop"] = 0.0;
    j["embd_pdrop"] = 0.0;
    j["attn_pdrop"] = 0.0;
  } else {
    j["hidden_size"] = c.hidden_size;
    j["intermediate_size"] = c.intermediate_size;
    j["num_hidden_layers"] = c.num_layers;
    j["num_attention_heads"] = c.num_heads;
    j["num_key_value_heads"] = c.num_kv_heads;
    if (c.family != Family::kQwen2) j["head_dim"] = c.head_dim;
    j["hidden_act"] = "silu";
    j["max_position_embeddings"] = c.max_position_embeddings;
    j["rms_norm_eps"] = c.norm_eps;
    j["rope_theta"] = c.rope_theta;
    j["rope_scaling"] = RopeScalingJson(c.rope_scaling);
    j["attention_dropout"] = 0.0;
    if (c.family == Family::kLlama) {
      j["attention_bias"] = c.attention_bias;
      j["mlp_bias"] = c.mlp_bias;
      j["pretraining_tp"] = 1;
    } else if (c.family == Family::kQwen3) {
      j["attention_bias"] = c.attention_bias;
    }
    if (c.family == Family::kMistral) {
      j["sliding_window"] = c.sliding_window > 0 ? Json(c.sliding_window) : Json(nullptr);
    }
    if (c.family == Family::kQwen2 || c.family == Family::kQwen3) {
      j["use_sliding_window"] = false;
      j["sliding_window"] = nullptr;
      j["max_window_layers"] = c.num_layers;
    }
  }
  j["initializer_range"] = 0.02;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["bos_token_id"] = TokenId(c.bos_token_id);
  j["eos_token_id"] = TokenId(c.eos_token_id);
  j["use_cache"] = true;
  j["torch_dtype"] = dtype == io::DType::kBF16 ? "bfloat16" : "float32";
  return j.dump(2) + "\n";
}

std::string GenerationConfigJson(const ModelConfig& c) {
  Json j = {{"_from_model_config", true},
            {"bos_token_id", TokenId(c.bos_token_id)},
            {"eos_token_id", TokenId(c.eos_token_id)}};
  return j.dump(2) + "\n";
}

reference::Parameters InitModelParameters(const ModelConfig& config, uint64_t seed) {
  reference::Parameters params = reference::ZeroParameters(config);
  const double std_residual = 0.02 / std::sqrt(2.0 * static_cast<double>(config.num_layers));
  for (auto& [name, tensor] : params.tensors) {
    if (absl::EndsWith(name, ".bias")) continue;  // zeros
    if (tensor.shape.size() == 1) {               // every 1-D weight is a norm scale
      for (float& x : tensor.data) x = 1.0f;
      continue;
    }
    const bool residual_proj =
        config.family == Family::kGpt2 && absl::EndsWith(name, ".c_proj.weight");
    const double stddev = residual_proj ? std_residual : 0.02;
    Normal normal(TensorSeed(seed, name));
    for (float& x : tensor.data) x = static_cast<float>(stddev * normal.Next());
  }
  return params;
}

absl::Status WriteModelDirectory(const std::string& dir, const ModelConfig& config,
                                 const reference::Parameters& params,
                                 const WriteModelOptions& options) {
  MOBIUS_RETURN_IF_ERROR(reference::ValidateParameters(config, params));
  const std::string config_json =
      options.config_json.empty() ? ModelConfigJson(config, options.dtype) : options.config_json;
  MOBIUS_RETURN_IF_ERROR(WriteFileAtomically(dir + "/config.json", config_json));
  MOBIUS_ASSIGN_OR_RETURN(std::vector<std::string> files,
                          WriteTensorSet(dir, "model", params, reference::ParameterShapes(config),
                                         options.dtype, options.max_shard_bytes));
  // The other layout's entry point would shadow or confuse the one just written.
  const bool sharded = files.size() > 1;
  const std::string stale = dir + (sharded ? "/model.safetensors" : "/model.safetensors.index.json");
  if (unlink(stale.c_str()) != 0 && errno != ENOENT) {
    return MOBIUS_ERRNO_ERROR(absl::StrCat("remove stale ", stale));
  }
  if (options.generation_config) {
    MOBIUS_RETURN_IF_ERROR(
        WriteFileAtomically(dir + "/generation_config.json", GenerationConfigJson(config)));
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadedModel> ReadModelDirectory(const std::string& dir) {
  LoadedModel loaded;
  MOBIUS_ASSIGN_OR_RETURN(loaded.config, model::LoadModelConfig(dir));
  MOBIUS_RETURN_IF_ERROR(reference::ValidateConfig(loaded.config));
  MOBIUS_ASSIGN_OR_RETURN(loaded.params,
                          ReadTensorSet(dir, "model", reference::ParameterShapes(loaded.config),
                                        std::nullopt));
  return loaded;
}

}  // namespace mobius::checkpoint
