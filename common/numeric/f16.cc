#include "common/numeric/f16.h"

namespace mobius::numeric {

void Fp32ToF16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Fp32ToF16(src[i]);
}

void F16ToFp32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = F16ToFp32(src[i]);
}

}  // namespace mobius::numeric
