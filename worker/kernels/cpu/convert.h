// bf16 <-> fp32 conversion of whole rows for the CPU backend's hot paths (GEMM operands, Cast),
// 8 lanes at a time with an AVX2 clone (the lane-wise LoadBf16x8 / StoreBf16x8 of fast_math.h,
// which kernels use inside their own loops).
//
// Same results as common/numeric/bf16.h, bit for bit (convert_test.cc: every bf16 pattern, and
// floats around every rounding tie, infinities and NaNs): round to nearest even, NaN -> quiet NaN
// with its sign; bf16 -> fp32 exact. That header's bulk loops stay scalar at -O2 (GCC's very
// cheap vectoriser skips loops that need an epilogue); these are what the per-GEMM conversions
// should cost.
//
// Thread-safety: pure functions; callers split large buffers over threads themselves.
#ifndef MOBIUS_WORKER_KERNELS_CPU_CONVERT_H_
#define MOBIUS_WORKER_KERNELS_CPU_CONVERT_H_

#include <cstdint>

namespace mobius::kernels::cpu {

// dst [n] = fp32(src [n]). REQUIRES: no overlap.
void Bf16RowToFp32(float* dst, const uint16_t* src, int64_t n);
// dst [n] = bf16(src [n]), nearest even. REQUIRES: no overlap.
void Fp32RowToBf16(uint16_t* dst, const float* src, int64_t n);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_CONVERT_H_
