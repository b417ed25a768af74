// GPT-2 (transformers GPT2Config / GPT2LMHeadModel): LayerNorm with biases, GELU (tanh) MLP,
// learned positions, Conv1D weights stored [in, out], fused c_attn, biases on every linear.
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/model/families/families.h"
#include "common/model/model_config_parse.h"
#include "common/status_macros.h"

namespace mobius::model {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Parse(const ConfigFields& f, ModelConfig& c) {
  MOBIUS_ASSIGN_OR_RETURN(c.hidden_size, f.Positive("n_embd", kMaxHiddenSize));
  MOBIUS_ASSIGN_OR_RETURN(c.num_layers, f.Positive("n_layer", kMaxLayers));
  MOBIUS_ASSIGN_OR_RETURN(c.num_heads, f.Positive("n_head", kMaxHeads));
  MOBIUS_ASSIGN_OR_RETURN(c.intermediate_size,
                          f.Positive("n_inner", kMaxIntermediateSize, 4 * c.hidden_size));
  MOBIUS_ASSIGN_OR_RETURN(c.max_position_embeddings, f.Positive("n_positions", kMaxPositions));
  MOBIUS_ASSIGN_OR_RETURN(c.norm_eps, f.PositiveNumber("layer_norm_epsilon", 1e-5));
  MOBIUS_ASSIGN_OR_RETURN(std::optional<std::string> act, f.String("activation_function"));
  // Both names are GELU with the tanh approximation; plain "gelu" (erf) is different math.
  if (act && *act != "gelu_new" && *act != "gelu_pytorch_tanh") {
    return f.Error(
        "activation_function",
        absl::StrCat("unsupported \"", *act, "\" (supported: gelu_new, gelu_pytorch_tanh)"));
  }
  MOBIUS_ASSIGN_OR_RETURN(c.tie_word_embeddings, f.Bool("tie_word_embeddings", true));
  if (c.hidden_size % c.num_heads != 0) {
    return f.Error("n_head", absl::StrCat("n_embd ", c.hidden_size, " is not divisible by ",
                                          c.num_heads, " heads"));
  }
  c.num_kv_heads = c.num_heads;
  c.head_dim = c.hidden_size / c.num_heads;
  c.norm = NormKind::kLayerNorm;
  c.mlp = MlpKind::kGeluTanh;
  c.position = PositionKind::kLearned;
  c.attention_bias = c.attention_output_bias = c.mlp_bias = true;
  return absl::OkStatus();
}

void Write(const ModelConfig& c, Json& j) {
  j["n_positions"] = c.max_position_embeddings;
  j["n_ctx"] = c.max_position_embeddings;
  j["n_embd"] = c.hidden_size;
  j["n_layer"] = c.num_layers;
  j["n_head"] = c.num_heads;
  j["n_inner"] = c.intermediate_size;
  j["activation_function"] = "gelu_new";
  j["layer_norm_epsilon"] = c.norm_eps;
  j["resid_pdrop"] = 0.0;
  j["embd_pdrop"] = 0.0;
  j["attn_pdrop"] = 0.0;
}

void SetDefaults(ModelConfig& c) {
  c.norm = NormKind::kLayerNorm;
  c.mlp = MlpKind::kGeluTanh;
  c.position = PositionKind::kLearned;
  c.norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = true;
  c.attention_bias = c.attention_output_bias = c.mlp_bias = true;
  c.qk_norm = false;
  c.bos_token_id = c.eos_token_id = c.vocab_size - 1;  // <|endoftext|> is the last token
}

absl::Status CheckGenerated(const ModelConfig& c) {
  if (c.num_kv_heads != c.num_heads) {
    return absl::InvalidArgumentError(
        "gpt2 has no grouped-query attention: kv_heads must equal heads");
  }
  return absl::OkStatus();
}

constexpr FamilyPreset kPresets[] = {
    {"tiny", 2, 64, 4, 4, 16, 256, 512, 256},
    {"small", 12, 768, 12, 12, 64, 3072, 50257, 1024},  // = GPT-2 124M
};

}  // namespace

const FamilyDescriptor kGpt2Family = {
    .family = Family::kGpt2,
    .model_type = "gpt2",
    .architecture = "GPT2LMHeadModel",
    .tensors = {.token_embedding = "transformer.wte.weight",
                .position_embedding = "transformer.wpe.weight",
                .layer_prefix = "transformer.h.",
                .final_norm = "transformer.ln_f",
                .lm_head = "lm_head.weight",
                .in_out_layout = true,  // Conv1D: [in, out]
                .block = {.norm1 = "ln_1",
                          .qkv = "attn.c_attn",
                          .o = "attn.c_proj",
                          .norm2 = "ln_2",
                          .fc = "mlp.c_fc",
                          .proj = "mlp.c_proj"}},
    .presets = kPresets,
    .parse = Parse,
    .write = Write,
    .set_defaults = SetDefaults,
    .check_generated = CheckGenerated,
    .kv_heads_follow_heads = true,
    .scale_residual_init = true,
};

}  // namespace mobius::model
