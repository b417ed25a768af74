// Helpers for the CPU kernel tests: bf16 random inputs with their exact fp32 values (what the fp32
// reference is fed), and a tolerance check that reports the worst element of each tensor.
//
// Tolerances are |got - want| <= rtol * |want| + atol. Constants used by the tests:
//   kBf16Rtol = 2^-7: one bf16 rounding of the output is at most 2^-8 relative; an fp32 result
//     that lands next to a rounding boundary may round the other way than the reference, which
//     is one bf16 ulp, 2^-7 relative.
//   kFp32Rtol = 2e-5: fp32 accumulation over at most a few hundred terms vs the reference's double.
// atol is stated per test, as a fraction of the largest |want| of the tensor (cancellation).
#ifndef MOBIUS_TEST_WORKER_KERNELS_KERNEL_TEST_UTIL_H_
#define MOBIUS_TEST_WORKER_KERNELS_KERNEL_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/numeric/bf16.h"
#include "gtest/gtest.h"

namespace mobius::kernels::cpu::testing {

inline constexpr double kBf16Rtol = 1.0 / 128;
inline constexpr double kFp32Rtol = 2e-5;

// A bf16 tensor and its exact fp32 value.
struct Bf16Tensor {
  std::vector<uint16_t> bits;
  std::vector<float> f32;
  uint16_t* data() { return bits.data(); }
  const uint16_t* data() const { return bits.data(); }
  int64_t size() const { return static_cast<int64_t>(bits.size()); }
};

inline Bf16Tensor FromFloats(const std::vector<float>& values) {
  Bf16Tensor t;
  t.bits.resize(values.size());
  t.f32.resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    t.bits[i] = numeric::Fp32ToBf16(values[i]);
    t.f32[i] = numeric::Bf16ToFp32(t.bits[i]);
  }
  return t;
}

inline Bf16Tensor RandomBf16(int64_t n, float stddev, std::mt19937& rng, float mean = 0.0f) {
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> values(n);
  for (float& x : values) x = dist(rng);
  return FromFloats(values);
}

inline std::vector<float> ToFloats(const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = numeric::Bf16ToFp32(bits[i]);
  return out;
}

inline double MaxAbs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

// Checks every element; on failure (or with MOBIUS_KERNELS_VERBOSE set) reports the worst element:
// the one whose |diff| uses the largest share of its tolerance.
inline void ExpectClose(const std::string& name, const std::vector<float>& got,
                        const std::vector<float>& want, double rtol, double atol) {
  ASSERT_EQ(got.size(), want.size()) << name;
  size_t worst = 0;
  double worst_share = -1.0, max_abs_diff = 0.0;
  int64_t failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double tol = rtol * std::fabs(static_cast<double>(want[i])) + atol;
    const double share = std::isnan(diff) ? INFINITY : diff / std::max(tol, 1e-30);
    max_abs_diff = std::max(max_abs_diff, diff);
    if (share > worst_share) {
      worst_share = share;
      worst = i;
    }
    if (!(diff <= tol)) ++failures;
  }
  char line[512];
  std::snprintf(line, sizeof(line),
                "%s: %lld of %zu outside tolerance (rtol %.3g, atol %.3g); max |diff| %.3g; worst "
                "at [%zu]: got %.8g want %.8g (%.3g of its tolerance)",
                name.c_str(), static_cast<long long>(failures), got.size(), rtol, atol,
                max_abs_diff, worst, got.empty() ? 0.0 : got[worst],
                want.empty() ? 0.0 : want[worst], worst_share);
  EXPECT_EQ(failures, 0) << line;
  if (std::getenv("MOBIUS_KERNELS_VERBOSE") != nullptr) std::printf("  %s\n", line);
}

// Bitwise equality (for the determinism checks).
template <typename T>
void ExpectBitwiseEqual(const std::string& name, const std::vector<T>& a, const std::vector<T>& b) {
  ASSERT_EQ(a.size(), b.size()) << name;
  int64_t mismatches = 0;
  size_t first = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      if (mismatches++ == 0) first = i;
    }
  }
  EXPECT_EQ(mismatches, 0) << name << ": " << mismatches << " elements differ, first at [" << first
                           << "]";
}

}  // namespace mobius::kernels::cpu::testing

#endif  // MOBIUS_TEST_WORKER_KERNELS_KERNEL_TEST_UTIL_H_
