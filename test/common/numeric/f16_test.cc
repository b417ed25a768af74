// common/numeric/f16.h: exhaustive over every fp16 bit pattern (round trips, the ties between
// neighbours), known values, overflow and NaN.
#include "common/numeric/f16.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace mobius::numeric {
namespace {

bool IsNan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

TEST(F16Test, KnownValues) {
  EXPECT_EQ(Fp32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(Fp32ToF16(-2.0f), 0xc000);
  EXPECT_EQ(Fp32ToF16(0.0f), 0x0000);
  EXPECT_EQ(Fp32ToF16(-0.0f), 0x8000);
  EXPECT_EQ(Fp32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(Fp32ToF16(INFINITY), 0x7c00);
  EXPECT_EQ(Fp32ToF16(-INFINITY), 0xfc00);
  EXPECT_EQ(Fp32ToF16(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(Fp32ToF16(0x1p-14f), 0x0400);  // smallest normal
  EXPECT_EQ(F16ToFp32(0x3555), 0.333251953125f);
  EXPECT_EQ(F16ToFp32(0x0001), 0x1p-24f);
  EXPECT_EQ(F16ToFp32(0x83ff), -0x3ffp-24f);
}

TEST(F16Test, EveryValueRoundTrips) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    if (IsNan(bits)) continue;
    ASSERT_EQ(Fp32ToF16(F16ToFp32(bits)), bits) << std::hex << h;
  }
}

// Between every pair of neighbouring finite fp16 values (same sign): the midpoint goes to the one
// with an even mantissa, anything off the midpoint to the nearer one.
TEST(F16Test, RoundsToNearestEvenEverywhere) {
  for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
    for (uint16_t h = 0; h < 0x7bff; ++h) {
      const uint16_t lo = sign | h, hi = sign | static_cast<uint16_t>(h + 1);
      const float a = F16ToFp32(lo), b = F16ToFp32(hi);
      const float mid = (a + b) / 2;  // exact: 12 significant bits
      ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(a) + b) / 2);
      ASSERT_EQ(Fp32ToF16(mid), (h & 1) ? hi : lo) << std::hex << h;
      ASSERT_EQ(Fp32ToF16(std::nextafter(mid, a)), lo) << std::hex << h;
      ASSERT_EQ(Fp32ToF16(std::nextafter(mid, b)), hi) << std::hex << h;
    }
  }
}

TEST(F16Test, OverflowAndUnderflow) {
  EXPECT_EQ(Fp32ToF16(65519.99f), 0x7bff);
  EXPECT_EQ(Fp32ToF16(65520.0f), 0x7c00);  // the tie above 65504 goes to the even: infinity
  EXPECT_EQ(Fp32ToF16(-1e10f), 0xfc00);
  EXPECT_EQ(Fp32ToF16(3.4e38f), 0x7c00);
  EXPECT_EQ(Fp32ToF16(0x1p-25f), 0x0000);  // tie to even zero
  EXPECT_EQ(Fp32ToF16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(Fp32ToF16(-0x1p-26f), 0x8000);
  EXPECT_EQ(Fp32ToF16(std::bit_cast<float>(0x00000001u)), 0x0000);  // fp32 subnormal
}

TEST(F16Test, NanStaysQuietNan) {
  for (uint32_t bits : {0x7fc00000u, 0x7f800001u, 0xffc00001u, 0x7fa00000u}) {
    const uint16_t h = Fp32ToF16(std::bit_cast<float>(bits));
    EXPECT_TRUE(IsNan(h)) << std::hex << bits;
    EXPECT_EQ(h & 0x0200u, 0x0200u) << std::hex << bits;  // quiet
    EXPECT_EQ(h & 0x8000u, (bits >> 16) & 0x8000u);
  }
  EXPECT_TRUE(std::isnan(F16ToFp32(0x7e00)));
}

TEST(F16Test, BulkMatchesScalar) {
  std::vector<float> in = {1.0f, -0.1f, 1e-7f, 70000.0f, 0.333333f};
  std::vector<uint16_t> out(in.size());
  Fp32ToF16(in.data(), out.data(), in.size());
  std::vector<float> back(in.size());
  F16ToFp32(out.data(), back.data(), out.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i], Fp32ToF16(in[i]));
    EXPECT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(F16ToFp32(out[i])));
  }
}

}  // namespace
}  // namespace mobius::numeric
