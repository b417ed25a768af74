// Helpers for the GPU op tests (label `gpu`): device check with a clean skip, device buffers,
// seeded random bf16 or fp16 inputs, and the comparison every op test uses.
//
// Comparison rule (as llm.c's tests): for each output tensor, the worst |got - ref| over all
// elements must be <= tol * max|ref|, and the worst difference is printed with its index, so a
// failing run on the GPU machine says how far off it is, not just that it is. The references are
// plain fp32 C++ in each test, fed the same bf16- or fp16-rounded inputs the kernel reads.
//
// Standard library, CUDA runtime, GoogleTest and common/numeric only: part of the CUDA-only subset.
#ifndef MOBIUS_TEST_GPU_GPU_TEST_UTIL_H_
#define MOBIUS_TEST_GPU_GPU_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "gtest/gtest.h"
#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::gpu_test {

// bf16 has 8 significand bits: rounding to it changes a value by at most 2^-9 relative (half an
// ulp, ~2e-3); two results that differ by a few fp32 ulps can round to neighbouring bf16 values,
// one bf16 ulp (2^-8, ~3.9e-3) apart. Hence the usual tolerance for a bf16 output computed from the
// same inputs in a different fp32 order: two bf16 ulps at the largest magnitude.
inline constexpr double kBf16Tol = 8e-3;
// fp16 has 11 significand bits: the same rule, two fp16 ulps (2 x 2^-10) at the largest magnitude.
inline constexpr double kF16Tol = 2e-3;

using kernels::cuda::HalfType;
// Both 16-bit formats, for tests that run each op in each (SCOPED_TRACE(HalfTypeName(t))).
inline constexpr HalfType kHalfTypes[] = {HalfType::kBf16, HalfType::kF16};
inline double HalfTol(HalfType t) { return t == HalfType::kF16 ? kF16Tol : kBf16Tol; }
inline uint16_t ToHalf(HalfType t, float x) {
  return t == HalfType::kF16 ? numeric::Fp32ToF16(x) : numeric::Fp32ToBf16(x);
}
inline float FromHalf(HalfType t, uint16_t bits) {
  return t == HalfType::kF16 ? numeric::F16ToFp32(bits) : numeric::Bf16ToFp32(bits);
}
// fp32 -> 16-bit -> fp32, the rounding every 16-bit output goes through.
inline float RoundHalf(HalfType t, float x) { return FromHalf(t, ToHalf(t, x)); }

// Empty when a device is usable, else why not (the runtime's error name and text).
inline std::string NoDeviceReason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
  }
  return count == 0 ? "the CUDA runtime reports 0 devices" : "";
}

#define MOBIUS_REQUIRE_GPU()                                                                 \
  do {                                                                                       \
    const std::string mobius_no_device_ = ::mobius::gpu_test::NoDeviceReason();              \
    if (!mobius_no_device_.empty()) GTEST_SKIP() << "no CUDA device: " << mobius_no_device_; \
  } while (0)

#define MOBIUS_ASSERT_KERNEL_OK(expr)                                       \
  do {                                                                      \
    const ::mobius::kernels::cuda::KernelStatus mobius_st_ = (expr);        \
    ASSERT_TRUE(mobius_st_.ok()) << #expr << ": " << mobius_st_.ToString(); \
  } while (0)

#define MOBIUS_ASSERT_CUDA_OK(expr)                                                               \
  do {                                                                                            \
    const cudaError_t mobius_e_ = (expr);                                                         \
    ASSERT_EQ(mobius_e_, cudaSuccess)                                                             \
        << #expr << ": " << cudaGetErrorName(mobius_e_) << ": " << cudaGetErrorString(mobius_e_); \
  } while (0)

