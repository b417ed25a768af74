#include "common/numeric/f16.h"

#include "common/numeric/clones.h"

namespace mobius::numeric {

MOBIUS_NUMERIC_CLONES void Fp32ToF16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Fp32ToF16(src[i]);
}

MOBIUS_NUMERIC_CLONES void F16ToFp32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = F16ToFp32(src[i]);
}

MOBIUS_NUMERIC_CLONES void RoundToF16(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = F16ToFp32(Fp32ToF16(x[i]));
}

}  // namespace mobius::numeric
