// Where a layer unit's parameters live in its device buffers.
//
// A unit's weights are one bf16 device buffer and its gradients one fp32 device buffer, with the
// same layout: each tensor the unit reads (owned ones, then shared ones such as the tied head's token
// embedding) at an element offset, 32-element aligned (64-byte rows of bf16). Tensors keep their
// Hugging Face names and checkpoint shapes (layer_units.h): GPT-2 Conv1D [in, out], nn.Linear
// [out, in]; the runner reads both layouts through GEMM transposes, never through copies.
//
// QLoRA (MakeUnitParamLayout with nf4_base): every linear weight of the decoder blocks that LoRA
// could adapt (model::LoraTargetNames: attention and MLP projections, each expert's; not the
// router, norms, embeddings or the head) is held as its NF4 blob (common/numeric/nf4.h) in the
// same 16-bit buffer: `offset` and `storage_elements` then count 16-bit slots, num_elements the
// weight's values. The gradient buffer of such a unit is unused (the base is frozen).
//
// Value type; thread-compatible.
#ifndef MOBIUS_COMMON_RUN_UNIT_PARAMS_H_
#define MOBIUS_COMMON_RUN_UNIT_PARAMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/layer_units.h"

namespace mobius::units {

struct UnitParam {
  std::string name;             // HF tensor name
  std::vector<int64_t> shape;   // as stored in the checkpoint
  int64_t num_elements = 0;
  int64_t offset = 0;           // elements from the buffer start
  bool shared = false;          // owned by another unit (the tied head's token embedding)
  bool nf4 = false;             // held as an NF4 blob (QLoRA base)
  int64_t storage_elements = 0;  // 16-bit slots it occupies: num_elements, or the blob's
};

struct UnitParamLayout {
  int64_t unit_index = 0;
  std::vector<UnitParam> params;
  int64_t total_elements = 0;   // 16-bit slots, including alignment padding
  // The largest NF4 weight's values (0 without): the scratch a linear dequantises into.
  int64_t nf4_scratch_elements = 0;

  uint64_t weight_bytes() const { return static_cast<uint64_t>(total_elements) * 2; }  // bf16
  uint64_t grad_bytes() const { return static_cast<uint64_t>(total_elements) * 4; }    // fp32
  // nullptr when the unit does not read `name`.
  const UnitParam* Find(const std::string& name) const;
};

// INVALID_ARGUMENT for a unit index outside [0, units), or nf4_base on a family whose linears are
// stored [in, out] (GPT-2's Conv1D: its fused c_attn is read as column slices).
absl::StatusOr<UnitParamLayout> MakeUnitParamLayout(const model::ModelDescription& model,
                                                    int64_t unit_index, bool nf4_base = false);

// The names of the weights an NF4 base quantises (above), in LoraModules order; INVALID_ARGUMENT
// for a family it cannot quantise (Conv1D weights).
absl::StatusOr<std::vector<std::string>> Nf4BaseWeights(const model::ModelConfig& config);

}  // namespace mobius::units

#endif  // MOBIUS_COMMON_RUN_UNIT_PARAMS_H_
