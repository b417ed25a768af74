// The descriptors of the supported families (family.h), one per file in this folder, and the
// helpers the RoPE/SwiGLU ("Llama-like") families share. Internal to common/model: callers use
// family.h's table.
#ifndef MOBIUS_COMMON_MODEL_FAMILIES_FAMILIES_H_
#define MOBIUS_COMMON_MODEL_FAMILIES_FAMILIES_H_

#include <cstdint>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "common/model/config_fields.h"
#include "common/model/family.h"
#include "common/model/model_config.h"

namespace mobius::model {

extern const FamilyDescriptor kGpt2Family;     // gpt2.cc
extern const FamilyDescriptor kLlamaFamily;    // llama.cc
extern const FamilyDescriptor kMistralFamily;  // mistral.cc
extern const FamilyDescriptor kQwen2Family;    // qwen2.cc
extern const FamilyDescriptor kQwen3Family;    // qwen3.cc
extern const FamilyDescriptor kQwen3MoeFamily;  // qwen3_moe.cc
extern const FamilyDescriptor kMixtralFamily;   // mixtral.cc
extern const FamilyDescriptor kGptOssFamily;    // gpt_oss.cc

// ---- Shared by the Llama-like families (llama_like.cc) -----------------------------------------

// The HF tensor names of LlamaForCausalLM and its descendants (q_norm/k_norm: Qwen3), and of the
// two MoE families (Llama's plus their router and experts).
extern const TensorNames kLlamaTensorNames;
extern const TensorNames kQwen3MoeTensorNames;
extern const TensorNames kMixtralTensorNames;
extern const TensorNames kGptOssTensorNames;

// The MoE keys Qwen3-MoE and Mixtral share: num_experts_per_tok, router_aux_loss_coef,
// output_router_logits (the expert count and width keys are each family's).
absl::Status ParseMoeCommon(const ConfigFields& f, ModelConfig& c);
void WriteMoeCommon(const ModelConfig& c, nlohmann::ordered_json& j);

enum class HeadDimKey { kOptional, kRequired, kNever };  // "head_dim": read if given / must / never

struct LlamaLikeRules {
  int64_t default_kv_heads = 0;  // num_key_value_heads when absent; 0: num_attention_heads
  HeadDimKey head_dim = HeadDimKey::kOptional;
};

// The keys every Llama-like config.json has (sizes, rms_norm_eps, rope, tie_word_embeddings,
// hidden_act) with their checks, and the fixed math (RMSNorm, SwiGLU, RoPE). Biases, qk_norm and
// sliding windows are the family's own.
absl::Status ParseLlamaLike(const ConfigFields& f, ModelConfig& c, const LlamaLikeRules& rules);
// "rope_scaling" (null or absent: none) into c.rope_scaling.
absl::Status ParseRopeScaling(const ConfigFields& f, ModelConfig& c);
nlohmann::ordered_json RopeScalingJson(const RopeScaling& s);

// Rejects "use_sliding_window": true (Qwen2/Qwen3: per-layer windows are not modelled).
absl::Status RejectUseSlidingWindow(const ConfigFields& f);

// The shared keys, in transformers' order; `head_dim` is written unless the family has no key.
void WriteLlamaLike(const ModelConfig& c, bool head_dim, nlohmann::ordered_json& j);
// Qwen2/Qwen3's window keys: use_sliding_window false, sliding_window null, max_window_layers.
void WriteQwenWindowKeys(const ModelConfig& c, nlohmann::ordered_json& j);

// The Llama-like fixed math and the given defaults; bos = eos = V - 1 with `last_token_ids`, else
// bos 1, eos 2.
void SetLlamaLikeDefaults(ModelConfig& c, double norm_eps, double rope_theta, bool tied,
                          bool last_token_ids);

}  // namespace mobius::model

#endif  // MOBIUS_COMMON_MODEL_FAMILIES_FAMILIES_H_
