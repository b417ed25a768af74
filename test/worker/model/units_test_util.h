// Shared setup of the unit tests: a golden tiny model (test/reference/golden/<name>) with its
// weights rounded to bf16, the fp32 reference run on those rounded weights, and a CpuBackend.
#ifndef MOBIUS_TEST_WORKER_MODEL_UNITS_TEST_UTIL_H_
#define MOBIUS_TEST_WORKER_MODEL_UNITS_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "worker/reference/parameters.h"

namespace mobius::units::testing {

struct Golden {
  model::ModelConfig config;
  reference::Parameters fp32;                        // model.safetensors as stored
  reference::Parameters params;                      // fp32, rounded to bf16 values
  std::map<std::string, std::vector<uint16_t>> bf16;  // the same, as bf16 bits
  reference::Parameters outputs;                     // outputs.safetensors
  std::vector<int32_t> tokens, targets;              // [b, t]
  int64_t b = 0, t = 0;
};

// `name`: a case of test/reference/golden, or an absolute path to a case's directory.
absl::StatusOr<Golden> LoadGolden(const std::string& name);

// max|got - want| and max|want| of one tensor.
struct Diff {
  double max_abs = 0, max_want = 0;
};
Diff MaxDiff(const std::vector<float>& got, const std::vector<float>& want);

}  // namespace mobius::units::testing

#endif  // MOBIUS_TEST_WORKER_MODEL_UNITS_TEST_UTIL_H_
