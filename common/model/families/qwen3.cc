// Qwen3 (transformers Qwen3Config / Qwen3ForCausalLM): as Llama plus qk_norm (per-head RMSNorm on
// q and k); head_dim is required (heads x head_dim may differ from hidden); attention_bias (false)
// on q, k, v and o; "use_sliding_window": true is rejected.
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
  return absl::OkStatus();
}

void Write(const ModelConfig& c, Json& j) {
  WriteLlamaLike(c, /*head_dim=*/true, j);
  j["attention_bias"] = c.attention_bias;
  WriteQwenWindowKeys(c, j);
}

void SetDefaults(ModelConfig& c) {
  SetLlamaLikeDefaults(c, /*norm_eps=*/1e-6, /*rope_theta=*/1000000.0, /*tied=*/true,
                       /*last_token_ids=*/true);
  c.qk_norm = true;
}

constexpr FamilyPreset kPresets[] = {
    {"tiny", 2, 64, 4, 2, 32, 192, 512, 256},  // qk_norm, heads x head_dim != hidden
    {"small", 12, 768, 12, 4, 128, 2048, 32000, 2048},
};

}  // namespace

const FamilyDescriptor kQwen3Family = {
    .family = Family::kQwen3,
    .model_type = "qwen3",
    .architecture = "Qwen3ForCausalLM",
    .tensors = kLlamaTensorNames,
    .presets = kPresets,
    .parse = Parse,
    .write = Write,
    .set_defaults = SetDefaults,
    .check_generated = nullptr,
    .kv_heads_follow_heads = false,
    .scale_residual_init = false,
};

}  // namespace mobius::model
