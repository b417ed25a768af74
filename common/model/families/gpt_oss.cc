// gpt-oss (transformers GptOssConfig / GptOssForCausalLM): Llama-like blocks with biases on q, k, v
// and o, an attention sink per head (self_attn.sinks), sliding-window attention on the layers
// "layer_types" marks "sliding_attention" (default: the even ones; "sliding_window" 128), YaRN
// RoPE (the config class's default rope_scaling when the key is absent), and a mixture of experts
// in every layer (GptOssMLP): a biased router (mlp.router) whose top "num_experts_per_tok" logits
// are softmaxed (= the renormalised top-k probabilities), "num_local_experts" experts of width
// "intermediate_size" with gpt-oss's clamped SwiGLU (MoeConfig::ExpertMlp::kClampedSwiGlu; alpha
// 1.702, limit "swiglu_limit" 7). Checkpoint tensors: mlp.experts.gate_up_proj [E, C, 2I],
// gate_up_proj_bias [E, 2I], down_proj [E, I, C], down_proj_bias [E, C] (split per expert:
// layer_units.h FusedExpertTensors).
//
// Refused: output_router_logits true (transformers' GptOss computes its load-balancing loss on
// the router's sparse top-k scores, not on its logits: not modelled), a swiglu_limit other than 7
// (transformers' GptOssExperts uses 7 whatever the config says), attention_dropout > 0.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/families/families.h"
#include "common/model/model_config_parse.h"
#include "common/status_macros.h"

