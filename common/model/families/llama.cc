// Llama 2/3 (transformers LlamaConfig / LlamaForCausalLM): RMSNorm, SwiGLU, RoPE (with linear or
// llama3 rope_scaling), optional attention_bias (q, k, v and o) and mlp_bias, untied head.
#include "absl/strings/str_cat.h"
#include "common/model/families/families.h"
#include "common/model/model_config_parse.h"
#include "common/status_macros.h"

namespace mobius::model {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Parse(const ConfigFields& f, ModelConfig& c) {
  MOBIUS_RETURN_IF_ERROR(ParseLlamaLike(f, c, {}));
  MOBIUS_ASSIGN_OR_RETURN(c.attention_bias, f.Bool("attention_bias", false));
  c.attention_output_bias = c.attention_bias;
  MOBIUS_ASSIGN_OR_RETURN(c.mlp_bias, f.Bool("mlp_bias", false));
  return absl::OkStatus();
}

void Write(const ModelConfig& c, Json& j) {
  WriteLlamaLike(c, /*head_dim=*/true, j);
  j["attention_bias"] = c.attention_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["pretraining_tp"] = 1;
}

void SetDefaults(ModelConfig& c) {
  SetLlamaLikeDefaults(c, /*norm_eps=*/1e-5, /*rope_theta=*/10000.0, /*tied=*/false,
                       /*last_token_ids=*/false);
}

constexpr FamilyPreset kPresets[] = {
    {"tiny", 2, 64, 4, 2, 16, 192, 512, 256},  // GQA, untied lm_head
    {"small", 12, 768, 12, 4, 64, 2048, 32000, 2048},
};

}  // namespace

const FamilyDescriptor kLlamaFamily = {
    .family = Family::kLlama,
    .model_type = "llama",
    .architecture = "LlamaForCausalLM",
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
