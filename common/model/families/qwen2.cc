// Qwen2 (transformers Qwen2Config / Qwen2ForCausalLM): as Llama with q/k/v biases always and none
// on o_proj; no head_dim key (heads x head_dim = hidden); "use_sliding_window": true is rejected.
#include "absl/strings/str_cat.h"
#include "common/model/families/families.h"
#include "common/model/model_config_parse.h"
#include "common/status_macros.h"

namespace mobius::model {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Parse(const ConfigFields& f, ModelConfig& c) {
  MOBIUS_RETURN_IF_ERROR(ParseLlamaLike(f, c, {.head_dim = HeadDimKey::kNever}));
  c.attention_bias = true;  // Qwen2Attention: q/k/v bias=True, o_proj bias=False
  MOBIUS_RETURN_IF_ERROR(RejectUseSlidingWindow(f));
  return absl::OkStatus();
}

void Write(const ModelConfig& c, Json& j) {
  WriteLlamaLike(c, /*head_dim=*/false, j);
  WriteQwenWindowKeys(c, j);
}

void SetDefaults(ModelConfig& c) {
  SetLlamaLikeDefaults(c, /*norm_eps=*/1e-6, /*rope_theta=*/1000000.0, /*tied=*/true,
                       /*last_token_ids=*/true);
  c.attention_bias = true;
}

absl::Status CheckGenerated(const ModelConfig& c) {
  if (c.num_heads * c.head_dim != c.hidden_size) {
    return absl::InvalidArgumentError(
        "qwen2 has no head_dim field: heads x head_dim must equal hidden");
  }
  return absl::OkStatus();
}

constexpr FamilyPreset kPresets[] = {
    {"tiny", 2, 64, 4, 2, 16, 192, 512, 256},  // q/k/v biases
    {"small", 12, 768, 12, 2, 64, 2048, 32000, 2048},
};

}  // namespace

const FamilyDescriptor kQwen2Family = {
    .family = Family::kQwen2,
    .model_type = "qwen2",
    .architecture = "Qwen2ForCausalLM",
    .tensors = kLlamaTensorNames,
    .presets = kPresets,
    .parse = Parse,
    .write = Write,
    .set_defaults = SetDefaults,
    .check_generated = CheckGenerated,
    .kv_heads_follow_heads = false,
    .scale_residual_init = false,
};

}  // namespace mobius::model
