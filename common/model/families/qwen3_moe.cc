// Qwen3-MoE (transformers Qwen3MoeConfig / Qwen3MoeForCausalLM): Qwen3's attention (qk_norm,
// head_dim required) with a sparse MoE MLP (Qwen3MoeSparseMoeBlock): "num_experts" experts of
// width "moe_intermediate_size", "num_experts_per_tok" per token, the top-k weights renormalised
// when "norm_topk_prob"; layer i has experts unless it is in "mlp_only_layers" or
// (i + 1) % "decoder_sparse_step" != 0, else a dense MLP of "intermediate_size". Tensors:
// mlp.gate (the router) and mlp.experts.<e>.{gate,up,down}_proj.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/model/families/families.h"
#include "common/model/model_config_parse.h"
#include "common/status_macros.h"

namespace mobius::model {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Parse(const ConfigFields& f, ModelConfig& c) {
  MOBIUS_RETURN_IF_ERROR(ParseLlamaLike(f, c, {.head_dim = HeadDimKey::kRequired}));
  MOBIUS_ASSIGN_OR_RETURN(c.attention_bias, f.Bool("attention_bias", false));
  c.attention_output_bias = c.attention_bias;
  c.qk_norm = true;
  MOBIUS_RETURN_IF_ERROR(RejectUseSlidingWindow(f));
  MoeConfig& m = c.moe;
  MOBIUS_ASSIGN_OR_RETURN(m.num_experts, f.Positive("num_experts", kMaxExperts));
  MOBIUS_ASSIGN_OR_RETURN(m.expert_intermediate_size,
                          f.Positive("moe_intermediate_size", kMaxIntermediateSize));
  MOBIUS_ASSIGN_OR_RETURN(m.sparse_step, f.Positive("decoder_sparse_step", c.num_layers, 1));
  MOBIUS_ASSIGN_OR_RETURN(m.mlp_only_layers, f.IndexList("mlp_only_layers", c.num_layers));
  MOBIUS_ASSIGN_OR_RETURN(m.norm_topk_prob, f.Bool("norm_topk_prob", false));
  return ParseMoeCommon(f, c);
}

void Write(const ModelConfig& c, Json& j) {
  WriteLlamaLike(c, /*head_dim=*/true, j);
  j["attention_bias"] = c.attention_bias;
  WriteQwenWindowKeys(c, j);
  j["num_experts"] = c.moe.num_experts;
  j["moe_intermediate_size"] = c.moe.expert_intermediate_size;
  j["decoder_sparse_step"] = c.moe.sparse_step;
  j["mlp_only_layers"] = c.moe.mlp_only_layers;
  j["norm_topk_prob"] = c.moe.norm_topk_prob;
  WriteMoeCommon(c, j);
}

void SetDefaults(ModelConfig& c) {
  SetLlamaLikeDefaults(c, /*norm_eps=*/1e-6, /*rope_theta=*/1000000.0, /*tied=*/false,
                       /*last_token_ids=*/true);
  c.qk_norm = true;
  // Qwen3-30B-A3B's shape in miniature: 8 experts of a quarter of the dense width, 2 per token.
  c.moe.num_experts = 8;
  c.moe.experts_per_token = 2;
  c.moe.expert_intermediate_size = std::max<int64_t>(1, c.intermediate_size / 4);
  c.moe.norm_topk_prob = true;
}

constexpr FamilyPreset kPresets[] = {
    {"tiny", 2, 64, 4, 2, 32, 192, 512, 256},
    {"small", 12, 768, 12, 4, 64, 2048, 32000, 2048},
};

}  // namespace

const FamilyDescriptor kQwen3MoeFamily = {
    .family = Family::kQwen3Moe,
    .model_type = "qwen3_moe",
    .architecture = "Qwen3MoeForCausalLM",
    .tensors = kQwen3MoeTensorNames,
    .presets = kPresets,
    .parse = Parse,
    .write = Write,
    .set_defaults = SetDefaults,
    .check_generated = nullptr,
    .kv_heads_follow_heads = false,
    .scale_residual_init = false,
};

}  // namespace mobius::model
