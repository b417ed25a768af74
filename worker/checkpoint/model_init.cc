#include "worker/checkpoint/model_init.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/model/config_json.h"
#include "common/model/family.h"
#include "common/model/model_config_parse.h"
#include "common/numeric/bf16.h"
#include "common/status_macros.h"

namespace mobius::checkpoint {
namespace {

using model::Family;
using model::ModelConfig;
using Json = nlohmann::ordered_json;

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

Json TokenId(int64_t id) { return id >= 0 ? Json(id) : Json(nullptr); }

}  // namespace

uint64_t TensorSeed(uint64_t seed, const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  uint64_t z = seed ^ h;  // SplitMix64 finaliser: nearby seeds give unrelated streams
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

absl::StatusOr<Family> ParseFamily(absl::string_view name) {
  if (const model::FamilyDescriptor* family = model::FindFamily(name)) return family->family;
  return absl::InvalidArgumentError(absl::StrCat("unknown model family \"", name,
                                                 "\" (supported: ", model::SupportedModelTypes(),
                                                 ")"));
}

absl::StatusOr<ModelConfig> PresetConfig(Family family, absl::string_view preset,
                                         const SizeOverrides& o) {
  const model::FamilyDescriptor& d = model::FamilyOf(family);
  const std::string prefix = absl::StrCat(d.model_type, "-");
  if (absl::StartsWith(preset, prefix)) preset.remove_prefix(prefix.size());
  const model::FamilyPreset* p = nullptr;
  std::string known;
  for (const model::FamilyPreset& candidate : d.presets) {
    if (candidate.name == preset) p = &candidate;
    absl::StrAppend(&known, known.empty() ? "" : ", ", candidate.name);
  }
  if (p == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown preset \"", preset, "\" for ",
                                                   d.model_type, " (known: ", known, ")"));
  }
  ModelConfig c;
  c.family = family;
  c.model_type = d.model_type;
  c.num_layers = o.layers.value_or(p->layers);
  c.hidden_size = o.hidden.value_or(p->hidden);
  c.num_heads = o.heads.value_or(p->heads);
  const int64_t default_kv = d.kv_heads_follow_heads ? c.num_heads : p->kv_heads;
  c.num_kv_heads = o.kv_heads.value_or(default_kv);
  const bool sizes_changed = o.hidden.has_value() || o.heads.has_value();
  const int64_t derived_hd = c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
  c.head_dim = o.head_dim.value_or(sizes_changed ? derived_hd : p->head_dim);
  c.intermediate_size = o.intermediate.value_or(p->intermediate);
  c.vocab_size = o.vocab.value_or(p->vocab);
  c.max_position_embeddings = o.max_positions.value_or(p->positions);
  d.set_defaults(c);
  if (o.experts || o.experts_per_token || o.expert_intermediate) {
    if (!c.moe.enabled()) {
      return absl::InvalidArgumentError(absl::StrCat(
          d.model_type, " is not a mixture of experts: --experts, --experts_per_token and "
          "--expert_intermediate apply to qwen3_moe and mixtral"));
    }
    if (o.expert_intermediate && c.family == Family::kMixtral) {
      return absl::InvalidArgumentError(
          "mixtral: the experts are --intermediate wide (no --expert_intermediate)");
    }
    c.moe.num_experts = o.experts.value_or(c.moe.num_experts);
    c.moe.experts_per_token = o.experts_per_token.value_or(c.moe.experts_per_token);
    c.moe.expert_intermediate_size =
        o.expert_intermediate.value_or(c.moe.expert_intermediate_size);
  }
  if (d.check_generated != nullptr) MOBIUS_RETURN_IF_ERROR(d.check_generated(c));
  MOBIUS_RETURN_IF_ERROR(model::ValidateModelConfig(c));
  MOBIUS_RETURN_IF_ERROR(reference::ValidateConfig(c));
  // The parser derives what a loader will see; returning its result keeps the two in step.
  return model::ParseModelConfig(ModelConfigJson(c, io::DType::kBF16), "generated config.json");
}

