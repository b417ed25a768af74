// The storage formats of the CPU kernels' 16-bit tensors, and their element and row loads/stores.
//
//   bf16: plain `uint16_t` bits (common/numeric/bf16.h), as the kernels have always taken them;
//   fp16: `F16`, IEEE binary16 bits (common/numeric/f16.h) in a type of their own, so that
//         overload resolution tells the two formats apart (a kernel is one template over the
//         storage type T, with one public overload per format; the backend picks the overload
//         once per call from the op's dtype).
// Arithmetic is fp32 in both: Load widens exactly, Store rounds once to nearest even (fp16: values
// from 65520 up become +-inf; NaN stays a quiet NaN), bit for bit numeric's scalar conversions.
// fp32 buffers take the same calls (Load/Store are the identity), for kernels that accept either.
//
// Thread-safety: pure functions.
#ifndef MOBIUS_WORKER_KERNELS_CPU_STORAGE_H_
#define MOBIUS_WORKER_KERNELS_CPU_STORAGE_H_

#include <algorithm>
#include <cstdint>

#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "worker/kernels/cpu/convert.h"

namespace mobius::kernels::cpu {

// One fp16 element (raw bits). A buffer of uint16_t fp16 bits may be passed as F16* (same size and
// alignment, no padding).
struct F16 {
  uint16_t bits;
  friend bool operator==(F16, F16) = default;
};
static_assert(sizeof(F16) == 2 && alignof(F16) == 2);

// Element loads/stores so that templates serve bf16, fp16 and fp32 buffers alike.
inline float Load(const uint16_t* p, int64_t i) { return numeric::Bf16ToFp32(p[i]); }
inline float Load(const F16* p, int64_t i) { return numeric::F16ToFp32(p[i].bits); }
inline float Load(const float* p, int64_t i) { return p[i]; }
inline void Store(uint16_t* p, int64_t i, float x) { p[i] = numeric::Fp32ToBf16(x); }
inline void Store(F16* p, int64_t i, float x) { p[i].bits = numeric::Fp32ToF16(x); }
inline void Store(float* p, int64_t i, float x) { p[i] = x; }

// dst[0..n) = fp32(src[0..n)). fp16 rows go through convert.h's vector loop (a call per row):
// fp16's scalar widening is branchy, bf16's a shift that the caller's loop inlines.
inline void LoadRow(float* dst, const uint16_t* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = numeric::Bf16ToFp32(src[i]);
}
inline void LoadRow(float* dst, const F16* src, int64_t n) {
  F16RowToFp32(dst, reinterpret_cast<const uint16_t*>(src), n);
}
inline void LoadRow(float* dst, const float* src, int64_t n) { std::copy(src, src + n, dst); }

// dst[0..n) = src[0..n) rounded to dst's format (one rounding each).
inline void StoreRow(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = numeric::Fp32ToBf16(src[i]);
}
inline void StoreRow(F16* dst, const float* src, int64_t n) {
  Fp32RowToF16(reinterpret_cast<uint16_t*>(dst), src, n);
}
inline void StoreRow(float* dst, const float* src, int64_t n) { std::copy(src, src + n, dst); }

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_STORAGE_H_
