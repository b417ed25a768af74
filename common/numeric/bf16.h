// bfloat16 <-> float32 conversion on the host.
//
// bf16 is the upper half of an IEEE binary32: 1 sign, 8 exponent, 7 mantissa bits. It is stored here
// as its raw bit pattern in a uint16_t (no type of our own, so that buffers can be handed to CUDA or
// written to safetensors as they are).
//
// Rounding: float -> bf16 rounds to nearest, ties to even (what PyTorch's `tensor.to(torch.bfloat16)`
// and CUDA's __float2bfloat16_rn do). Finite values above the largest bf16 round to +-infinity as
// IEEE rounding requires. Every NaN becomes a quiet NaN with the same sign (bit 6 of the bf16 set), so
// a signalling NaN whose payload lives only in the low 16 bits does not turn into infinity.
// bf16 -> float is exact.
//
// Standard library only (no Abseil): the CUDA-only build subset uses it too.
// Thread-safety: pure functions; the bulk functions may run concurrently on disjoint buffers.
#ifndef MOBIUS_COMMON_NUMERIC_BF16_H_
#define MOBIUS_COMMON_NUMERIC_BF16_H_

#include <bit>
#include <cstddef>
#include <cstdint>

namespace mobius::numeric {

// float32 -> bf16 bits, round to nearest even; NaN -> quiet NaN.
inline uint16_t Fp32ToBf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep sign and top payload, force quiet bit
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);  // ties go to the even upper half
  return static_cast<uint16_t>(bits >> 16);
}

// bf16 bits -> float32 (exact).
inline float Bf16ToFp32(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// Bulk conversions of `n` elements. REQUIRES: `src` and `dst` do not overlap (or n == 0).
void Fp32ToBf16(const float* src, uint16_t* dst, size_t n);
void Bf16ToFp32(const uint16_t* src, float* dst, size_t n);
// Rounds n fp32 values in place to the nearest bf16 (as Fp32ToBf16), keeping them as fp32.
void RoundToBf16(float* x, size_t n);

}  // namespace mobius::numeric

#endif  // MOBIUS_COMMON_NUMERIC_BF16_H_
