// Whole-row conversions between fp32, bf16 and fp16 for the CPU backend's hot paths (GEMM operands,
// Cast, the fp16 kernels' row loads), 8 lanes at a time with an AVX2 clone (the lane-wise Load8 /
// Store8 overloads of fast_math.h).
//
// Same results as common/numeric/bf16.h and f16.h, bit for bit (convert_test.cc: every bf16 and
// fp16 pattern, and floats around every rounding tie, subnormals, overflow, infinities and NaNs):
// round to nearest even, NaN -> quiet NaN with its sign; widening is exact. bf16 <-> fp16 goes
// through fp32 (exact), so it rounds once. numeric's bulk loops stay scalar at -O2 (GCC's very
// cheap vectoriser skips loops that need an epilogue); these are what the per-GEMM conversions
// should cost.
//
// Buffers are raw bits (uint16_t) of the format each name says. REQUIRES of each: no overlap.
// Thread-safety: pure functions; callers split large buffers over threads themselves.
#ifndef MOBIUS_WORKER_KERNELS_CPU_CONVERT_H_
#define MOBIUS_WORKER_KERNELS_CPU_CONVERT_H_

#include <cstdint>

namespace mobius::kernels::cpu {

// dst [n] = fp32(src [n] bf16).
void Bf16RowToFp32(float* dst, const uint16_t* src, int64_t n);
// dst [n] bf16 = src [n] fp32, nearest even.
void Fp32RowToBf16(uint16_t* dst, const float* src, int64_t n);
// dst [n] = fp32(src [n] fp16).
void F16RowToFp32(float* dst, const uint16_t* src, int64_t n);
// dst [n] fp16 = src [n] fp32, nearest even (+-inf from 65520 up).
void Fp32RowToF16(uint16_t* dst, const float* src, int64_t n);
// dst [n] fp16 = src [n] bf16, nearest even.
void Bf16RowToF16(uint16_t* dst, const uint16_t* src, int64_t n);
// dst [n] bf16 = src [n] fp16, nearest even.
void F16RowToBf16(uint16_t* dst, const uint16_t* src, int64_t n);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_CONVERT_H_