std::string ModelConfigJson(const ModelConfig& c, io::DType dtype) {
  return model::ModelConfigJson(c, dtype == io::DType::kBF16 ? "bfloat16" : "float32");
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
  // The residual projections the family scales at init (GPT-2: attn.c_proj and mlp.c_proj).
  const model::FamilyDescriptor& family = model::FamilyOf(config.family);
  const bool scale_residual = family.scale_residual_init;
  const model::BlockTensorNames& block = family.tensors.block;
  const std::string o_suffix = absl::StrCat(".", block.o, ".weight");
  const std::string proj_suffix =
      block.proj != nullptr ? absl::StrCat(".", block.proj, ".weight") : o_suffix;
  for (auto& [name, tensor] : params.tensors) {
    if (absl::EndsWith(name, ".bias")) continue;  // zeros
    if (tensor.shape.size() == 1) {               // every 1-D weight is a norm scale
      for (float& x : tensor.data) x = 1.0f;
      continue;
    }
    const bool residual_proj = scale_residual && (absl::EndsWith(name, o_suffix) ||
                                                  absl::EndsWith(name, proj_suffix));
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
  // gpt-oss: each expert tensor kind written as one tensor of every expert, as transformers does.
  const TensorShapes order =
      model::FuseExpertTensors(config, reference::ParameterShapes(config));
  MOBIUS_ASSIGN_OR_RETURN(const reference::Parameters joined,
                          reference::JoinFusedTensors(config, params));
  MOBIUS_ASSIGN_OR_RETURN(std::vector<std::string> files,
                          WriteTensorSet(dir, "model", joined, order, options.dtype,
                                         options.max_shard_bytes));
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

namespace {

// config.json (validated) and a reader of the model's tensors, checked against its names and
// shapes.
struct OpenModel {
  model::ModelConfig config;
  TensorShapes shapes;
  std::unique_ptr<TensorSetReader> reader;
};
absl::StatusOr<OpenModel> Open(const std::string& dir) {
  OpenModel m;
  MOBIUS_ASSIGN_OR_RETURN(m.config, model::LoadModelConfig(dir));
  MOBIUS_RETURN_IF_ERROR(reference::ValidateConfig(m.config));
  m.shapes = reference::ParameterShapes(m.config);
  MOBIUS_ASSIGN_OR_RETURN(m.reader, TensorSetReader::Open(dir, "model", m.shapes, std::nullopt,
                                                          model::FusedExpertTensors(m.config)));
  return m;
}

}  // namespace

absl::StatusOr<LoadedModel> ReadModelDirectory(const std::string& dir) {
  MOBIUS_ASSIGN_OR_RETURN(OpenModel m, Open(dir));
  LoadedModel loaded;
  loaded.config = std::move(m.config);
  TensorSetReader* reader = m.reader.get();
  for (const auto& [name, shape] : m.shapes) {
    reference::Tensor& t = loaded.params.tensors[name];
    t.shape = shape;
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    t.data.resize(static_cast<size_t>(numel));
    reader->ReadF32(name, t.data.data());
    if (std::optional<numeric::Nf4Tensor> nf4 = reader->ReadNf4(name)) {
      loaded.nf4.emplace(name, *std::move(nf4));
    }
  }
  return loaded;
}

absl::StatusOr<LoadedModelBf16> ReadModelDirectoryBf16(const std::string& dir) {
  MOBIUS_ASSIGN_OR_RETURN(OpenModel m, Open(dir));
  LoadedModelBf16 loaded;
  loaded.config = std::move(m.config);
  TensorSetReader* reader = m.reader.get();
  constexpr int64_t kSlice = int64_t{1} << 20;
  std::vector<float> slice(static_cast<size_t>(kSlice));  // one allocation for the whole read
  for (const auto& [name, shape] : m.shapes) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    std::vector<uint16_t>& bits = loaded.tensors[name];
    bits.resize(static_cast<size_t>(numel));
    for (int64_t done = 0; done < numel; done += kSlice) {
      const int64_t n = std::min(kSlice, numel - done);
      reader->ReadF32(name, done, n, slice.data());
      numeric::Fp32ToBf16(slice.data(), bits.data() + done, static_cast<size_t>(n));
    }
    if (reader->quantized(name) != nullptr && reader->ReadNf4(name).has_value()) {
      loaded.nf4_names.insert(name);
    }
  }
  return loaded;
}

}  // namespace mobius::checkpoint
