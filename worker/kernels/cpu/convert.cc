#include "worker/kernels/cpu/convert.h"

#include "worker/kernels/cpu/fast_math.h"
#include "worker/kernels/cpu/storage.h"

namespace mobius::kernels::cpu {
namespace {

// dst = src in dst's format: whole vectors, then the scalar conversions (same bits) for the tail.
template <typename Dst, typename Src>
MOBIUS_SIMD_INLINE void ConvertRow(Dst* dst, const Src* src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) Store8(dst + i, Load8(src + i));
  for (; i < n; ++i) Store(dst, i, Load(src, i));
}

F16* AsF16(uint16_t* p) { return reinterpret_cast<F16*>(p); }
const F16* AsF16(const uint16_t* p) { return reinterpret_cast<const F16*>(p); }

}  // namespace

MOBIUS_KERNEL_CLONES
void Bf16RowToFp32(float* dst, const uint16_t* src, int64_t n) { ConvertRow(dst, src, n); }

MOBIUS_KERNEL_CLONES
void Fp32RowToBf16(uint16_t* dst, const float* src, int64_t n) { ConvertRow(dst, src, n); }

MOBIUS_KERNEL_CLONES
void F16RowToFp32(float* dst, const uint16_t* src, int64_t n) { ConvertRow(dst, AsF16(src), n); }

MOBIUS_KERNEL_CLONES
void Fp32RowToF16(uint16_t* dst, const float* src, int64_t n) { ConvertRow(AsF16(dst), src, n); }

MOBIUS_KERNEL_CLONES
void Bf16RowToF16(uint16_t* dst, const uint16_t* src, int64_t n) {
  ConvertRow(AsF16(dst), src, n);
}

MOBIUS_KERNEL_CLONES
void F16RowToBf16(uint16_t* dst, const uint16_t* src, int64_t n) {
  ConvertRow(dst, AsF16(src), n);
}

}  // namespace mobius::kernels::cpu
