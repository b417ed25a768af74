// IEEE binary16 (fp16, safetensors "F16") <-> float32 conversion on the host.
//
// fp16: 1 sign, 5 exponent, 10 mantissa bits, stored as its raw bit pattern in a uint16_t (as
// bf16.h stores bf16). Largest finite value 65504, smallest normal 2^-14, smallest subnormal 2^-24.
//
// Rounding: float -> fp16 rounds to nearest, ties to even, subnormals included (PyTorch's
// `tensor.to(torch.float16)`, CUDA's __float2half_rn); finite values from 65520 up round to
// +-infinity. Every NaN becomes a quiet NaN with the same sign (the top 9 payload bits kept).
// fp16 -> float is exact.
//
// Standard library only, like bf16.h. Thread-safety: pure functions.
#ifndef MOBIUS_COMMON_NUMERIC_F16_H_
#define MOBIUS_COMMON_NUMERIC_F16_H_

#include <bit>
#include <cstddef>
#include <cstdint>

namespace mobius::numeric {

// float32 -> fp16 bits, round to nearest even; NaN -> quiet NaN.
inline uint16_t Fp32ToF16(float value) {
  // F. Giesen's float_to_half_fast3_rtne: subnormal results are rounded by the FPU itself (adding
  // 0.5f puts the value's 2^-24 units in the mantissa's last place), normal ones by integer
  // arithmetic on the bits.
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // NaN
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  if (magnitude >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65536, inf
  if (magnitude < 0x38800000u) {  // below 2^-14: an fp16 subnormal or zero
    constexpr uint32_t kHalf = 126u << 23;  // 0.5f
    const float shifted = std::bit_cast<float>(magnitude) + std::bit_cast<float>(kHalf);
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(shifted) - kHalf));
  }
  const uint32_t odd = (magnitude >> 13) & 1u;
  magnitude += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + odd;  // rebias, round
  return static_cast<uint16_t>(sign | (magnitude >> 13));  // a carry into 0x7c00 is +-inf
}

// fp16 bits -> float32 (exact, subnormals included).
inline float F16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {  // zero or subnormal: mantissa x 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// Bulk conversions of `n` elements. REQUIRES: `src` and `dst` do not overlap (or n == 0).
void Fp32ToF16(const float* src, uint16_t* dst, size_t n);
void F16ToFp32(const uint16_t* src, float* dst, size_t n);
// Rounds n fp32 values in place to the nearest fp16 (as Fp32ToF16), keeping them as fp32.
void RoundToF16(float* x, size_t n);

}  // namespace mobius::numeric

#endif  // MOBIUS_COMMON_NUMERIC_F16_H_
