#include "common/numeric/bf16.h"

#include "common/numeric/clones.h"

namespace mobius::numeric {

// Plain loops the compiler vectorises (-O3, an AVX2 clone where the CPU has it). The optimizer writes its bf16 copy
// inside its own fused SIMD pass, so these are for loading checkpoints and tests, not the hot path.
MOBIUS_NUMERIC_CLONES void Fp32ToBf16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Fp32ToBf16(src[i]);
}

MOBIUS_NUMERIC_CLONES void Bf16ToFp32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(src[i]);
}

MOBIUS_NUMERIC_CLONES void RoundToBf16(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = Bf16ToFp32(Fp32ToBf16(x[i]));
}

}  // namespace mobius::numeric
