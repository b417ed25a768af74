#include "worker/reference/parameters.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/family.h"
#include "common/model/layer_units.h"

namespace mobius::reference {
namespace {

using model::ModelConfig;

// The family's tensor names (common/model/family.h).
const model::TensorNames& Names(const ModelConfig& config) {
  return model::FamilyOf(config.family).tensors;
}

// A fused q/k/v projection (GPT-2's c_attn) instead of q, k, v.
bool HasFusedQkv(const ModelConfig& config) { return Names(config).block.qkv != nullptr; }

std::string IfPresent(bool present, const std::string& name) { return present ? name : ""; }

// "<module>.weight" and, when `bias`, "<module>.bias" of block `prefix`; empty when no module.
void Linear(const std::string& prefix, const char* module, bool bias, std::string* weight,
            std::string* bias_name) {
  if (module == nullptr) return;
  *weight = absl::StrCat(prefix, module, ".weight");
  *bias_name = IfPresent(bias, absl::StrCat(prefix, module, ".bias"));
}

LayerNames BlockNames(const ModelConfig& config, int64_t layer) {
  const model::TensorNames& names = Names(config);
  const model::BlockTensorNames& b = names.block;
  const std::string p = absl::StrCat(names.layer_prefix, layer, ".");
  const bool norm_bias = config.norm == model::NormKind::kLayerNorm;
  const bool gelu = config.mlp == model::MlpKind::kGeluTanh;
  LayerNames n;
  Linear(p, b.norm1, norm_bias, &n.norm1_weight, &n.norm1_bias);
  if (b.qkv != nullptr) {
    Linear(p, b.qkv, config.attention_bias, &n.qkv_weight, &n.qkv_bias);
  } else {
    Linear(p, b.q, config.attention_bias, &n.q_weight, &n.q_bias);
    Linear(p, b.k, config.attention_bias, &n.k_weight, &n.k_bias);
    Linear(p, b.v, config.attention_bias, &n.v_weight, &n.v_bias);
  }
  if (config.qk_norm) {
    n.q_norm = absl::StrCat(p, b.q_norm, ".weight");
    n.k_norm = absl::StrCat(p, b.k_norm, ".weight");
  }
  Linear(p, b.o, config.attention_output_bias, &n.o_weight, &n.o_bias);
  if (config.attention_sinks) n.sinks = p + b.sinks;
  Linear(p, b.norm2, norm_bias, &n.norm2_weight, &n.norm2_bias);
  if (config.moe.IsMoeLayer(layer) &&
      config.moe.expert_mlp == model::MoeConfig::ExpertMlp::kClampedSwiGlu) {
    Linear(p, b.moe_router, config.moe.router_bias, &n.router_weight, &n.router_bias);
    for (int64_t e = 0; e < config.moe.num_experts; ++e) {
      const std::string x = absl::StrCat(p, b.moe_experts, ".", e, ".");
      LayerNames::Expert ex;
      Linear(x, b.moe_gate_up, true, &ex.gate_up_weight, &ex.gate_up_bias);
      Linear(x, b.moe_down, true, &ex.down_weight, &ex.down_bias);
      n.experts.push_back(std::move(ex));
    }
  } else if (config.moe.IsMoeLayer(layer)) {
    Linear(p, b.moe_router, config.moe.router_bias, &n.router_weight, &n.router_bias);
    for (int64_t e = 0; e < config.moe.num_experts; ++e) {
      const std::string x = absl::StrCat(p, b.moe_experts, ".", e, ".");
      LayerNames::Expert ex;
      ex.gate_weight = absl::StrCat(x, b.moe_gate, ".weight");
      ex.up_weight = absl::StrCat(x, b.moe_up, ".weight");
      ex.down_weight = absl::StrCat(x, b.moe_down, ".weight");
      n.experts.push_back(std::move(ex));
    }
  } else if (gelu) {
    Linear(p, b.fc, config.mlp_bias, &n.fc_weight, &n.fc_bias);
    Linear(p, b.proj, config.mlp_bias, &n.proj_weight, &n.proj_bias);
  } else {
    Linear(p, b.gate, config.mlp_bias, &n.gate_weight, &n.gate_bias);
    Linear(p, b.up, config.mlp_bias, &n.up_weight, &n.up_bias);
    Linear(p, b.down, config.mlp_bias, &n.down_weight, &n.down_bias);
  }
  return n;
}

[[noreturn]] void DieMissing(const std::string& name) {
  std::fprintf(stderr, "reference::Parameters: no tensor named '%s'\n", name.c_str());
  std::abort();
}

// Standard normal samples from Box-Muller over mt19937_64, identical on every standard library
// (std::normal_distribution is implementation-defined).
class Normal {
 public:
  explicit Normal(uint64_t seed) : engine_(seed) {}
  float Next() {
    const double u1 = (static_cast<double>(engine_() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(engine_() >> 11) * 0x1.0p-53;          // [0, 1)
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                              std::cos(2.0 * std::numbers::pi * u2));
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace

Tensor& Parameters::at(const std::string& name) {
  auto it = tensors.find(name);
  if (it == tensors.end()) DieMissing(name);
  return it->second;
}

const Tensor& Parameters::at(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) DieMissing(name);
  return it->second;
}

float* Parameters::optional_data(const std::string& name) {
  return name.empty() ? nullptr : data(name);
}

const float* Parameters::optional_data(const std::string& name) const {
  return name.empty() ? nullptr : data(name);
}

absl::Status ValidateConfig(const ModelConfig& c) {
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 ||
      c.num_kv_heads <= 0 || c.head_dim <= 0 || c.intermediate_size <= 0) {
    return absl::InvalidArgumentError(
        "model config: vocab_size, hidden_size, num_layers, num_heads, num_kv_heads, head_dim "
        "and intermediate_size must all be positive");
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model config: num_heads ", c.num_heads,
                                                   " is not a multiple of num_kv_heads ",
                                                   c.num_kv_heads));
  }
  if (c.position == model::PositionKind::kRope && c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError("model config: RoPE needs an even head_dim");
  }
  if (c.position == model::PositionKind::kLearned && c.max_position_embeddings <= 0) {
    return absl::InvalidArgumentError(
        "model config: learned positions need max_position_embeddings");
  }
  if (c.rope_scaling.type != model::RopeScaling::Type::kNone && c.rope_scaling.factor <= 0) {
    return absl::InvalidArgumentError("model config: rope_scaling.factor must be positive");
  }
  if (c.rope_scaling.type == model::RopeScaling::Type::kLlama3 &&
      (c.rope_scaling.original_max_position_embeddings <= 0 ||
       c.rope_scaling.high_freq_factor == c.rope_scaling.low_freq_factor)) {
    return absl::InvalidArgumentError(
        "model config: llama3 rope_scaling needs original_max_position_embeddings and distinct "
        "low/high_freq_factor");
  }
  if (HasFusedQkv(c)) {
    if (c.norm != model::NormKind::kLayerNorm || c.mlp != model::MlpKind::kGeluTanh ||
        c.position != model::PositionKind::kLearned || c.qk_norm) {
      return absl::UnimplementedError(
          "reference model: GPT-2 tensors need LayerNorm, GELU MLP, learned positions, no qk_norm");
    }
    if (c.num_kv_heads != c.num_heads || c.num_heads * c.head_dim != c.hidden_size) {
      return absl::InvalidArgumentError(
          "model config: GPT-2's fused c_attn needs num_kv_heads == num_heads and "
          "num_heads * head_dim == hidden_size");
    }
  } else if (c.norm != model::NormKind::kRmsNorm || c.mlp != model::MlpKind::kSwiGlu ||
             c.position != model::PositionKind::kRope) {
    return absl::UnimplementedError(
        "reference model: Llama-family tensors need RMSNorm, SwiGLU and RoPE");
  }
  if (c.moe.enabled() &&
      (c.moe.experts_per_token <= 0 || c.moe.experts_per_token > c.moe.num_experts ||
       c.moe.expert_intermediate_size <= 0 || c.moe.sparse_step <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: a mixture of experts needs 0 < num_experts_per_tok (",
        c.moe.experts_per_token, ") <= num_experts (", c.moe.num_experts,
        "), a positive expert width (", c.moe.expert_intermediate_size,
        ") and a positive decoder_sparse_step (", c.moe.sparse_step, ")"));
  }
  return absl::OkStatus();
}

ModelNames ParameterNames(const ModelConfig& config) {
  const model::TensorNames& family = Names(config);
  ModelNames names;
  names.layout = family.in_out_layout ? WeightLayout::kInOut : WeightLayout::kOutIn;
  names.token_embedding = family.token_embedding;
  if (config.position == model::PositionKind::kLearned) {
    names.position_embedding = family.position_embedding;
  }
  for (int64_t l = 0; l < config.num_layers; ++l) names.layers.push_back(BlockNames(config, l));
  names.final_norm_weight = absl::StrCat(family.final_norm, ".weight");
  names.final_norm_bias = IfPresent(config.norm == model::NormKind::kLayerNorm,
                                    absl::StrCat(family.final_norm, ".bias"));
  names.lm_head = config.tie_word_embeddings ? names.token_embedding : family.lm_head;
  return names;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> ParameterShapes(
    const ModelConfig& config) {
  const ModelNames names = ParameterNames(config);
  const int64_t C = config.hidden_size, V = config.vocab_size, I = config.intermediate_size;
  const int64_t q_dim = config.num_heads * config.head_dim;
  const int64_t kv_dim = config.num_kv_heads * config.head_dim;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  // A weight mapping `in` features to `out` features, in the checkpoint's layout.
  auto weight = [&](const std::string& name, int64_t in, int64_t out) {
    if (name.empty()) return;
    if (names.layout == WeightLayout::kInOut) {
      shapes.push_back({name, {in, out}});
    } else {
      shapes.push_back({name, {out, in}});
    }
  };
  auto vec = [&](const std::string& name, int64_t n) {
    if (!name.empty()) shapes.push_back({name, {n}});
  };
  shapes.push_back({names.token_embedding, {V, C}});
  if (!names.position_embedding.empty()) {
    shapes.push_back({names.position_embedding, {config.max_position_embeddings, C}});
  }
  for (const LayerNames& n : names.layers) {
    vec(n.norm1_weight, C);
    vec(n.norm1_bias, C);
    weight(n.qkv_weight, C, q_dim + 2 * kv_dim);
    vec(n.qkv_bias, q_dim + 2 * kv_dim);
    weight(n.q_weight, C, q_dim);
    vec(n.q_bias, q_dim);
    weight(n.k_weight, C, kv_dim);
    vec(n.k_bias, kv_dim);
    weight(n.v_weight, C, kv_dim);
    vec(n.v_bias, kv_dim);
    vec(n.q_norm, config.head_dim);
    vec(n.k_norm, config.head_dim);
    weight(n.o_weight, q_dim, C);
    vec(n.o_bias, C);
    vec(n.sinks, config.num_heads);
    vec(n.norm2_weight, C);
    vec(n.norm2_bias, C);
    weight(n.fc_weight, C, I);
    vec(n.fc_bias, I);
    weight(n.proj_weight, I, C);
    vec(n.proj_bias, C);
    weight(n.gate_weight, C, I);
    vec(n.gate_bias, I);
    weight(n.up_weight, C, I);
    vec(n.up_bias, I);
    weight(n.down_weight, I, C);
    vec(n.down_bias, C);
    weight(n.router_weight, C, config.moe.num_experts);
    vec(n.router_bias, config.moe.num_experts);
    const int64_t Ie = config.moe.expert_intermediate_size;
    for (const LayerNames::Expert& e : n.experts) {
      if (!e.gate_up_weight.empty()) {  // clamped SwiGLU experts: [in, out] with biases
        shapes.push_back({e.gate_up_weight, {C, 2 * Ie}});
        vec(e.gate_up_bias, 2 * Ie);
        shapes.push_back({e.down_weight, {Ie, C}});
        vec(e.down_bias, C);
        continue;
      }
      weight(e.gate_weight, C, Ie);
      weight(e.up_weight, C, Ie);
      weight(e.down_weight, Ie, C);
    }
  }
  vec(names.final_norm_weight, C);
  vec(names.final_norm_bias, C);
  if (!config.tie_word_embeddings) shapes.push_back({names.lm_head, {V, C}});
  return shapes;
}

Parameters ZeroParameters(const ModelConfig& config) {
  Parameters params;
  for (const auto& [name, shape] : ParameterShapes(config)) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    params.tensors[name] = Tensor{shape, std::vector<float>(numel, 0.0f)};
  }
  return params;
}

Parameters InitParameters(const ModelConfig& config, uint64_t seed) {
  Parameters params = ZeroParameters(config);
  Normal normal(seed);
  // Declaration order, not map order, decides which samples a tensor gets.
  for (const auto& [name, shape] : ParameterShapes(config)) {
    Tensor& t = params.at(name);
    const bool is_bias = name.ends_with(".bias");
    // Every other 1-D weight is a norm scale, but attention sinks (logits: N(0, 0.02) as in HF).
    const bool is_norm = shape.size() == 1 && !is_bias && !name.ends_with(".sinks");
    for (float& x : t.data) x = is_bias ? 0.0f : is_norm ? 1.0f : 0.02f * normal.Next();
  }
  return params;
}

absl::Status ValidateParameters(const ModelConfig& config, const Parameters& params) {
  const auto shapes = ParameterShapes(config);
  for (const auto& [name, shape] : shapes) {
    auto it = params.tensors.find(name);
    if (it == params.tensors.end()) {
      return absl::InvalidArgumentError(absl::StrCat("parameters: missing tensor ", name));
    }
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    if (it->second.shape != shape || it->second.numel() != numel) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameters: tensor ", name, " has shape [", absl::StrJoin(it->second.shape, ","),
          "] and ", it->second.numel(), " elements, expected [", absl::StrJoin(shape, ","), "]"));
    }
  }
  if (params.tensors.size() != shapes.size()) {
    for (const auto& [name, tensor] : params.tensors) {
      bool known = false;
      for (const auto& entry : shapes) known = known || entry.first == name;
      if (!known) {
        return absl::InvalidArgumentError(absl::StrCat("parameters: unexpected tensor ", name));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status SplitFusedTensors(const ModelConfig& config, Parameters* params) {
  for (const model::FusedTensor& f : model::FusedExpertTensors(config)) {
    auto it = params->tensors.find(f.name);
    if (it == params->tensors.end()) continue;
    Tensor whole = std::move(it->second);
    params->tensors.erase(it);
    if (whole.shape != f.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", f.name, " has shape [", absl::StrJoin(whole.shape, ", "), "], want [",
          absl::StrJoin(f.shape, ", "), "]"));
    }
    const std::vector<int64_t> part_shape(f.shape.begin() + 1, f.shape.end());
    const int64_t part = whole.numel() / f.shape[0];
    for (size_t e = 0; e < f.parts.size(); ++e) {
      Tensor& t = params->tensors[f.parts[e]];
      t.shape = part_shape;
      t.data.assign(whole.data.begin() + e * part, whole.data.begin() + (e + 1) * part);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Parameters> JoinFusedTensors(const ModelConfig& config, Parameters params) {
  for (const model::FusedTensor& f : model::FusedExpertTensors(config)) {
    int64_t present = 0;
    for (const std::string& part : f.parts) present += params.tensors.count(part);
    if (present == 0) continue;
    if (present != static_cast<int64_t>(f.parts.size())) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", f.name, ": ", present, " of ",
                                                     f.parts.size(), " experts' parts present"));
    }
    Tensor whole;
    whole.shape = f.shape;
    for (const std::string& part : f.parts) {
      std::vector<float>& d = params.tensors.at(part).data;
      whole.data.insert(whole.data.end(), d.begin(), d.end());
      params.tensors.erase(part);
    }
    params.tensors[f.name] = std::move(whole);
  }
  return params;
}

}  // namespace mobius::reference