namespace mobius::model {
namespace {

using Json = nlohmann::ordered_json;

constexpr int64_t kDefaultWindow = 128;

absl::Status ParseLayerTypes(const ConfigFields& f, ModelConfig& c) {
  c.sliding_layers.assign(static_cast<size_t>(c.num_layers), false);
  const nlohmann::json* v = f.Find("layer_types");
  if (v == nullptr) {  // GptOssConfig: sliding on even layers, full on odd
    for (int64_t i = 0; i < c.num_layers; ++i) c.sliding_layers[i] = (i + 1) % 2 == 1;
    return absl::OkStatus();
  }
  if (!v->is_array() || static_cast<int64_t>(v->size()) != c.num_layers) {
    return f.Error("layer_types",
                   absl::StrCat("must be a list of num_hidden_layers (", c.num_layers,
                                ") strings"));
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const nlohmann::json& t = (*v)[i];
    if (t == "sliding_attention") {
      c.sliding_layers[i] = true;
    } else if (t != "full_attention") {
      return f.Error(absl::StrCat("layer_types[", i, "]"),
                     absl::StrCat("must be \"sliding_attention\" or \"full_attention\" (got ",
                                  t.dump(), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status Parse(const ConfigFields& f, ModelConfig& c) {
  MOBIUS_RETURN_IF_ERROR(ParseLlamaLike(f, c, {.default_kv_heads = 8, .head_dim = HeadDimKey::kOptional}));
  // GptOssConfig's own defaults where the keys are absent.
  MOBIUS_ASSIGN_OR_RETURN(c.head_dim, f.Positive("head_dim", kMaxHeadDim, 64));
  MOBIUS_ASSIGN_OR_RETURN(c.norm_eps, f.PositiveNumber("rms_norm_eps", 1e-5));
  MOBIUS_ASSIGN_OR_RETURN(c.rope_theta, f.PositiveNumber("rope_theta", 150000.0));
  if (f.Find("rope_scaling") == nullptr) {
    c.rope_scaling = {.type = RopeScaling::Type::kYarn, .factor = 32.0,
                      .original_max_position_embeddings = 4096, .beta_fast = 32.0,
                      .beta_slow = 1.0, .truncate = false};
    c.rope_scaling.attention_factor = 0.1 * std::log(32.0) + 1.0;
  }
  c.attention_bias = c.attention_output_bias = true;  // GptOssConfig sets it whatever the file says
  c.attention_sinks = true;
  MOBIUS_ASSIGN_OR_RETURN(c.sliding_window,
                          f.Positive("sliding_window", kMaxPositions, kDefaultWindow));
  MOBIUS_RETURN_IF_ERROR(ParseLayerTypes(f, c));
  MOBIUS_ASSIGN_OR_RETURN(const double dropout, f.NonNegativeNumber("attention_dropout", 0));
  if (dropout > 0) return f.Error("attention_dropout", "must be 0 (attention dropout is not modelled)");

  MoeConfig& m = c.moe;
  MOBIUS_ASSIGN_OR_RETURN(m.num_experts, f.Positive("num_local_experts", kMaxExperts, 128));
  m.expert_intermediate_size = c.intermediate_size;
  m.norm_topk_prob = true;
  m.router_bias = true;
  m.expert_mlp = MoeConfig::ExpertMlp::kClampedSwiGlu;
  // The released config.json spells k both "num_experts_per_tok" and "experts_per_token".
  const char* k_key = f.Find("num_experts_per_tok") != nullptr || f.Find("experts_per_token") == nullptr
                          ? "num_experts_per_tok"
                          : "experts_per_token";
  MOBIUS_ASSIGN_OR_RETURN(m.experts_per_token, f.Positive(k_key, m.num_experts, 4));
  MOBIUS_ASSIGN_OR_RETURN(m.router_aux_loss_coef, f.NonNegativeNumber("router_aux_loss_coef", 0.9));
  MOBIUS_ASSIGN_OR_RETURN(m.output_router_logits, f.Bool("output_router_logits", false));
  if (m.output_router_logits) {
    return f.Error("output_router_logits",
                   "true is not supported for gpt_oss (transformers computes its load-balancing "
                   "loss on the router's top-k scores, not its logits); set it to false");
  }
  MOBIUS_ASSIGN_OR_RETURN(m.swiglu_limit, f.PositiveNumber("swiglu_limit", 7.0));
  if (m.swiglu_limit != 7.0) {
    return f.Error("swiglu_limit", absl::StrCat("must be 7 (transformers' GptOssExperts clamps at "
                                                "7 whatever the config says; got ",
                                                m.swiglu_limit, ")"));
  }
  return absl::OkStatus();
}

void Write(const ModelConfig& c, Json& j) {
  WriteLlamaLike(c, /*head_dim=*/true, j);
  j["attention_bias"] = true;
  j["sliding_window"] = c.sliding_window;
  Json types = Json::array();
  for (int64_t i = 0; i < c.num_layers; ++i) {
    types.push_back(c.WindowOf(i) > 0 ? "sliding_attention" : "full_attention");
  }
  j["layer_types"] = types;
  j["num_local_experts"] = c.moe.num_experts;
  j["num_experts_per_tok"] = c.moe.experts_per_token;
  j["experts_per_token"] = c.moe.experts_per_token;
  j["router_aux_loss_coef"] = c.moe.router_aux_loss_coef;
  j["output_router_logits"] = false;
  j["swiglu_limit"] = c.moe.swiglu_limit;
}

void SetDefaults(ModelConfig& c) {
  SetLlamaLikeDefaults(c, /*norm_eps=*/1e-5, /*rope_theta=*/150000.0, /*tied=*/false,
                       /*last_token_ids=*/true);
  c.attention_bias = c.attention_output_bias = true;
  c.attention_sinks = true;
  // 128 as released, fewer for short-context presets so that their windows bind (tiny: 8 of 256).
  c.sliding_window =
      std::min<int64_t>(kDefaultWindow, std::max<int64_t>(1, c.max_position_embeddings / 32));
  c.sliding_layers.assign(static_cast<size_t>(c.num_layers), false);
  for (int64_t i = 0; i < c.num_layers; ++i) c.sliding_layers[i] = i % 2 == 0;
  c.rope_scaling = {.type = RopeScaling::Type::kYarn, .factor = 32.0,
                    .original_max_position_embeddings = 4096, .beta_fast = 32.0, .beta_slow = 1.0,
                    .truncate = false};
  c.rope_scaling.attention_factor = 0.1 * std::log(32.0) + 1.0;
  MoeConfig& m = c.moe;
  m.num_experts = 8;  // gpt-oss-20b's 32 of 4, in miniature
  m.experts_per_token = 2;
  m.expert_intermediate_size = c.intermediate_size;
  m.norm_topk_prob = true;
  m.router_bias = true;
  m.expert_mlp = MoeConfig::ExpertMlp::kClampedSwiGlu;
  m.router_aux_loss_coef = 0.9;
}

// gpt-oss's experts are intermediate_size wide (gpt-oss-20b: 2880 = hidden_size).
constexpr FamilyPreset kPresets[] = {
    {"tiny", 2, 64, 4, 2, 16, 64, 512, 256},
    {"small", 12, 768, 12, 4, 64, 768, 32000, 4096},
};

}  // namespace

const FamilyDescriptor kGptOssFamily = {
    .family = Family::kGptOss,
    .model_type = "gpt_oss",
    .architecture = "GptOssForCausalLM",
    .tensors = kGptOssTensorNames,
    .presets = kPresets,
    .parse = Parse,
    .write = Write,
    .set_defaults = SetDefaults,
    .check_generated = nullptr,
    .kv_heads_follow_heads = false,
    .scale_residual_init = false,
};

}  // namespace mobius::model
