// Where a layer unit's parameters live in its device buffers.
//
// A unit's weights are one bf16 device buffer and its gradients one fp32 device buffer, with the
// same layout: each tensor the unit reads (owned ones, then shared ones such as the tied head's token
// embedding) at an element offset, 32-element aligned (64-byte rows of bf16). Tensors keep their
// Hugging Face names and checkpoint shapes (layer_units.h): GPT-2 Conv1D [in, out], nn.Linear
// [out, in]; the runner reads both layouts through GEMM transposes, never through copies.
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
};

struct UnitParamLayout {
  int64_t unit_index = 0;
  std::vector<UnitParam> params;
  int64_t total_elements = 0;   // including alignment padding

  uint64_t weight_bytes() const { return static_cast<uint64_t>(total_elements) * 2; }  // bf16
  uint64_t grad_bytes() const { return static_cast<uint64_t>(total_elements) * 4; }    // fp32
  // nullptr when the unit does not read `name`.
  const UnitParam* Find(const std::string& name) const;
};

// INVALID_ARGUMENT for a unit index outside [0, units).
absl::StatusOr<UnitParamLayout> MakeUnitParamLayout(const model::ModelDescription& model,
                                                    int64_t unit_index);

}  // namespace mobius::units

#endif  // MOBIUS_COMMON_RUN_UNIT_PARAMS_H_
