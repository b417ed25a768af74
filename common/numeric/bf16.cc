#include "common/numeric/bf16.h"

namespace mobius::numeric {

// Plain loops: the compiler vectorises them for the baseline ISA. The optimizer writes its bf16 copy
// inside its own fused SIMD pass, so these are for loading checkpoints and tests, not the hot path.
void Fp32ToBf16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Fp32ToBf16(src[i]);
}

void Bf16ToFp32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(src[i]);
}

}  // namespace mobius::numeric
