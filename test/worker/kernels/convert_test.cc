// The row conversions of convert.h (and so fast_math.h's 8-lane Load8 / Store8, which their vector
// bodies are, and storage.h's scalar Load / Store, their tails) against common/numeric/bf16.h and
// f16.h, bit for bit, in rows whose length is not a multiple of the vector width:
//   bf16: every pattern, and for each the floats just below, at and above its rounding tie (NaNs
//     and infinities included);
//   fp16: every pattern widened; narrowed, for every fp16 value the floats at, just below and just
//     above the tie with its successor (subnormal ties, the tie at 65520 that overflows to inf
//     included), the fp32 subnormals, NaNs with assorted payloads, and a million random floats;
//   bf16 <-> fp16: every pattern of either, one rounding through fp32.
#include "worker/kernels/cpu/convert.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "gtest/gtest.h"

namespace mobius::kernels::cpu {
namespace {

TEST(ConvertTest, EveryBf16WidensExactly) {
  std::vector<uint16_t> src(65536 + 5);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i);
  std::vector<float> got(src.size());
  Bf16RowToFp32(got.data(), src.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]),
              std::bit_cast<uint32_t>(numeric::Bf16ToFp32(src[i])))
        << "bits " << src[i];
  }
}

TEST(ConvertTest, NarrowingRoundsLikeTheScalarVersion) {
  std::vector<float> src;
  for (uint32_t hi = 0; hi < 65536; ++hi) {
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, hi * 2654435761u >> 16}) {
      src.push_back(std::bit_cast<float>(hi << 16 | lo));
    }
  }
  src.resize(src.size() - 3);  // a tail that is not a whole vector
  std::vector<uint16_t> got(src.size());
  Fp32RowToBf16(got.data(), src.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_EQ(got[i], numeric::Fp32ToBf16(src[i])) << "float bits " << std::bit_cast<uint32_t>(src[i]);
  }
}

TEST(ConvertTest, EveryF16WidensExactly) {
  std::vector<uint16_t> src(65536 + 5);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i);
  std::vector<float> got(src.size());
  F16RowToFp32(got.data(), src.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(numeric::F16ToFp32(src[i])))
        << "bits " << src[i];
  }
}

// Floats that exercise every branch and tie of fp32 -> fp16 rounding.
std::vector<float> F16NarrowingCases() {
  std::vector<float> src;
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite non-negative fp16 value
    const float lo = numeric::F16ToFp32(static_cast<uint16_t>(h));
    // Half the gap to the successor (65504's successor would be 65536: the tie is 65520).
    const float next = numeric::F16ToFp32(static_cast<uint16_t>(h + 1));
    const float half_ulp = h == 0x7bff ? 16.0f : (next - lo) / 2;
    const float tie = lo + half_ulp;  // exact: one bit more than fp16 holds
    for (float x : {lo, tie, std::nextafter(tie, 0.0f), std::nextafter(tie, INFINITY)}) {
      src.push_back(x);
      src.push_back(-x);
    }
  }
  for (uint32_t bits : {0x00000001u, 0x007fffffu, 0x33000000u, 0x33000001u, 0x32ffffffu,
                        0x33c00000u, 0x387fffffu, 0x38800000u, 0x477fefffu, 0x477ff000u,
                        0x47800000u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u, 0x7f802000u,
                        0x7fbfe000u, 0x7fc00000u, 0x7fc00001u, 0x7fffe000u, 0x7fffffffu}) {
    src.push_back(std::bit_cast<float>(bits));
    src.push_back(std::bit_cast<float>(bits | 0x80000000u));
  }
  std::mt19937 rng(16);
  for (int i = 0; i < 1000000; ++i) {
    src.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  }
  src.resize(src.size() - 3);  // a tail that is not a whole vector
  return src;
}

TEST(ConvertTest, NarrowingToF16RoundsLikeTheScalarVersion) {
  const std::vector<float> src = F16NarrowingCases();
  std::vector<uint16_t> got(src.size());
  Fp32RowToF16(got.data(), src.data(), static_cast<int64_t>(src.size()));
  int64_t infinities = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_EQ(got[i], numeric::Fp32ToF16(src[i]))
        << "float bits " << std::hex << std::bit_cast<uint32_t>(src[i]);
    infinities += (got[i] & 0x7fffu) == 0x7c00u;
  }
  EXPECT_EQ(numeric::Fp32ToF16(65519.99f), 0x7bffu);  // the cases include both sides of the tie
  EXPECT_EQ(numeric::Fp32ToF16(65520.0f), 0x7c00u);
  EXPECT_GT(infinities, 0);
}

TEST(ConvertTest, Bf16AndF16ConvertThroughFp32) {
  std::vector<uint16_t> src(65536 + 5);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i);
  const int64_t n = static_cast<int64_t>(src.size());
  std::vector<uint16_t> to_f16(src.size()), to_bf16(src.size());
  Bf16RowToF16(to_f16.data(), src.data(), n);
  F16RowToBf16(to_bf16.data(), src.data(), n);
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_EQ(to_f16[i], numeric::Fp32ToF16(numeric::Bf16ToFp32(src[i]))) << "bf16 " << src[i];
    ASSERT_EQ(to_bf16[i], numeric::Fp32ToBf16(numeric::F16ToFp32(src[i]))) << "fp16 " << src[i];
  }
}

}  // namespace
}  // namespace mobius::kernels::cpu
