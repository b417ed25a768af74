// Mixtral (transformers MixtralConfig / MixtralForCausalLM): Mistral's attention (no biases,
// num_key_value_heads default 8, "sliding_window" null = none) with a sparse MoE MLP in every
// layer (MixtralSparseMoeBlock): "num_local_experts" experts of width "intermediate_size",
// "num_experts_per_tok" per token, softmax over the top-k router logits (the renormalised top-k
// probabilities). Tensors: block_sparse_moe.gate (the router) and
// block_sparse_moe.experts.<e>.{w1 (gate), w3 (up), w2 (down)}. router_jitter_noise > 0 is refused.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/model/families/families.h"
#include "common/model/model_config_parse.h"
#include "common/status_macros.h"

namespace mobius::model {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Parse(const ConfigFields& f, ModelConfig& c) {
  MOBIUS_RETURN_IF_ERROR(ParseLlamaLike(f, c, {.default_kv_heads = 8}));
  MOBIUS_ASSIGN_OR_RETURN(c.sliding_window,
                          f.Positive("sliding_window", kMaxPositions, int64_t{0}));
  MoeConfig& m = c.moe;
  MOBIUS_ASSIGN_OR_RETURN(m.num_experts, f.Positive("num_local_experts", kMaxExperts, 8));
  m.expert_intermediate_size = c.intermediate_size;
  m.norm_topk_prob = true;
  // transformers multiplies the router's input by uniform noise in [1 - j, 1 + j] in training:
  // a random routing the runtime does not reproduce, so it refuses rather than ignore it.
  MOBIUS_ASSIGN_OR_RETURN(const double jitter, f.NonNegativeNumber("router_jitter_noise", 0));
  if (jitter > 0) {
    return f.Error("router_jitter_noise",
                   absl::StrCat("router jitter (", jitter,
                                ") is not supported: set it to 0 (the "
                                "default; Mixtral's released configs use 0)"));
  }
  return ParseMoeCommon(f, c);
}

void Write(const ModelConfig& c, Json& j) {
  WriteLlamaLike(c, /*head_dim=*/true, j);
  j["sliding_window"] = c.sliding_window > 0 ? Json(c.sliding_window) : Json(nullptr);
  j["num_local_experts"] = c.moe.num_experts;
  WriteMoeCommon(c, j);
}

void SetDefaults(ModelConfig& c) {
  SetLlamaLikeDefaults(c, /*norm_eps=*/1e-5, /*rope_theta=*/1000000.0, /*tied=*/false,
                       /*last_token_ids=*/false);
  c.moe.num_experts = 4;
  c.moe.experts_per_token = 2;
  c.moe.expert_intermediate_size = c.intermediate_size;
  c.moe.norm_topk_prob = true;
  c.moe.router_aux_loss_coef = 0.02;
}

// Mixtral's experts are intermediate_size wide: the presets keep it small.
constexpr FamilyPreset kPresets[] = {
    {"tiny", 2, 64, 4, 2, 16, 96, 512, 256},
    {"small", 12, 768, 12, 4, 64, 1024, 32000, 4096},
};

}  // namespace

const FamilyDescriptor kMixtralFamily = {
    .family = Family::kMixtral,
    .model_type = "mixtral",
    .architecture = "MixtralForCausalLM",
    .tensors = kMixtralTensorNames,
    .presets = kPresets,
    .parse = Parse,
    .write = Write,
    .set_defaults = SetDefaults,
    .check_generated = nullptr,
    .kv_heads_follow_heads = false,
    .scale_residual_init = false,
};

}  // namespace mobius::model
