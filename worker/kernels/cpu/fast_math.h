// Internal to the CPU op kernels: a branch-free fp32 exp, for one float and for 8 lanes (GCC
// vector extensions, with the F32x8 helpers: load, store, bf16 / fp16 <-> fp32), and the
// function-multiversioning attribute for the hot loops that use them.
//
// Why: std::exp is an opaque library call, so every loop calling it stays scalar. FastExp is plain
// arithmetic and bit operations; GCC does not vectorise a loop over the scalar version (its clamps
// stay branches), so hot loops call the F32x8 overload on 8 elements at a time: AVX2 in the
// MOBIUS_KERNEL_CLONES variant, SSE2 pairs in the baseline one. Both overloads run the same
// operations in the same order, and the kernels build with -ffp-contract=off (no a * b + c fused
// into an FMA), so they give the same bits (fast_math_test.cc checks it) and a loop's tail can use
// the scalar one.
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
#include <cstring>

#include "worker/kernels/cpu/storage.h"

// Put on a hot, loop-heavy kernel function (not on the whole file): GCC emits a baseline x86-64
// version and an x86-64-v3 (AVX2, FMA) version, and picks one at load time (ifunc) from the CPU's
// features. With -ffp-contract=off (the kernels' build) both clones round every operation the same
// way, so results do not depend on which one runs.
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

// Eight fp32 lanes (one AVX2 register); arithmetic and comparisons act per lane. The helpers are
// always inlined, so that they take the instruction set of the MOBIUS_KERNEL_CLONES caller.
// (Files using them build with -Wno-psabi: GCC warns that a 32-byte vector is passed differently
// without AVX, but these never cross a call boundary.)
#define MOBIUS_SIMD_INLINE inline __attribute__((always_inline))
typedef float F32x8 __attribute__((vector_size(32)));
typedef uint32_t U32x8 __attribute__((vector_size(32)));
typedef int32_t I32x8 __attribute__((vector_size(32)));  // also the type of F32x8 comparisons

