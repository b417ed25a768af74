// Mistral (transformers MistralConfig / MistralForCausalLM): as Llama, but no biases at all
// (MistralAttention/MLP hard-code bias=False), num_key_value_heads defaults to 8, and
// "sliding_window" (null = none) is the attention window.
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
  return absl::OkStatus();
}

void Write(const ModelConfig& c, Json& j) {
  WriteLlamaLike(c, /*head_dim=*/true, j);
  j["sliding_window"] = c.sliding_window > 0 ? Json(c.sliding_window) : Json(nullptr);
}

void SetDefaults(ModelConfig& c) {
  SetLlamaLikeDefaults(c, /*norm_eps=*/1e-5, /*rope_theta=*/1000000.0, /*tied=*/false,
                       /*last_token_ids=*/false);
}

constexpr FamilyPreset kPresets[] = {
    {"tiny", 2, 64, 4, 2, 16, 192, 512, 256},  // sliding_window null
    {"small", 12, 768, 12, 4, 64, 2048, 32768, 4096},
};

}  // namespace

const FamilyDescriptor kMistralFamily = {
    .family = Family::kMistral,
    .model_type = "mistral",
    .architecture = "MistralForCausalLM",
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
