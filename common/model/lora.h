// LoRA (low-rank adapters, as Hugging Face PEFT defines them) on a model's decoder blocks: which
// linear modules can carry an adapter, their shapes, and PEFT's tensor names, from the family's
// descriptor (family.h). Pure; shared by the job spec's checks, the planner's memory estimate, the
// training engine and the merge tool.
//
// A target module is named as PEFT's target_modules names it: the last component of the module
// path ("q_proj", "c_attn"). PEFT matches by that suffix, so a name can stand for several modules
// of a block (GPT-2's "c_proj": attn.c_proj and mlp.c_proj). Adapter of a module with weight W
// (in -> out features): A [r, in], B [out, r], both fp32; the module's output gains
// (alpha / r) * dropout(x) A^T B^T. PEFT's tensor names:
//   "base_model.model." + <module path> + ".lora_A.weight" / ".lora_B.weight"
// e.g. base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight. A Conv1D base weight (GPT-2,
// stored [in, out]) keeps the same A and B shapes; merging adds (B A)^T there (PEFT's
// fan_in_fan_out).
//
// Thread-safety: pure functions.
#ifndef MOBIUS_COMMON_MODEL_LORA_H_
#define MOBIUS_COMMON_MODEL_LORA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/model_config.h"

namespace mobius::model {

// One adapted module of one block.
struct LoraModule {
  std::string target;      // its target_modules name: "q_proj", "c_proj"
  int64_t layer = 0;       // decoder block index (0-based; layer unit layer + 1)
  std::string path;        // HF module path: "model.layers.0.self_attn.q_proj"
  std::string weight;      // the base weight's tensor name: path + ".weight"
  int64_t in = 0, out = 0;  // features
  bool in_out = false;     // base weight stored [in, out] (Conv1D)
  std::string a_name() const;  // PEFT's "base_model.model.<path>.lora_A.weight"
  std::string b_name() const;  // ... ".lora_B.weight"
  // A module of the block's MLP (every family's MLP modules sit under ".mlp."): it sees the MLP's
  // token chunks (unit_workspace.h) rather than all of a microbatch's rows.
  bool in_mlp() const;
};

// The family's adaptable module names, in block order ("c_attn", "c_proj", "c_fc" for GPT-2;
// "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj" for the Llama
// family). A mixture of experts: the MLP's names only if some block is dense (its experts carry no
// adapters yet, issue 32), and LoraModules adapts those in its dense blocks only.
std::vector<std::string> LoraTargetNames(const ModelConfig& config);

// PEFT's default target_modules for the family (transformers' model_type mapping in PEFT 0.10:
// gpt2 c_attn; llama, mistral, qwen2, qwen3 q_proj and v_proj).
std::vector<std::string> DefaultLoraTargets(const ModelConfig& config);

// Every adapted module of the model for `targets`, by layer, then in LoraTargetNames order.
// INVALID_ARGUMENT naming `field`[i] for a name the family does not have (with the family's
// names), or a name given twice.
absl::StatusOr<std::vector<LoraModule>> LoraModules(const ModelConfig& config,
                                                    const std::vector<std::string>& targets,
                                                    const std::string& field = "target_modules");

// The adapter's checks against the model: every target exists (LoraModules) and 1 <= rank <=
// min(in, out) of every adapted module (`rank_field` names the rank). INVALID_ARGUMENT.
absl::Status ValidateLora(const ModelConfig& config, int64_t rank,
                          const std::vector<std::string>& targets,
                          const std::string& rank_field = "rank",
                          const std::string& targets_field = "target_modules");

// Adapter parameters: r x (in + out) per adapted module, summed.
int64_t LoraParameters(const std::vector<LoraModule>& modules, int64_t rank);

}  // namespace mobius::model

#endif  // MOBIUS_COMMON_MODEL_LORA_H_
