// Test helpers for the reference model: loading golden safetensors into reference Parameters and
// comparing tensors with a stated tolerance, reporting the worst element.
#ifndef MOBIUS_TEST_WORKER_REFERENCE_TENSOR_COMPARE_H_
#define MOBIUS_TEST_WORKER_REFERENCE_TENSOR_COMPARE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "worker/reference/parameters.h"

namespace mobius::reference::testing {

// Every tensor of one .safetensors file, widened to fp32.
absl::StatusOr<Parameters> LoadSafetensors(const std::string& path);

// The worst element of |got - want|.
struct Difference {
  double max_abs = 0.0;   // max |got - want|
  double max_want = 0.0;  // max |want| (scale for the relative bound)
  int64_t index = -1;     // where max_abs occurs
  float got = 0.0f, want = 0.0f;
};
Difference Compare(const float* got, const float* want, int64_t n);

// Passes when max |got - want| <= atol + rtol * max |want| over the whole tensor (a per-tensor
// bound: fp32 rounding scales with the tensor's magnitude, not with each tiny element).
// On failure the message names the tensor and its worst element.
::testing::AssertionResult TensorNear(const std::string& name, const std::vector<float>& got,
                                      const std::vector<float>& want, double atol, double rtol);

}  // namespace mobius::reference::testing

#endif  // MOBIUS_TEST_WORKER_REFERENCE_TENSOR_COMPARE_H_
