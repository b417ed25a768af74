#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model/families/families.h"
#include "common/model/model_config_parse.h"
#include "common/status_macros.h"

namespace mobius::model {
namespace {

using json = nlohmann::json;
using Json = nlohmann::ordered_json;

}  // namespace

absl::Status ParseRopeScaling(const ConfigFields& f, ModelConfig& c) {
  const json* v = f.Find("rope_scaling");
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_object()) {
    return f.Error("rope_scaling",
                   absl::StrCat("must be an object or null (got ", ShowJson(*v), ")"));
  }
  ConfigFields r(*v, f.origin(), "rope_scaling.");
  MOBIUS_ASSIGN_OR_RETURN(std::optional<std::string> type, r.String("rope_type"));
  absl::string_view type_key = "rope_type";
  if (!type) {
    MOBIUS_ASSIGN_OR_RETURN(type, r.String("type"));
    type_key = "type";
  }
  if (!type) return r.Error("rope_type", "missing");
  RopeScaling& s = c.rope_scaling;
  if (*type == "default") return absl::OkStatus();
  if (*type == "linear") {
    s.type = RopeScaling::Type::kLinear;
    MOBIUS_ASSIGN_OR_RETURN(s.factor, r.PositiveNumber("factor", std::nullopt));
    return absl::OkStatus();
  }
  if (*type == "llama3") {
    s.type = RopeScaling::Type::kLlama3;
    MOBIUS_ASSIGN_OR_RETURN(s.factor, r.PositiveNumber("factor", std::nullopt));
    MOBIUS_ASSIGN_OR_RETURN(s.low_freq_factor, r.PositiveNumber("low_freq_factor", std::nullopt));
    MOBIUS_ASSIGN_OR_RETURN(s.high_freq_factor, r.PositiveNumber("high_freq_factor", std::nullopt));
    MOBIUS_ASSIGN_OR_RETURN(s.original_max_position_embeddings,
                            r.Positive("original_max_position_embeddings", kMaxPositions));
    // The llama3 rule interpolates between the two wavelength bounds; it divides by their gap.
    if (!(s.high_freq_factor > s.low_freq_factor)) {
      return r.Error("high_freq_factor",
                     absl::StrCat("must be greater than low_freq_factor (", s.high_freq_factor,
                                  " <= ", s.low_freq_factor, ")"));
    }
    return absl::OkStatus();
  }
  if (*type == "yarn") {
    s.type = RopeScaling::Type::kYarn;
    MOBIUS_ASSIGN_OR_RETURN(s.factor, r.PositiveNumber("factor", std::nullopt));
    MOBIUS_ASSIGN_OR_RETURN(s.beta_fast, r.PositiveNumber("beta_fast", 32.0));
    MOBIUS_ASSIGN_OR_RETURN(s.beta_slow, r.PositiveNumber("beta_slow", 1.0));
    MOBIUS_ASSIGN_OR_RETURN(s.truncate, r.Bool("truncate", true));
    MOBIUS_ASSIGN_OR_RETURN(s.original_max_position_embeddings,
                            r.Positive("original_max_position_embeddings", kMaxPositions,
                                       c.max_position_embeddings));
    // transformers: attention_factor when given, else from factor (and mscale / mscale_all_dim).
    auto mscale_of = [](double scale, double m) {
      return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
    };
    MOBIUS_ASSIGN_OR_RETURN(const double given, r.NonNegativeNumber("attention_factor", 0));
    MOBIUS_ASSIGN_OR_RETURN(const double mscale, r.NonNegativeNumber("mscale", 0));
    MOBIUS_ASSIGN_OR_RETURN(const double mscale_all, r.NonNegativeNumber("mscale_all_dim", 0));
    if (given > 0) {
      s.attention_factor = given;
    } else if (mscale > 0 && mscale_all > 0) {
      s.attention_factor = mscale_of(s.factor, mscale) / mscale_of(s.factor, mscale_all);
    } else {
      s.attention_factor = mscale_of(s.factor, 1.0);
    }
    return absl::OkStatus();
  }
  return r.Error(type_key, absl::StrCat("unsupported rope scaling \"", *type,
                                        "\" (supported: default, linear, llama3, yarn)"));
}

