// Helpers for the CPU kernel tests: bf16 or fp16 random inputs with their exact fp32 values (what
// the fp32 reference is fed), and a tolerance check that reports the worst element of each tensor.
// Tests of the 16-bit kernels are templates over the storage type T (worker/kernels/cpu/storage.h:
// uint16_t = bf16, F16 = fp16) and run once per format, with Format<T>'s tolerances.
//
// Tolerances are |got - want| <= rtol * |want| + atol. Constants used by the tests:
//   kBf16Rtol = 2^-7: one bf16 rounding of the output is at most 2^-8 relative; an fp32 result
//     that lands next to a rounding boundary may round the other way than the reference, which
//     is one bf16 ulp, 2^-7 relative.
//   kF16Rtol = 2^-10: the same for fp16 (11-bit significand: one rounding <= 2^-11 relative, one
//     ulp <= 2^-10), and kF16Atol = 2^-24, fp16's subnormal spacing: below 2^-14 fp16 rounds in
//     absolute steps, so a relative bound alone fails for results that land there.
//   kFp32Rtol = 2e-5: fp32 accumulation over at most a few hundred terms vs the reference's double.
// atol is stated per test, as a fraction of the largest |want| of the tensor (cancellation), plus
// Format<T>::kAtol.
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
#include "common/numeric/f16.h"
#include "gtest/gtest.h"
#include "worker/kernels/cpu/storage.h"

namespace mobius::kernels::cpu::testing {

inline constexpr double kBf16Rtol = 1.0 / 128;
inline constexpr double kF16Rtol = 1.0 / 1024;
inline constexpr double kF16Atol = 0x1p-24;
inline constexpr double kFp32Rtol = 2e-5;

// Per storage format: its name and the tolerances of one output rounding (see above).
template <typename T>
struct Format;
template <>
struct Format<uint16_t> {
  static constexpr const char* kName = "bf16";
  static constexpr double kRtol = kBf16Rtol;
  static constexpr double kAtol = 0.0;
};
template <>
struct Format<F16> {
  static constexpr const char* kName = "fp16";
  static constexpr double kRtol = kF16Rtol;
  static constexpr double kAtol = kF16Atol;
};

// The storage formats, for typed test suites: TYPED_TEST_SUITE(Suite, HalfFormats, FormatNames).
using HalfFormats = ::testing::Types<uint16_t, F16>;
struct FormatNames {
  template <typename T>
  static std::string GetName(int) {
    return Format<T>::kName;
  }
};

// x rounded to T (one rounding, storage.h's Store).
template <typename T>
T Round(float x) {
  T out;
  Store(&out, 0, x);
  return out;
}

// A 16-bit tensor and its exact fp32 value.
template <typename T>
struct HalfTensor {
  std::vector<T> bits;
  std::vector<float> f32;
  T* data() { return bits.data(); }
  const T* data() const { return bits.data(); }
  int64_t size() const { return static_cast<int64_t>(bits.size()); }
};
using Bf16Tensor = HalfTensor<uint16_t>;

template <typename T = uint16_t>
HalfTensor<T> FromFloats(const std::vector<float>& values) {
  HalfTensor<T> t;
  t.bits.resize(values.size());
  t.f32.resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    t.bits[i] = Round<T>(values[i]);
    t.f32[i] = Load(t.bits.data(), static_cast<int64_t>(i));
  }
  return t;
}

// N(mean, stddev) values rounded to T; the same draws from `rng` for every format.
template <typename T>
HalfTensor<T> RandomHalf(int64_t n, float stddev, std::mt19937& rng, float mean = 0.0f) {
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> values(n);
  for (float& x : values) x = dist(rng);
  return FromFloats<T>(values);
}

inline Bf16Tensor RandomBf16(int64_t n, float stddev, std::mt19937& rng, float mean = 0.0f) {
  return RandomHalf<uint16_t>(n, stddev, rng, mean);
}

template <typename T>
std::vector<float> ToFloats(const std::vector<T>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = Load(bits.data(), static_cast<int64_t>(i));
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
