// Internal to the CPU op kernels: a branch-free fp32 exp that GCC auto-vectorises, and the
// function-multiversioning attribute for the hot loops that use it.
//
// Why: std::exp is an opaque library call, so every loop calling it stays scalar (~17% of training
// time in GELU, ~30% in attention at GPT-2 small). FastExp is plain arithmetic and bit operations,
// so a loop over a contiguous float array that calls it vectorises (SSE2 in the baseline build,
// AVX2 + FMA in the MOBIUS_KERNEL_CLONES variant).
//
// Accuracy (fast_math_test.cc, dense grid against double exp): max relative error 1.5e-7 (about
// 2 ulp) for x in [-86.9, 88.7].
// Special values: exp(-inf) == 0 exactly, and every x < kFastExpMin (-86.9) gives 0 (the true value
// is below 1.9e-38, the subnormal range); x > 88.72 and +inf give +inf; NaN gives NaN.
//
// Thread-safety: pure functions.
#ifndef MOBIUS_WORKER_KERNELS_CPU_FAST_MATH_H_
#define MOBIUS_WORKER_KERNELS_CPU_FAST_MATH_H_

#include <bit>
#include <cstdint>

// Put on a hot, loop-heavy kernel function (not on the whole file): GCC emits a baseline x86-64
// version and an x86-64-v3 (AVX2, FMA) version, and picks one at load time (ifunc) from the CPU's
// features. Results are bitwise deterministic on one machine (the same clone always runs), but may
// differ in the last bits between a v3 and a baseline CPU (FMA contraction).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MOBIUS_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define MOBIUS_KERNEL_CLONES
#endif

namespace mobius::kernels::cpu {

inline constexpr float kFastExpMin = -86.9f;  // below: 0. 2^n with n >= -125 stays normal.

// e^x = 2^n * e^r with n = round(x / ln2), |r| <= ln2 / 2; e^r by the Cephes expf polynomial.
inline float FastExp(float x) {
  constexpr float kMax = 89.0f;  // round(89 / ln2) = 128: 2^127 * 2 * e^r overflows to +inf
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln2 = kLn2Hi + kLn2Lo, kLn2Hi exact in 9 bits
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer in the low bits
  const float xc = x < kFastExpMin ? kFastExpMin : (x > kMax ? kMax : x);  // NaN passes through
  const float t = xc * kLog2e + kRound;
  const float n = t - kRound;
  // n from t's bits, not a float->int conversion (undefined for NaN): t = kRound + n exactly.
  const int32_t ni = static_cast<int32_t>(std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(kRound));
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // 2^(n-1) is normal for n in [-125, 128]; (2p) * 2^(n-1) rounds once, to +inf above ~88.72.
  const float scale = std::bit_cast<float>(static_cast<uint32_t>(ni + 126) << 23);
  const float e = (p * 2.0f) * scale;
  return x < kFastExpMin ? 0.0f : e;
}

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_FAST_MATH_H_
