#include "common/model/layer_units.h"

#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model/family.h"
#include "common/model/model_config_parse.h"
#include "common/status_macros.h"

namespace mobius::model {
namespace {

ParamSpec Param(std::string name, std::vector<int64_t> shape, ParamRole role) {
  ParamSpec p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.num_elements = 1;
  for (int64_t d : p.shape) p.num_elements *= d;
  p.role = role;
  // Decay on what multiplies activations; none on norms and biases (see the header).
  p.weight_decay = role == ParamRole::kEmbedding || role == ParamRole::kMatmulWeight;
  return p;
}

// A linear layer: weight, then bias when present. `shape` is the weight's stored shape.
void AddLinear(std::vector<ParamSpec>& out, const std::string& prefix, std::vector<int64_t> shape,
               int64_t bias_size, bool bias) {
  out.push_back(Param(prefix + ".weight", std::move(shape), ParamRole::kMatmulWeight));
  if (bias) out.push_back(Param(prefix + ".bias", {bias_size}, ParamRole::kBias));
}

void AddNorm(std::vector<ParamSpec>& out, const std::string& prefix, int64_t size, NormKind kind) {
  out.push_back(Param(prefix + ".weight", {size}, ParamRole::kNormWeight));
  if (kind == NormKind::kLayerNorm) {
    out.push_back(Param(prefix + ".bias", {size}, ParamRole::kNormBias));
  }
}

int64_t AttentionWidth(const ModelConfig& c) { return c.num_heads * c.head_dim; }
int64_t KvWidth(const ModelConfig& c) { return c.num_kv_heads * c.head_dim; }

// A weight mapping `in` features to `out` features, as the family stores it.
std::vector<int64_t> WeightShape(const TensorNames& names, int64_t in, int64_t out) {
  if (names.in_out_layout) return {in, out};
  return {out, in};
}

// Block i's parameters in HF module order, named by the family (family.h).
std::vector<ParamSpec> Block(const ModelConfig& c, const TensorNames& names, int64_t i) {
  const BlockTensorNames& n = names.block;
  const int64_t C = c.hidden_size, I = c.intermediate_size;
  const int64_t A = AttentionWidth(c), K = KvWidth(c);
  const std::string p = absl::StrCat(names.layer_prefix, i, ".");
  std::vector<ParamSpec> out;
  auto linear = [&](const char* module, int64_t in, int64_t out_features, bool bias) {
    AddLinear(out, p + module, WeightShape(names, in, out_features), out_features, bias);
  };
  AddNorm(out, p + n.norm1, C, c.norm);
  if (n.qkv != nullptr) {
    linear(n.qkv, C, A + 2 * K, c.attention_bias);
  } else {
    linear(n.q, C, A, c.attention_bias);
    linear(n.k, C, K, c.attention_bias);
    linear(n.v, C, K, c.attention_bias);
  }
  linear(n.o, A, C, c.attention_output_bias);
  if (c.attention_sinks) {  // a logit per head; decayed, as Hugging Face's Trainer decays it
    out.push_back(Param(p + n.sinks, {c.num_heads}, ParamRole::kBias));
    out.back().weight_decay = true;
  }
  if (c.qk_norm) {
    AddNorm(out, p + n.q_norm, c.head_dim, NormKind::kRmsNorm);
    AddNorm(out, p + n.k_norm, c.head_dim, NormKind::kRmsNorm);
  }
  AddNorm(out, p + n.norm2, C, c.norm);
  if (c.moe.IsMoeLayer(i) && c.moe.expert_mlp == MoeConfig::ExpertMlp::kClampedSwiGlu) {
    // The router, then each expert's gate_up [C, 2I] and down [I, C] ([in, out]) with biases.
    const int64_t E = c.moe.num_experts, Ie = c.moe.expert_intermediate_size;
    linear(n.moe_router, C, E, c.moe.router_bias);
    for (int64_t e = 0; e < E; ++e) {
      const std::string x = absl::StrCat(p, n.moe_experts, ".", e, ".");
      AddLinear(out, x + n.moe_gate_up, {C, 2 * Ie}, 2 * Ie, true);
      out[out.size() - 2].expert = out.back().expert = e;
      AddLinear(out, x + n.moe_down, {Ie, C}, C, true);
      out[out.size() - 2].expert = out.back().expert = e;
    }
  } else if (c.moe.IsMoeLayer(i)) {  // the router, then each expert's gate, up, down (HF order)
    const int64_t E = c.moe.num_experts, Ie = c.moe.expert_intermediate_size;
    linear(n.moe_router, C, E, c.moe.router_bias);
    for (int64_t e = 0; e < E; ++e) {
      const std::string x = absl::StrCat(p, n.moe_experts, ".", e, ".");
      for (const auto& [module, in, out_features] :
           {std::tuple<const char*, int64_t, int64_t>{n.moe_gate, C, Ie}, {n.moe_up, C, Ie},
            {n.moe_down, Ie, C}}) {
        AddLinear(out, x + module, WeightShape(names, in, out_features), out_features, false);
        out.back().expert = e;
      }
    }
  } else if (c.mlp == MlpKind::kGeluTanh) {
    linear(n.fc, C, I, c.mlp_bias);
    linear(n.proj, I, C, c.mlp_bias);
  } else {
    linear(n.gate, C, I, c.mlp_bias);
    linear(n.up, C, I, c.mlp_bias);
    linear(n.down, I, C, c.mlp_bias);
  }
  return out;
}

int64_t SumElements(const std::vector<ParamSpec>& params, bool matmul_only) {
  int64_t n = 0;
  for (const ParamSpec& p : params) {
    if (!matmul_only || p.role == ParamRole::kMatmulWeight) n += p.num_elements;
  }
  return n;
}

int64_t NormStatsBytes(NormKind kind) { return kind == NormKind::kLayerNorm ? 8 : 4; }

}  // namespace

const char* UnitKindName(UnitKind kind) {
  switch (kind) {
    case UnitKind::kEmbedding: return "embedding";
    case UnitKind::kDecoderBlock: return "block";
    case UnitKind::kHead: return "head";
  }
  return "unknown";
}

int64_t LayerUnit::num_parameters() const { return SumElements(params, false); }

absl::StatusOr<ModelDescription> DescribeModel(const ModelConfig& config) {
  MOBIUS_RETURN_IF_ERROR(ValidateModelConfig(config));
  const ModelConfig& c = config;
  const TensorNames& names = FamilyOf(c.family).tensors;
  const int64_t C = c.hidden_size, V = c.vocab_size, L = c.num_layers;
  ModelDescription model;
  model.config = config;
  model.units.resize(L + 2);

  LayerUnit& embedding = model.units[0];
  embedding.index = 0;
  embedding.kind = UnitKind::kEmbedding;
  const std::string wte = names.token_embedding;
  embedding.params.push_back(Param(wte, {V, C}, ParamRole::kEmbedding));
  if (c.position == PositionKind::kLearned) {
    embedding.params.push_back(
        Param(names.position_embedding, {c.max_position_embeddings, C}, ParamRole::kEmbedding));
  }

  for (int64_t i = 0; i < L; ++i) {
    LayerUnit& block = model.units[i + 1];
    block.index = i + 1;
    block.kind = UnitKind::kDecoderBlock;
    block.layer = i;
    block.params = Block(c, names, i);
  }

  LayerUnit& head = model.units[L + 1];
  head.index = L + 1;
  head.kind = UnitKind::kHead;
  AddNorm(head.params, names.final_norm, C, c.norm);
  if (c.tie_word_embeddings) {
    head.shares_parameters_with_unit = 0;
    head.shared_params.push_back(Param(wte, {V, C}, ParamRole::kMatmulWeight));
  } else {
    head.params.push_back(Param(names.lm_head, {V, C}, ParamRole::kMatmulWeight));
  }
  return model;
}

int64_t TotalParameters(const ModelDescription& model) {
  int64_t n = 0;
  for (const LayerUnit& unit : model.units) n += unit.num_parameters();
  return n;
}

std::vector<FusedTensor> FusedExpertTensors(const ModelConfig& c) {
  std::vector<FusedTensor> out;
  if (c.moe.expert_mlp != MoeConfig::ExpertMlp::kClampedSwiGlu) return out;
  const TensorNames& names = FamilyOf(c.family).tensors;
  const BlockTensorNames& n = names.block;
  const int64_t E = c.moe.num_experts, C = c.hidden_size, Ie = c.moe.expert_intermediate_size;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (!c.moe.IsMoeLayer(i)) continue;
    const std::string x = absl::StrCat(names.layer_prefix, i, ".", n.moe_experts, ".");
    for (const auto& [module, in, out_features] :
         {std::tuple<const char*, int64_t, int64_t>{n.moe_gate_up, C, 2 * Ie}, {n.moe_down, Ie, C}}) {
      FusedTensor w{x + module, {E, in, out_features}, {}};
      FusedTensor b{x + module + "_bias", {E, out_features}, {}};
      for (int64_t e = 0; e < E; ++e) {
        w.parts.push_back(absl::StrCat(x, e, ".", module, ".weight"));
        b.parts.push_back(absl::StrCat(x, e, ".", module, ".bias"));
      }
      out.push_back(std::move(w));
      out.push_back(std::move(b));
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> FuseExpertTensors(
    const ModelConfig& config,
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& order) {
  const std::vector<FusedTensor> fused = FusedExpertTensors(config);
  if (fused.empty()) return order;
  std::map<std::string, std::pair<const FusedTensor*, int64_t>> part_of;  // part -> fused, index
  for (const FusedTensor& f : fused) {
    for (size_t e = 0; e < f.parts.size(); ++e) part_of[f.parts[e]] = {&f, e};
  }
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const auto& entry : order) {
    auto it = part_of.find(entry.first);
    if (it == part_of.end()) {
      out.push_back(entry);
    } else if (it->second.second == 0) {
      out.emplace_back(it->second.first->name, it->second.first->shape);
    }
  }
  return out;
}

int64_t ActiveParameters(const ModelDescription& model) {
  const MoeConfig& m = model.config.moe;
  int64_t idle = 0;  // expert elements a token does not use
  for (const LayerUnit& unit : model.units) {
    int64_t experts = 0;
    for (const ParamSpec& p : unit.params) experts += p.expert >= 0 ? p.num_elements : 0;
    if (experts > 0) idle += experts / m.num_experts * (m.num_experts - m.experts_per_token);
  }
  return TotalParameters(model) - idle;
}

int64_t NonEmbeddingParameters(const ModelDescription& model) {
  int64_t n = TotalParameters(model) - model.embedding().num_parameters();
  for (const ParamSpec& p : model.head().params) {
    if (p.role == ParamRole::kMatmulWeight) n -= p.num_elements;  // untied lm_head
  }
  return n;
}

int64_t ModelParameterBytes(const ModelDescription& model, int64_t bytes_per_element) {
  return TotalParameters(model) * bytes_per_element;
}

int64_t UnitParameterBytes(const LayerUnit& unit, int64_t bytes_per_element) {
  return unit.num_parameters() * bytes_per_element;
}

int64_t UnitResidentParameterBytes(const LayerUnit& unit, int64_t bytes_per_element) {
  return (unit.num_parameters() + SumElements(unit.shared_params, false)) * bytes_per_element;
}

UnitActivationBytes UnitActivations(const ModelDescription& model, int64_t unit_index,
                                    const ActivationOptions& options) {
  const ModelConfig& c = model.config;
  const LayerUnit& unit = model.units.at(unit_index);
  const int64_t C = c.hidden_size, I = c.intermediate_size, H = c.num_heads;
  const int64_t A = AttentionWidth(c), K = KvWidth(c);
  const int64_t e = options.activation_bytes;
  constexpr int64_t kTokenIdBytes = 4;  // int32
  constexpr int64_t kFp32Bytes = 4;
  UnitActivationBytes out;
  switch (unit.kind) {
    case UnitKind::kEmbedding:
      out.boundary_bytes_per_token = kTokenIdBytes;
      break;
    case UnitKind::kDecoderBlock: {
      out.boundary_bytes_per_token = C * e;
      // norm1 out, q, k, v, attention out, residual, norm2 out.
      int64_t elements = C + A + 2 * K + A + C + C;
      int64_t bytes = 2 * NormStatsBytes(c.norm);
      if (c.moe.IsMoeLayer(unit.layer)) {
        elements += 3 * c.moe.experts_per_token * c.moe.expert_intermediate_size;
        bytes += kFp32Bytes * c.moe.num_experts;
      } else {
        elements += (c.mlp == MlpKind::kSwiGlu ? 3 : 2) * I;
      }
      if (c.qk_norm) {
        elements += A + K;
        bytes += kFp32Bytes * (H + c.num_kv_heads);
      }
      out.saved_bytes_per_token = elements * e + bytes;
      if (options.flash_attention) {
        out.saved_bytes_per_token += kFp32Bytes * H;
      } else {
        out.saved_bytes_per_token_per_position = H * e;
      }
      break;
    }
    case UnitKind::kHead:
      out.boundary_bytes_per_token = C * e;
      out.saved_bytes_per_token = C * e + NormStatsBytes(c.norm) +
                                  c.vocab_size * options.logits_bytes + kTokenIdBytes;
      break;
  }
  return out;
}

double AttentionKeysPerQuery(int64_t seq_len, int64_t sliding_window) {
  const double T = static_cast<double>(seq_len);
  if (sliding_window <= 0 || sliding_window >= seq_len) return (T + 1) / 2;
  const double W = static_cast<double>(sliding_window);
  return (W * (W + 1) / 2 + (T - W) * W) / T;
}

double UnitAttentionForwardFlopsPerToken(const ModelDescription& model, int64_t unit_index,
                                         int64_t seq_len) {
  const LayerUnit& unit = model.units.at(unit_index);
  if (unit.kind != UnitKind::kDecoderBlock) return 0;
  const ModelConfig& c = model.config;
  // Q K^T and P V: H * head_dim MACs each per attended key, 2 FLOPs per MAC.
  return 2.0 * 2.0 * static_cast<double>(c.num_heads * c.head_dim) *
         AttentionKeysPerQuery(seq_len, c.WindowOf(unit.layer));
}

UnitFlopsPerToken UnitFlops(const ModelDescription& model, int64_t unit_index, int64_t seq_len) {
  const LayerUnit& unit = model.units.at(unit_index);
  UnitFlopsPerToken out;
  if (unit.kind == UnitKind::kEmbedding) return out;  // a lookup; its backward a scatter-add
  double matmul_elements = static_cast<double>(SumElements(unit.shared_params, true));
  const MoeConfig& m = model.config.moe;
  for (const ParamSpec& p : unit.params) {  // a token runs k of a MoE layer's E experts
    if (p.role != ParamRole::kMatmulWeight) continue;
    matmul_elements +=
        static_cast<double>(p.num_elements) * (p.expert < 0 ? 1.0 : m.RoutedShare());
  }
  out.forward_flops = 2.0 * matmul_elements +
                      UnitAttentionForwardFlopsPerToken(model, unit_index, seq_len);
  out.backward_flops = 2.0 * out.forward_flops;
  return out;
}

const ParamSpec* MlpOutputProjection(const ModelDescription& model, int64_t unit_index) {
  const LayerUnit& unit = model.units.at(unit_index);
  if (unit.kind != UnitKind::kDecoderBlock) return nullptr;
  const TensorNames& names = FamilyOf(model.config.family).tensors;
  const char* module = names.block.down != nullptr ? names.block.down : names.block.proj;
  if (module == nullptr) return nullptr;
  const std::string name =
      std::string(names.layer_prefix) + std::to_string(unit.layer) + "." + module + ".weight";
  for (const ParamSpec& p : unit.params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

UnitFlopsPerToken ModelFlops(const ModelDescription& model, int64_t seq_len) {
  UnitFlopsPerToken total;
  for (int64_t i = 0; i < model.num_units(); ++i) {
    UnitFlopsPerToken f = UnitFlops(model, i, seq_len);
    total.forward_flops += f.forward_flops;
    total.backward_flops += f.backward_flops;
  }
  return total;
}

}  // namespace mobius::model
