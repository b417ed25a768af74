// The portable reference kernels (no FMA; built with -ffp-contract=off, see CMakeLists.txt).
#include "worker/optim/adamw_kernels.h"

namespace mobius::optim::internal {

void AdamWScalarKernel(const AdamWScalars& s, float* master, float* m, float* v, const float* grad,
                       uint16_t* out, HalfOut format, size_t n) {
  if (format == HalfOut::kF16) {
    AdamWElements<false, HalfOut::kF16>(s, master, m, v, grad, out, 0, n);
  } else {
    AdamWElements<false, HalfOut::kBf16>(s, master, m, v, grad, out, 0, n);
  }
}

double SumSquaresScalar(const float* x, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = x[i];
    sum += d * d;
  }
  return sum;
}

}  // namespace mobius::optim::internal
