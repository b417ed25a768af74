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
  // A mixture of experts: the expert whose linear this is (-1: not an expert's). An expert's module
  // sees only the rows routed to that expert (the block's routed rows, sorted by expert).
  int64_t expert = -1;
  bool routed() const { return expert >= 0; }
  std::string a_name() const;  // PEFT's "base_model.model.<path>.lora_A.weight"
  std::string b_name() const;  // ... ".lora_B.weight"
  // A module of the block's dense MLP (every family's MLP modules sit under ".mlp."): it sees the
  // MLP's token chunks (unit_workspace.h) rather than all of a microbatch's rows. False for
  // experts.
  bool in_mlp() const;
};

// The family's adaptable module names, in block order ("c_attn", "c_proj", "c_fc" for GPT-2;
// "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj" for the Llama
// family). A mixture of experts adds its experts' names (Qwen3-MoE: gate_proj, up_proj, down_proj,
// the dense MLP's too; Mixtral: w1, w3, w2): as in PEFT, a name adapts every expert of every block
// with experts, and the dense MLP's modules in dense blocks. The router is not adaptable (PEFT
// would match "gate"; LoraModules refuses it by name): it stays frozen.
std::vector<std::string> LoraTargetNames(const ModelConfig& config);

// PEFT's default target_modules for the family (transformers' model_type mapping in PEFT 0.10:
// gpt2 c_attn; llama, mistral, qwen2, qwen3 q_proj and v_proj).
std::vector<std::string> DefaultLoraTargets(const ModelConfig& config);

// Every adapted module of the model for `targets`, by layer, then in LoraTargetNames order within
// a block (experts: expert 0's gate, up, down modules among the targets, then expert 1's, ...).
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

// Where one unit's adapters keep their forward-to-backward state h = x A^T ([rows, rank] fp32), in
// slots of N rows (N: the call's tokens): a module that sees all rows (or the dense MLP's chunks of
// them) has one slot; the experts' modules of one target name share K = experts_per_token slots,
// the block's N K routed rows sorted by expert, expert e's from its first routed row. The modules'
// scratch d(loss)/dh takes max(1, K if any module is routed) slots after them.
struct LoraStateSlots {
  std::vector<int64_t> first;  // per module of `unit_modules`: its first slot
  int64_t count = 0;           // slots of all the modules
  int64_t scratch = 0;         // slots of the scratch (0 without modules)
};
LoraStateSlots AssignLoraStateSlots(const std::vector<LoraModule>& unit_modules,
                                    int64_t experts_per_token);

// Adapter parameters: r x (in + out) per adapted module, summed.
int64_t LoraParameters(const std::vector<LoraModule>& modules, int64_t rank);

}  // namespace mobius::model

#endif  // MOBIUS_COMMON_MODEL_LORA_H_
