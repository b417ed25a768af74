#include "test/worker/model/units_test_util.h"

#include <algorithm>
#include <cmath>

#include "common/model/model_config_parse.h"
#include "common/numeric/bf16.h"
#include "common/status_macros.h"
#include "test/testing/paths.h"
#include "test/worker/reference/tensor_compare.h"

namespace mobius::units::testing {

absl::StatusOr<Golden> LoadGolden(const std::string& name) {
  const std::string dir = !name.empty() && name[0] == '/'
                              ? name  // generated at test time (make_golden.py OUT_DIR CASE)
                              : mobius::testing::SourcePath("test/reference/golden/" + name);
  Golden g;
  MOBIUS_ASSIGN_OR_RETURN(g.config, model::LoadModelConfig(dir + "/config.json"));
  MOBIUS_ASSIGN_OR_RETURN(g.fp32, reference::testing::LoadSafetensors(dir + "/model.safetensors"));
  MOBIUS_RETURN_IF_ERROR(reference::SplitFusedTensors(g.config, &g.fp32));
  g.params = g.fp32;
  for (auto& [tensor_name, tensor] : g.params.tensors) {
    std::vector<uint16_t>& bits = g.bf16[tensor_name];
    bits.resize(tensor.data.size());
    numeric::Fp32ToBf16(tensor.data.data(), bits.data(), bits.size());
    numeric::Bf16ToFp32(bits.data(), tensor.data.data(), bits.size());
  }
  MOBIUS_ASSIGN_OR_RETURN(g.outputs,
                          reference::testing::LoadSafetensors(dir + "/outputs.safetensors"));
  for (float x : g.outputs.at("tokens").data) g.tokens.push_back(std::lround(x));
  for (float x : g.outputs.at("targets").data) g.targets.push_back(std::lround(x));
  g.b = g.outputs.at("tokens").shape[0];
  g.t = g.outputs.at("tokens").shape[1];
  return g;
}

Diff MaxDiff(const std::vector<float>& got, const std::vector<float>& want) {
  Diff d;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    d.max_abs = std::max(d.max_abs, std::fabs(double{got[i]} - want[i]));
    d.max_want = std::max(d.max_want, std::fabs(double{want[i]}));
  }
  if (got.size() != want.size()) d.max_abs = INFINITY;
  return d;
}

}  // namespace mobius::units::testing
