// common/numeric/bf16.h (tested here with its first user, the optimizer).
#include "common/numeric/bf16.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace mobius::numeric {
namespace {

uint16_t FromBits(uint32_t bits) { return Fp32ToBf16(std::bit_cast<float>(bits)); }

TEST(Bf16Test, KnownValues) {
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Fp32ToBf16(-2.0f), 0xc000);
  EXPECT_EQ(Fp32ToBf16(0.0f), 0x0000);
  EXPECT_EQ(Fp32ToBf16(-0.0f), 0x8000);
  EXPECT_EQ(Fp32ToBf16(INFINITY), 0x7f80);
  EXPECT_EQ(Fp32ToBf16(-INFINITY), 0xff80);
  EXPECT_EQ(Bf16ToFp32(0x3f80), 1.0f);
  EXPECT_EQ(Bf16ToFp32(0x4049), 3.140625f);
}

TEST(Bf16Test, RoundsToNearestEven) {
  EXPECT_EQ(FromBits(0x3f808000u), 0x3f80);  // tie, even below
  EXPECT_EQ(FromBits(0x3f818000u), 0x3f82);  // tie, even above
  EXPECT_EQ(FromBits(0x3f808001u), 0x3f81);  // above the tie
  EXPECT_EQ(FromBits(0x3f807fffu), 0x3f80);  // below the tie
  EXPECT_EQ(FromBits(0x00008000u), 0x0000);  // subnormal tie to even zero
  EXPECT_EQ(FromBits(0x00018000u), 0x0002);
  EXPECT_EQ(FromBits(0x7f7f7fffu), 0x7f7f);  // largest finite stays finite
  EXPECT_EQ(FromBits(0x7f7fffffu), 0x7f80);  // FLT_MAX rounds to +inf (IEEE)
  EXPECT_EQ(FromBits(0xff7fffffu), 0xff80);
}

TEST(Bf16Test, NanStaysQuietNan) {
  EXPECT_EQ(FromBits(0x7fc00000u), 0x7fc0);
  EXPECT_EQ(FromBits(0x7f800001u), 0x7fc0);  // signalling, payload only in the low half
  EXPECT_EQ(FromBits(0xff800001u), 0xffc0);
  EXPECT_EQ(FromBits(0x7fffffffu), 0x7fff);  // would overflow the exponent if rounded
  EXPECT_TRUE(std::isnan(Bf16ToFp32(FromBits(0x7f800001u))));
}

TEST(Bf16Test, EveryBf16RoundTrips) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float f = Bf16ToFp32(bits);
    if (std::isnan(f)) {
      EXPECT_EQ(Fp32ToBf16(f), bits | 0x0040) << std::hex << b;
    } else {
      ASSERT_EQ(Fp32ToBf16(f), bits) << std::hex << b;
    }
  }
}

// For random finite floats the result is the nearer neighbour, ties to the even one.
TEST(Bf16Test, RandomFloatsRoundToNearest) {
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t bits = rng() & 0xfeffffffu;  // exponent never all ones: finite
    const float x = std::bit_cast<float>(bits);
    const uint16_t down = static_cast<uint16_t>(bits >> 16);
    const uint16_t up = static_cast<uint16_t>(down + 1);
    const double dd = std::fabs(static_cast<double>(x) - Bf16ToFp32(down));
    const double du = std::fabs(static_cast<double>(Bf16ToFp32(up)) - x);
    const uint16_t expect = dd < du ? down : du < dd ? up : ((down & 1) ? up : down);
    ASSERT_EQ(Fp32ToBf16(x), expect) << std::hex << bits;
  }
}

TEST(Bf16Test, BulkMatchesScalar) {
  std::vector<float> src = {1.0f, -3.5f, 1e-40f, NAN, INFINITY, 65504.0f, 3.0e38f};
  std::vector<uint16_t> dst(src.size());
  Fp32ToBf16(src.data(), dst.data(), src.size());
  std::vector<float> back(src.size());
  Bf16ToFp32(dst.data(), back.data(), dst.size());
  for (size_t i = 0; i < src.size(); ++i) {
    EXPECT_EQ(dst[i], Fp32ToBf16(src[i]));
    EXPECT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(Bf16ToFp32(dst[i])));
  }
}

}  // namespace
}  // namespace mobius::numeric
