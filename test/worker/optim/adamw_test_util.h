// Test helpers for the optimizer: owned tensors with random contents and tolerant comparisons.
#ifndef MOBIUS_TEST_WORKER_OPTIM_ADAMW_TEST_UTIL_H_
#define MOBIUS_TEST_WORKER_OPTIM_ADAMW_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/optim/adamw.h"

namespace mobius::optim::testing {

// One tensor's optimizer state, owned.
struct TensorState {
  std::vector<float> master, m, v, grad;
  std::vector<uint16_t> bf16;  // the 16-bit copy: bf16 bits, or fp16 bits with out_fp16

  // Random state as after a few steps: master ~ N(0,1), m ~ N(0,0.1), v = |N(0,0.01)|, grad ~ N(0,1)
  // with every 13th gradient exactly 0.
  static TensorState Random(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    TensorState s;
    s.master.resize(n);
    s.m.resize(n);
    s.v.resize(n);
    s.grad.resize(n);
    s.bf16.assign(n, 0xdead);
    for (size_t i = 0; i < n; ++i) {
      s.master[i] = normal(rng);
      s.m[i] = 0.1f * normal(rng);
      s.v[i] = std::fabs(0.01f * normal(rng));
      s.grad[i] = i % 13 == 12 ? 0.0f : normal(rng);
    }
    return s;
  }

  ParamBuffers Buffers(bool decay = true, bool out_fp16 = false) {
    return ParamBuffers{master.data(), m.data(), v.data(), grad.data(), bf16.data(), master.size(),
                        decay, out_fp16};
  }
};

struct DiffStats {
  double max_abs = 0;
  double max_rel = 0;
  size_t violations = 0;  // elements outside |a - b| <= rtol * |b| + atol
};

// Elementwise |a - b| <= rtol * |b| + atol_scale * max|b| (atol_scale: relative to the tensor's
// largest magnitude, which covers cancellation where a value passes near 0).
inline DiffStats Compare(const std::vector<float>& a, const std::vector<float>& b, double rtol,
                         double atol_scale) {
  double max_b = 0;
  for (float x : b) max_b = std::max(max_b, std::fabs(static_cast<double>(x)));
  const double atol = atol_scale * max_b;
  DiffStats d;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(a[i]) - b[i]);
    d.max_abs = std::max(d.max_abs, diff);
    if (b[i] != 0) d.max_rel = std::max(d.max_rel, diff / std::fabs(static_cast<double>(b[i])));
    if (!(diff <= rtol * std::fabs(static_cast<double>(b[i])) + atol)) ++d.violations;
  }
  return d;
}

inline std::string Describe(const char* what, const DiffStats& d) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s: max abs diff %.3g, max rel diff %.3g, violations %zu", what,
                d.max_abs, d.max_rel, d.violations);
  return buf;
}

// The kernels this test binary can exercise; unsupported ones are skipped by the caller.
inline std::vector<Kernel> AllKernels() { return {Kernel::kScalar, Kernel::kAvx2, Kernel::kAvx512}; }

inline std::string KernelParamName(const ::testing::TestParamInfo<Kernel>& info) {
  return KernelName(info.param);
}

#define MOBIUS_SKIP_IF_UNAVAILABLE(kernel)                                          \
  if (!::mobius::optim::KernelAvailable(kernel)) {                                  \
    GTEST_SKIP() << "kernel " << ::mobius::optim::KernelName(kernel)                \
                 << " is not supported by this CPU";                                \
  }

}  // namespace mobius::optim::testing

#endif  // MOBIUS_TEST_WORKER_OPTIM_ADAMW_TEST_UTIL_H_