// A device copy of a host vector; ToHost() waits for the device and copies back. Failures are
// recorded as test failures (ADD_FAILURE) and leave the buffer null.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : n_(host.size()) {
    if (n_ == 0) return;
    if (cudaMalloc(reinterpret_cast<void**>(&ptr_), n_ * sizeof(T)) != cudaSuccess) {
      ADD_FAILURE() << "cudaMalloc of " << n_ * sizeof(T) << " bytes failed";
      ptr_ = nullptr;
      return;
    }
    if (cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess) {
      ADD_FAILURE() << "cudaMemcpy H2D failed";
    }
  }
  explicit DeviceArray(size_t n, T fill = T{}) : DeviceArray(std::vector<T>(n, fill)) {}
  ~DeviceArray() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return ptr_; }
  size_t size() const { return n_; }
  std::vector<T> ToHost() const {
    std::vector<T> host(n_);
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      ADD_FAILURE() << "kernel failed: " << cudaGetErrorName(e) << ": " << cudaGetErrorString(e);
      return host;
    }
    if (n_ > 0 &&
        cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess) {
      ADD_FAILURE() << "cudaMemcpy D2H failed";
    }
    return host;
  }

 private:
  size_t n_ = 0;
  T* ptr_ = nullptr;
};

// n bf16 values uniform in [-scale, scale] (seeded), and their exact fp32 values.
struct Bf16Data {
  std::vector<uint16_t> bits;
  std::vector<float> values;
};
inline Bf16Data RandomBf16(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  Bf16Data d;
  d.bits.resize(n);
  d.values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    d.bits[i] = numeric::Fp32ToBf16(dist(rng));
    d.values[i] = numeric::Bf16ToFp32(d.bits[i]);
  }
  return d;
}

// The same in either 16-bit format (fp16: the same uniform values, rounded to fp16).
inline Bf16Data RandomHalf(HalfType t, size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  Bf16Data d;
  d.bits.resize(n);
  d.values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    d.bits[i] = ToHalf(t, dist(rng));
    d.values[i] = FromHalf(t, d.bits[i]);
  }
  return d;
}

inline std::vector<float> RandomFloats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<float> ToFloat(const std::vector<uint16_t>& bits) {
  std::vector<float> v(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) v[i] = numeric::Bf16ToFp32(bits[i]);
  return v;
}
inline std::vector<float> ToFloat(HalfType t, const std::vector<uint16_t>& bits) {
  std::vector<float> v(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) v[i] = FromHalf(t, bits[i]);
  return v;
}

// Worst |got - ref| <= tol * max|ref| (and no NaN in got where ref is finite).
inline void ExpectClose(const std::vector<float>& got, const std::vector<float>& ref, double tol,
                        const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double max_ref = 0.0, worst = 0.0;
  size_t worst_at = 0;
  for (size_t i = 0; i < ref.size(); ++i) max_ref = std::max(max_ref, std::fabs(double{ref[i]}));
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::fabs(double{got[i]} - double{ref[i]});
    if (std::isnan(got[i]) != std::isnan(ref[i]) || d > worst || std::isnan(d)) {
      worst = std::isnan(d) ? INFINITY : d;
      worst_at = i;
      if (std::isinf(worst)) break;
    }
  }
  const double limit = tol * std::max(max_ref, 1e-30);
  std::printf(
      "  %-28s worst |diff| %.3e at %zu (got %.6g ref %.6g), max|ref| %.3e, rel %.2e, tol %.1e\n",
      what.c_str(), worst, worst_at, ref.empty() ? 0.0 : double{got[worst_at]},
      ref.empty() ? 0.0 : double{ref[worst_at]}, max_ref, max_ref > 0 ? worst / max_ref : 0.0, tol);
  EXPECT_LE(worst, limit) << what << ": worst |diff| " << worst << " at " << worst_at << " exceeds "
                          << tol << " * max|ref| " << max_ref;
}

inline void ExpectClose(const std::vector<uint16_t>& got_bf16, const std::vector<float>& ref,
                        double tol, const std::string& what) {
  ExpectClose(ToFloat(got_bf16), ref, tol, what);
}
// 16-bit results of format t; `what` gets the format's name.
inline void ExpectClose(HalfType t, const std::vector<uint16_t>& got, const std::vector<float>& ref,
                        double tol, const std::string& what) {
  ExpectClose(ToFloat(t, got), ref, tol, what + " (" + kernels::cuda::HalfTypeName(t) + ")");
}

// fp32 -> bf16 -> fp32, the rounding every bf16 output goes through.
inline float RoundBf16(float x) { return numeric::Bf16ToFp32(numeric::Fp32ToBf16(x)); }

}  // namespace mobius::gpu_test

#endif  // MOBIUS_TEST_GPU_GPU_TEST_UTIL_H_
