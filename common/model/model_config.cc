#include "common/model/model_config.h"

#include <cstdint>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/model/family.h"
#include "common/model/model_config_parse.h"
#include "common/status_macros.h"

namespace mobius::model {
namespace {

absl::Status Invalid(absl::string_view member, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("ModelConfig.", member, ": ", what));
}

absl::Status CheckRange(absl::string_view member, int64_t value, int64_t max) {
  if (value <= 0 || value > max) {
    return Invalid(member, absl::StrCat("is ", value, ", must be in [1, ", max, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckTokenId(absl::string_view member, int64_t id, int64_t vocab_size) {
  if (id < -1 || id >= vocab_size) {
    return Invalid(member, absl::StrCat("is ", id, ", must be -1 or in [0, ", vocab_size, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateMoe(const ModelConfig& c) {
  const MoeConfig& m = c.moe;
  if (!m.enabled()) return absl::OkStatus();
  if (m.num_experts > kMaxExperts) {
    return Invalid("moe.num_experts", absl::StrCat("is ", m.num_experts, ", more than ", kMaxExperts));
  }
  if (m.experts_per_token < 1 || m.experts_per_token > m.num_experts) {
    return Invalid("moe.experts_per_token", absl::StrCat("is ", m.experts_per_token,
                                                         ", must be in [1, ", m.num_experts, "]"));
  }
  MOBIUS_RETURN_IF_ERROR(CheckRange("moe.expert_intermediate_size", m.expert_intermediate_size,
                                    kMaxIntermediateSize));
  MOBIUS_RETURN_IF_ERROR(CheckRange("moe.sparse_step", m.sparse_step, c.num_layers));
  int64_t previous = -1;
  for (int64_t layer : m.mlp_only_layers) {
    if (layer <= previous || layer >= c.num_layers) {
      return Invalid("moe.mlp_only_layers",
                     absl::StrCat("must be ascending layer indices in [0, ", c.num_layers,
                                  ") (got ", layer, ")"));
    }
    previous = layer;
  }
  if (!(m.router_aux_loss_coef >= 0)) return Invalid("moe.router_aux_loss_coef", "must be >= 0");
  if (c.mlp != MlpKind::kSwiGlu) return Invalid("moe", "experts are SwiGLU MLPs");
  return absl::OkStatus();
}

}  // namespace

int64_t MoeConfig::NumMoeLayers(int64_t num_layers) const {
  int64_t n = 0;
  for (int64_t l = 0; l < num_layers; ++l) n += IsMoeLayer(l) ? 1 : 0;
  return n;
}

int64_t MoeConfig::MoeLayerIndex(int64_t layer) const {
  return IsMoeLayer(layer) ? NumMoeLayers(layer) : -1;
}

double MoeConfig::RoutedShare() const {
  return enabled() ? static_cast<double>(experts_per_token) / static_cast<double>(num_experts)
                   : 1.0;
}

bool MoeConfig::IsMoeLayer(int64_t layer) const {
  if (!enabled()) return false;
  for (int64_t l : mlp_only_layers) {
    if (l == layer) return false;
  }
  return (layer + 1) % sparse_step == 0;
}

absl::Status ValidateModelConfig(const ModelConfig& c) {
  for (auto [member, value, max] : {
           std::tuple<const char*, int64_t, int64_t>{"vocab_size", c.vocab_size, kMaxVocabSize},
           {"hidden_size", c.hidden_size, kMaxHiddenSize},
           {"num_layers", c.num_layers, kMaxLayers},
           {"num_heads", c.num_heads, kMaxHeads},
           {"num_kv_heads", c.num_kv_heads, kMaxHeads},
           {"head_dim", c.head_dim, kMaxHeadDim},
           {"intermediate_size", c.intermediate_size, kMaxIntermediateSize},
           {"max_position_embeddings", c.max_position_embeddings, kMaxPositions},
       }) {
    if (absl::Status s = CheckRange(member, value, max); !s.ok()) return s;
  }
  if (c.num_heads * c.head_dim > kMaxAttentionWidth) {
    return Invalid("head_dim", absl::StrCat(c.num_heads, " heads x ", c.head_dim,
                                            " is more than ", kMaxAttentionWidth));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return Invalid("num_kv_heads", absl::StrCat(c.num_heads, " heads are not divisible by ",
                                                c.num_kv_heads, " kv heads"));
  }
  if (c.position == PositionKind::kRope && c.head_dim % 2 != 0) {
    return Invalid("head_dim", absl::StrCat("is ", c.head_dim, ", must be even for RoPE"));
  }
  if (c.position == PositionKind::kLearned && c.num_heads * c.head_dim != c.hidden_size) {
    return Invalid("head_dim", "heads x head_dim must equal hidden_size with learned positions");
  }
  if (!(c.norm_eps > 0)) return Invalid("norm_eps", "must be positive");
  if (c.sliding_window < 0 || c.sliding_window > kMaxPositions) {
    return Invalid("sliding_window", absl::StrCat("is ", c.sliding_window, ", must be 0 (none) or ",
                                                  "in [1, ", kMaxPositions, "]"));
  }
  if (!c.sliding_layers.empty() && static_cast<int64_t>(c.sliding_layers.size()) != c.num_layers) {
    return Invalid("sliding_layers", absl::StrCat("has ", c.sliding_layers.size(),
                                                  " entries for ", c.num_layers, " layers"));
  }
  if (c.attention_sinks && FamilyOf(c.family).tensors.block.sinks == nullptr) {
    return Invalid("attention_sinks", "the family names no sinks tensor");
  }
  if (c.moe.expert_mlp == MoeConfig::ExpertMlp::kClampedSwiGlu &&
      FamilyOf(c.family).tensors.block.moe_gate_up == nullptr) {
    return Invalid("moe.expert_mlp", "clamped SwiGLU experts need the family's gate_up tensor");
  }
  MOBIUS_RETURN_IF_ERROR(ValidateMoe(c));
  if (absl::Status s = CheckTokenId("bos_token_id", c.bos_token_id, c.vocab_size); !s.ok()) {
    return s;
  }
  return CheckTokenId("eos_token_id", c.eos_token_id, c.vocab_size);
}

}  // namespace mobius::model
