#include "test/worker/reference/tensor_compare.h"

#include <cmath>
#include <memory>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "worker/io/safetensors.h"

namespace mobius::reference::testing {

absl::StatusOr<Parameters> LoadSafetensors(const std::string& path) {
  MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<io::SafetensorsFile> file,
                          io::SafetensorsFile::Open(path));
  Parameters out;
  for (const io::TensorView& view : file->tensors()) {
    Tensor& t = out.tensors[view.name];
    t.shape = view.shape;
    t.data.resize(static_cast<size_t>(view.num_elements()));
    io::CopyToF32(view, t.data.data());
  }
  return out;
}

Difference Compare(const float* got, const float* want, int64_t n) {
  Difference d;
  for (int64_t i = 0; i < n; ++i) {
    const double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
    d.max_want = std::max(d.max_want, std::fabs(static_cast<double>(want[i])));
    if (diff > d.max_abs || d.index < 0) {
      d.max_abs = diff;
      d.index = i;
      d.got = got[i];
      d.want = want[i];
    }
    if (std::isnan(got[i]) != std::isnan(want[i])) {
      d.max_abs = INFINITY;
      d.index = i;
      d.got = got[i];
      d.want = want[i];
      break;
    }
  }
  return d;
}

::testing::AssertionResult TensorNear(const std::string& name, const std::vector<float>& got,
                                      const std::vector<float>& want, double atol, double rtol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << name << ": " << got.size() << " elements, golden has " << want.size();
  }
  const Difference d = Compare(got.data(), want.data(), static_cast<int64_t>(got.size()));
  const double bound = atol + rtol * d.max_want;
  const std::string line = absl::StrFormat(
      "%-44s max|diff| %.3e (bound %.3e, max|golden| %.3e) worst [%d]: got %.8g golden %.8g", name,
      d.max_abs, bound, d.max_want, d.index, d.got, d.want);
  if (d.max_abs <= bound) return ::testing::AssertionSuccess() << line;
  return ::testing::AssertionFailure() << line;
}

}  // namespace mobius::reference::testing