Json RopeScalingJson(const RopeScaling& s) {
  switch (s.type) {
    case RopeScaling::Type::kNone:
      return nullptr;
    case RopeScaling::Type::kLinear:
      return {{"rope_type", "linear"}, {"factor", s.factor}};
    case RopeScaling::Type::kLlama3:
      return {{"rope_type", "llama3"},
              {"factor", s.factor},
              {"low_freq_factor", s.low_freq_factor},
              {"high_freq_factor", s.high_freq_factor},
              {"original_max_position_embeddings", s.original_max_position_embeddings}};
    case RopeScaling::Type::kYarn: {
      Json j = {{"rope_type", "yarn"},           {"factor", s.factor},
                {"beta_fast", s.beta_fast},      {"beta_slow", s.beta_slow},
                {"truncate", s.truncate},        {"attention_factor", s.attention_factor}};
      if (s.original_max_position_embeddings > 0) {
        j["original_max_position_embeddings"] = s.original_max_position_embeddings;
      }
      return j;
    }
  }
  return nullptr;
}

namespace {

// LlamaForCausalLM's names, with a mixture-of-experts family's router and expert modules
// (nullptr: dense). constexpr and constinit below: other files' descriptors copy these tables
// during static initialization, so they must be constant-initialized.
constexpr TensorNames LlamaNames(const char* router = nullptr, const char* experts = nullptr,
                                 const char* gate = nullptr, const char* up = nullptr,
                                 const char* down = nullptr, const char* gate_up = nullptr,
                                 const char* sinks = nullptr) {
  return {
      .token_embedding = "model.embed_tokens.weight",
      .position_embedding = nullptr,
      .layer_prefix = "model.layers.",
      .final_norm = "model.norm",
      .lm_head = "lm_head.weight",
      .in_out_layout = false,  // nn.Linear: [out, in]
      .block = {.norm1 = "input_layernorm",
                .q = "self_attn.q_proj",
                .k = "self_attn.k_proj",
                .v = "self_attn.v_proj",
                .o = "self_attn.o_proj",
                .sinks = sinks,
                .q_norm = "self_attn.q_norm",
                .k_norm = "self_attn.k_norm",
                .norm2 = "post_attention_layernorm",
                .gate = "mlp.gate_proj",
                .up = "mlp.up_proj",
                .down = "mlp.down_proj",
                .moe_router = router,
                .moe_experts = experts,
                .moe_gate = gate,
                .moe_up = up,
                .moe_down = down,
                .moe_gate_up = gate_up},
  };
}

}  // namespace

constinit const TensorNames kLlamaTensorNames = LlamaNames();
constinit const TensorNames kQwen3MoeTensorNames =
    LlamaNames("mlp.gate", "mlp.experts", "gate_proj", "up_proj", "down_proj");
constinit const TensorNames kMixtralTensorNames =
    LlamaNames("block_sparse_moe.gate", "block_sparse_moe.experts", "w1", "w3", "w2");
constinit const TensorNames kGptOssTensorNames = LlamaNames(
    "mlp.router", "mlp.experts", nullptr, nullptr, "down_proj", "gate_up_proj", "self_attn.sinks");

