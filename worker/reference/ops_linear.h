// Linear layers of the reference model: out = inp @ W (+ bias).
//
// Two weight layouts exist in Hugging Face checkpoints: GPT-2's Conv1D stores W as [in, out]
// (y = x @ W + b), nn.Linear stores it as [out, in] (y = x @ W^T + b). Backward functions
// accumulate (+=) into every gradient they are given, so callers zero them first.
#ifndef MOBIUS_WORKER_REFERENCE_OPS_LINEAR_H_
#define MOBIUS_WORKER_REFERENCE_OPS_LINEAR_H_

#include <cstdint>

namespace mobius::reference {

enum class WeightLayout {
  kInOut,  // [in, out]: GPT-2 Conv1D
  kOutIn,  // [out, in]: torch.nn.Linear
};

// out [N, OC] = inp [N, IC] @ W (+ bias [OC]); bias may be nullptr.
void LinearForward(float* out, const float* inp, const float* weight, const float* bias, int64_t n,
                   int64_t in_features, int64_t out_features, WeightLayout layout);

// dinp [N, IC] += dout @ W^T; dweight += inp^T @ dout (in the weight's layout);
// dbias [OC] += sum_n dout. dbias may be nullptr (no bias).
void LinearBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                    const float* weight, int64_t n, int64_t in_features, int64_t out_features,
                    WeightLayout layout);

}  // namespace mobius::reference

#endif  // MOBIUS_WORKER_REFERENCE_OPS_LINEAR_H_
