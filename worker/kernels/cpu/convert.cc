#include "worker/kernels/cpu/convert.h"

#include "common/numeric/bf16.h"
#include "worker/kernels/cpu/fast_math.h"

namespace mobius::kernels::cpu {

MOBIUS_KERNEL_CLONES
void Bf16RowToFp32(float* dst, const uint16_t* src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) Store8(dst + i, LoadBf16x8(src + i));
  for (; i < n; ++i) dst[i] = numeric::Bf16ToFp32(src[i]);
}

MOBIUS_KERNEL_CLONES
void Fp32RowToBf16(uint16_t* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) StoreBf16x8(dst + i, Load8(src + i));
  for (; i < n; ++i) dst[i] = numeric::Fp32ToBf16(src[i]);
}

}  // namespace mobius::kernels::cpu