absl::Status ParseLlamaLike(const ConfigFields& f, ModelConfig& c, const LlamaLikeRules& rules) {
  MOBIUS_ASSIGN_OR_RETURN(c.hidden_size, f.Positive("hidden_size", kMaxHiddenSize));
  MOBIUS_ASSIGN_OR_RETURN(c.num_layers, f.Positive("num_hidden_layers", kMaxLayers));
  MOBIUS_ASSIGN_OR_RETURN(c.num_heads, f.Positive("num_attention_heads", kMaxHeads));
  const int64_t default_kv = rules.default_kv_heads > 0 ? rules.default_kv_heads : c.num_heads;
  MOBIUS_ASSIGN_OR_RETURN(c.num_kv_heads, f.Positive("num_key_value_heads", kMaxHeads, default_kv));
  MOBIUS_ASSIGN_OR_RETURN(c.intermediate_size,
                          f.Positive("intermediate_size", kMaxIntermediateSize));
  MOBIUS_ASSIGN_OR_RETURN(c.max_position_embeddings,
                          f.Positive("max_position_embeddings", kMaxPositions));
  MOBIUS_ASSIGN_OR_RETURN(c.norm_eps, f.PositiveNumber("rms_norm_eps", 1e-6));
  MOBIUS_ASSIGN_OR_RETURN(c.rope_theta, f.PositiveNumber("rope_theta", 10000.0));
  MOBIUS_RETURN_IF_ERROR(ParseRopeScaling(f, c));
  MOBIUS_ASSIGN_OR_RETURN(c.tie_word_embeddings, f.Bool("tie_word_embeddings", false));
  MOBIUS_ASSIGN_OR_RETURN(std::optional<std::string> act, f.String("hidden_act"));
  if (act && *act != "silu") {
    return f.Error("hidden_act", absl::StrCat("unsupported \"", *act, "\" (supported: silu)"));
  }

  if (rules.head_dim == HeadDimKey::kRequired) {
    MOBIUS_ASSIGN_OR_RETURN(c.head_dim, f.Positive("head_dim", kMaxHeadDim));
  } else if (rules.head_dim == HeadDimKey::kOptional && f.Find("head_dim") != nullptr) {
    MOBIUS_ASSIGN_OR_RETURN(c.head_dim, f.Positive("head_dim", kMaxHeadDim));
  } else if (c.hidden_size % c.num_heads != 0) {
    return f.Error("num_attention_heads",
                   absl::StrCat("hidden_size ", c.hidden_size, " is not divisible by ", c.num_heads,
                                " heads (and no head_dim is given)"));
  } else {
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.num_heads * c.head_dim > kMaxAttentionWidth) {
    return f.Error("head_dim", absl::StrCat(c.num_heads, " heads x ", c.head_dim,
                                            " is more than the supported ", kMaxAttentionWidth));
  }
  if (c.head_dim % 2 != 0) {
    return f.Error("head_dim", absl::StrCat("must be even for rotary embeddings (head_dim is ",
                                            c.head_dim, ")"));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return f.Error("num_key_value_heads",
                   absl::StrCat(c.num_heads, " attention heads are not divisible by ",
                                c.num_kv_heads, " key/value heads"));
  }

  c.norm = NormKind::kRmsNorm;
  c.mlp = MlpKind::kSwiGlu;
  c.position = PositionKind::kRope;
  return absl::OkStatus();
}

absl::Status RejectUseSlidingWindow(const ConfigFields& f) {
  MOBIUS_ASSIGN_OR_RETURN(bool use_sliding_window, f.Bool("use_sliding_window", false));
  if (use_sliding_window) {
    return f.Error("use_sliding_window",
                   "true is not supported (per-layer sliding windows are not modelled)");
  }
  return absl::OkStatus();
}

void WriteLlamaLike(const ModelConfig& c, bool head_dim, Json& j) {
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  if (head_dim) j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = RopeScalingJson(c.rope_scaling);
  j["attention_dropout"] = 0.0;
}

absl::Status ParseMoeCommon(const ConfigFields& f, ModelConfig& c) {
  MoeConfig& m = c.moe;
  MOBIUS_ASSIGN_OR_RETURN(m.experts_per_token, f.Positive("num_experts_per_tok", m.num_experts));
  MOBIUS_ASSIGN_OR_RETURN(m.router_aux_loss_coef, f.NonNegativeNumber("router_aux_loss_coef", 0.001));
  MOBIUS_ASSIGN_OR_RETURN(m.output_router_logits, f.Bool("output_router_logits", false));
  return absl::OkStatus();
}

void WriteMoeCommon(const ModelConfig& c, Json& j) {
  j["num_experts_per_tok"] = c.moe.experts_per_token;
  j["router_aux_loss_coef"] = c.moe.router_aux_loss_coef;
  j["output_router_logits"] = c.moe.output_router_logits;
}

void WriteQwenWindowKeys(const ModelConfig& c, Json& j) {
  j["use_sliding_window"] = false;
  j["sliding_window"] = nullptr;
  j["max_window_layers"] = c.num_layers;
}

void SetLlamaLikeDefaults(ModelConfig& c, double norm_eps, double rope_theta, bool tied,
                          bool last_token_ids) {
  c.norm = NormKind::kRmsNorm;
  c.mlp = MlpKind::kSwiGlu;
  c.position = PositionKind::kRope;
  c.norm_eps = norm_eps;
  c.rope_theta = rope_theta;
  c.tie_word_embeddings = tied;
  c.attention_bias = c.attention_output_bias = c.mlp_bias = c.qk_norm = false;
  c.bos_token_id = last_token_ids ? c.vocab_size - 1 : 1;
  c.eos_token_id = last_token_ids ? c.vocab_size - 1 : 2;
}

}  // namespace mobius::model