MOBIUS_SIMD_INLINE F32x8 Splat8(float x) { return F32x8{x, x, x, x, x, x, x, x}; }
MOBIUS_SIMD_INLINE F32x8 Load8(const float* p) {
  F32x8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
MOBIUS_SIMD_INLINE void Store8(float* p, F32x8 v) { std::memcpy(p, &v, sizeof(v)); }

typedef uint16_t U16x8 __attribute__((vector_size(16)));

// bf16 <-> F32x8, with common/numeric/bf16.h's rounding (nearest even, NaN -> quiet NaN), bit for
// bit (convert_test.cc).
MOBIUS_SIMD_INLINE F32x8 LoadBf16x8(const uint16_t* p) {
  U16x8 bits;
  std::memcpy(&bits, p, sizeof(bits));
  return std::bit_cast<F32x8>(__builtin_convertvector(bits, U32x8) << 16);
}

MOBIUS_SIMD_INLINE void StoreBf16x8(uint16_t* p, F32x8 x) {
  const U32x8 bits = std::bit_cast<U32x8>(x);
  const U32x8 rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;  // ties to the even half
  const U32x8 quiet_nan = (bits >> 16) | 0x40u;
  const U32x8 out = (bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded;
  const U16x8 narrow = __builtin_convertvector(out, U16x8);
  std::memcpy(p, &narrow, sizeof(narrow));
}

// fp16 <-> F32x8, with common/numeric/f16.h's rules bit for bit (convert_test.cc: every fp16
// pattern; floats around every rounding tie, subnormal results, overflow, NaNs): numeric's scalar
// branches as lane selects, in integer arithmetic except the subnormal rounding, which (as there)
// is the FPU's own: adding 0.5f puts a value below 2^-14 in units of 2^-24 in the low mantissa
// bits, rounded to nearest even. (F16C's vcvtps2ph would do in one instruction what this does in
// ~20, but the baseline clone cannot use it; these are what the fp16 kernels and GEMM operands
// cost on every clone.)
MOBIUS_SIMD_INLINE F32x8 LoadF16x8(const F16* p) {
  U16x8 h;
  std::memcpy(&h, p, sizeof(h));
  const U32x8 x = __builtin_convertvector(h, U32x8);
  const U32x8 sign = (x & 0x8000u) << 16;
  const U32x8 exponent = (x >> 10) & 0x1fu;
  const U32x8 mantissa = x & 0x3ffu;
  const U32x8 normal = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  const U32x8 special = sign | 0x7f800000u | (mantissa << 13);  // inf, NaN (payload kept)
  // Zero or subnormal: mantissa x 2^-24, exact in float.
  const F32x8 tiny = __builtin_convertvector(std::bit_cast<I32x8>(mantissa), F32x8) * 0x1p-24f;
  const U32x8 subnormal = sign | std::bit_cast<U32x8>(tiny);
  const U32x8 out = exponent == 0x1fu ? special : (exponent == 0u ? subnormal : normal);
  return std::bit_cast<F32x8>(out);
}

MOBIUS_SIMD_INLINE void StoreF16x8(F16* p, F32x8 x) {
  const U32x8 bits = std::bit_cast<U32x8>(x);
  const U32x8 sign = (bits >> 16) & 0x8000u;
  const U32x8 magnitude = bits & 0x7fffffffu;
  const I32x8 m = std::bit_cast<I32x8>(magnitude);  // < 2^31: signed compares are exact
  const U32x8 nan = sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu);
  const U32x8 inf = sign | 0x7c00u;
  constexpr uint32_t kHalf = 126u << 23;  // 0.5f
  const F32x8 shifted = std::bit_cast<F32x8>(magnitude) + 0.5f;
  const U32x8 subnormal = sign | (std::bit_cast<U32x8>(shifted) - kHalf);
  const U32x8 odd = (magnitude >> 13) & 1u;
  const U32x8 rounded = magnitude + ((static_cast<uint32_t>(15 - 127) << 23) + 0xfffu) + odd;
  const U32x8 normal = sign | (rounded >> 13);  // a carry into 0x7c00 is +-inf
  const U32x8 out = m > 0x7f800000 ? nan
                    : m >= 0x47800000 ? inf
                    : m < 0x38800000 ? subnormal
                                     : normal;
  const U16x8 narrow = __builtin_convertvector(out, U16x8);
  std::memcpy(p, &narrow, sizeof(narrow));
}

// 8 lanes of a 16-bit or fp32 buffer, by storage type (storage.h): templates over the format call
// these, as they call Load / Store for one element.
MOBIUS_SIMD_INLINE F32x8 Load8(const uint16_t* p) { return LoadBf16x8(p); }
MOBIUS_SIMD_INLINE F32x8 Load8(const F16* p) { return LoadF16x8(p); }
MOBIUS_SIMD_INLINE void Store8(uint16_t* p, F32x8 v) { StoreBf16x8(p, v); }
MOBIUS_SIMD_INLINE void Store8(F16* p, F32x8 v) { StoreF16x8(p, v); }

// FastExp on each lane: the scalar version's operations, lane-wise (same bits).
MOBIUS_SIMD_INLINE F32x8 FastExp(F32x8 x) {
  const F32x8 lo = Splat8(kFastExpMin), hi = Splat8(89.0f), round = Splat8(12582912.0f);
  const F32x8 xc = x < lo ? lo : (x > hi ? hi : x);  // NaN passes through
  const F32x8 t = xc * 1.44269504088896341f + round;
  const F32x8 n = t - round;
  const U32x8 ni = std::bit_cast<U32x8>(t) - std::bit_cast<U32x8>(round);
  const F32x8 r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  F32x8 p = Splat8(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const F32x8 e = (p * 2.0f) * std::bit_cast<F32x8>((ni + 126u) << 23);
  return x < lo ? Splat8(0.0f) : e;
}

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_FAST_MATH_H_
