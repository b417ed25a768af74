// One descriptor per supported model family, in one plain table (Families()): its names
// (model_type, architecture), its Hugging Face tensor names, its presets and generator defaults,
// and how its config.json is read and written. Each family is one file in common/model/families/;
// the config parser (model_config_parse.h), the layer units (layer_units.h), the config.json
// writer (config_json.h), the reference model's parameter names and the tiny-model generator
// (worker/) all take the family's facts from here, and never switch on the family themselves.
//
// Adding a family: a Family enum value (model_config.h), one file in families/ defining its
// descriptor (declared in families/families.h), one line in the table (family.cc), and its tests;
// family_table_test walks the table (config.json round trip, tensor names of the layer units and
// of the reference parameters agree).
//
// Thread-safety: immutable constants.
#ifndef MOBIUS_COMMON_MODEL_FAMILY_H_
#define MOBIUS_COMMON_MODEL_FAMILY_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/model/config_fields.h"
#include "common/model/model_config.h"

namespace mobius::model {

// Module paths of one decoder block, relative to "<layer_prefix><i>."; a tensor is
// "<path>.weight" / "<path>.bias". nullptr: the module does not exist in this family's naming.
// Which biases and norm biases exist follows from the ModelConfig (attention_bias, norm kind, ...).
struct BlockTensorNames {
  const char* norm1 = nullptr;  // before attention
  const char* qkv = nullptr;    // fused q/k/v projection (GPT-2 c_attn); else q, k, v
  const char* q = nullptr;
  const char* k = nullptr;
  const char* v = nullptr;
  const char* o = nullptr;       // attention output projection
  const char* sinks = nullptr;   // attention sinks "<sinks>" [H] (ModelConfig::attention_sinks)
  const char* q_norm = nullptr;  // qk_norm RMSNorms (used only when ModelConfig::qk_norm)
  const char* k_norm = nullptr;
  const char* norm2 = nullptr;  // before the MLP
  const char* fc = nullptr;     // GELU MLP: fc -> gelu -> proj
  const char* proj = nullptr;
  const char* gate = nullptr;  // SwiGLU MLP: down(silu(gate) * up)
  const char* up = nullptr;
  const char* down = nullptr;
  // Mixture of experts (ModelConfig::moe; a layer with experts has these instead of gate/up/down):
  // the router linear "<moe_router>.weight" [E, C] (and ".bias" with MoeConfig::router_bias) and
  // expert e's SwiGLU "<moe_experts>.<e>.<moe_gate | moe_up | moe_down>.weight".
  // kClampedSwiGlu experts (gpt-oss): "<moe_experts>.<e>.<moe_gate_up | moe_down>.<weight | bias>",
  // names of slices: the checkpoint holds each as one tensor of all experts, "<moe_experts>.
  // <moe_gate_up | moe_down>" [E, ...] and "..._bias" [E, ...] (FusedExpertTensors, layer_units.h).
  const char* moe_router = nullptr;
  const char* moe_experts = nullptr;
  const char* moe_gate = nullptr;
  const char* moe_up = nullptr;
  const char* moe_down = nullptr;
  const char* moe_gate_up = nullptr;
};

struct TensorNames {
  const char* token_embedding;     // full tensor name, [V, C]
  const char* position_embedding;  // full tensor name of learned positions [P, C]; else nullptr
  const char* layer_prefix;        // "model.layers." (block i's modules under "<prefix><i>.")
  const char* final_norm;          // module path ("model.norm")
  const char* lm_head;             // full tensor name of an untied head [V, C]
  bool in_out_layout;              // weights stored [in, out] (GPT-2 Conv1D); else [out, in]
  BlockTensorNames block;
};

// A size preset of the tiny-model generator (worker/checkpoint/model_init.h).
struct FamilyPreset {
  const char* name;
  int64_t layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, positions;
};

struct FamilyDescriptor {
  Family family;
  const char* model_type;    // config.json "model_type" (also the family's name everywhere)
  const char* architecture;  // config.json "architectures"[0] as the generator writes it
  TensorNames tensors;
  absl::Span<const FamilyPreset> presets;

  // Reads the family's keys of config.json (model_type and vocab_size are already read) into `c`,
  // setting the fixed math (norm, mlp, position kinds, biases). Errors name the JSON field.
  absl::Status (*parse)(const ConfigFields& fields, ModelConfig& c);
  // Writes the family's keys into `j`, after "vocab_size" and before the common trailing keys.
  void (*write)(const ModelConfig& c, nlohmann::ordered_json& j);
  // The generator's defaults for a config whose sizes are set: fixed math, eps, rope theta, tied
  // head, biases, qk_norm, token ids (from vocab_size).
  void (*set_defaults)(ModelConfig& c);
  // Extra checks of a generated config (what the family's config.json cannot express); nullptr
  // when none. INVALID_ARGUMENT with the reason.
  absl::Status (*check_generated)(const ModelConfig& c);

  bool kv_heads_follow_heads;  // no grouped-query attention: presets' kv_heads = heads
  bool scale_residual_init;    // init the o and MLP proj weights N(0, 0.02 / sqrt(2 L)) (GPT-2)
};

// Every supported family, in the order they are listed to users.
absl::Span<const FamilyDescriptor* const> Families();

// The descriptor of `family` (every enum value has one).
const FamilyDescriptor& FamilyOf(Family family);

// The family whose model_type is `model_type`; nullptr when none.
const FamilyDescriptor* FindFamily(absl::string_view model_type);

// "gpt2, llama, mistral, qwen2, qwen3"
std::string SupportedModelTypes();

}  // namespace mobius::model

#endif  // MOBIUS_COMMON_MODEL_FAMILY_H_
