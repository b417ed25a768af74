// fp32 <-> bf16 <-> fp16 casts and the sum of squares (worker/kernels/cuda/cast.cuh,
// sum_squares.cuh) against plain C++ references (label `gpu`).
//
// Tolerances: the casts are bitwise (one rounding to nearest even, NaN kept quiet, fp16 overflow
// to infinity and subnormals, as common/numeric/bf16.h and f16.h); the sum of squares accumulates
// in double in another order (and with atomics across blocks): relative 1e-12.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <vector>

#include "test/gpu/gpu_test_util.h"
#include "worker/kernels/cuda/cast.cuh"
#include "worker/kernels/cuda/sum_squares.cuh"

namespace mobius::kernels::cuda {
namespace {

using gpu_test::DeviceArray;
using gpu_test::FromHalf;
using gpu_test::RandomFloats;
using gpu_test::ToHalf;

constexpr int64_t kN = 300007;

TEST(CastCuda, RoundTripIsBitwiseTheHostRounding) {
  MOBIUS_REQUIRE_GPU();
  std::vector<float> x = RandomFloats(kN, -1e4f, 1e4f, 1);
  x[0] = std::numeric_limits<float>::quiet_NaN();
  x[1] = std::numeric_limits<float>::infinity();
  x[2] = -0.0f;
  x[3] = 1.00390625f;  // exactly half-way between two bf16 values: rounds to even
  std::vector<uint16_t> want(kN);
  std::vector<float> back(kN);
  for (int64_t i = 0; i < kN; ++i) {
    want[i] = numeric::Fp32ToBf16(x[i]);
    back[i] = numeric::Bf16ToFp32(want[i]);
  }
  DeviceArray<float> d_x(x), d_back(kN);
  DeviceArray<uint16_t> d_h(kN);
  MOBIUS_ASSERT_KERNEL_OK(cast_fp32_to_half(HalfType::kBf16, d_h.get(), d_x.get(), kN, nullptr));
  EXPECT_EQ(d_h.ToHost(), want);
  MOBIUS_ASSERT_KERNEL_OK(cast_half_to_fp32(HalfType::kBf16, d_back.get(), d_h.get(), kN, nullptr));
  const std::vector<float> got = d_back.ToHost();
  for (int64_t i = 1; i < kN; ++i) ASSERT_EQ(got[i], back[i]) << i;
  EXPECT_TRUE(std::isnan(got[0]));
  // n = 0: no-op.
  MOBIUS_ASSERT_KERNEL_OK(cast_fp32_to_half(HalfType::kBf16, d_h.get(), d_x.get(), 0, nullptr));
}

// fp16: values over the whole range (subnormals below 2^-14, overflow from 65520), the special
// values, a tie; the bits of numeric::Fp32ToF16 (NaN payload included), and back exactly.
TEST(CastCuda, Fp16RoundTripIsBitwiseTheHostRounding) {
  MOBIUS_REQUIRE_GPU();
  std::vector<float> x = RandomFloats(kN, -1.0f, 1.0f, 4);
  for (int64_t i = 0; i < kN; ++i) x[i] *= std::ldexp(1.0f, static_cast<int>(i % 45) - 28);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -0.0f,
                            65504.0f,
                            65519.99f,               // rounds down to 65504
                            65520.0f,                // the tie: rounds to even, +inf
                            -1e6f,                   // -inf
                            1.00048828125f,          // 1 + 2^-11: half-way, rounds to even (1)
                            std::ldexp(1.0f, -25),   // half the smallest subnormal: 0
                            std::ldexp(3.0f, -26)};  // 0.75 of it: rounds up to 2^-24
  std::copy(std::begin(specials), std::end(specials), x.begin());
  std::vector<uint16_t> want(kN);
  std::vector<float> back(kN);
  for (int64_t i = 0; i < kN; ++i) {
    want[i] = numeric::Fp32ToF16(x[i]);
    back[i] = numeric::F16ToFp32(want[i]);
  }
  EXPECT_EQ(want[6], 0x7c00);
  EXPECT_EQ(want[9], 0x0000);
  EXPECT_EQ(want[10], 0x0001);
  DeviceArray<float> d_x(x), d_back(kN);
  DeviceArray<uint16_t> d_h(kN);
  MOBIUS_ASSERT_KERNEL_OK(cast_fp32_to_half(HalfType::kF16, d_h.get(), d_x.get(), kN, nullptr));
  EXPECT_EQ(d_h.ToHost(), want);
  MOBIUS_ASSERT_KERNEL_OK(cast_half_to_fp32(HalfType::kF16, d_back.get(), d_h.get(), kN, nullptr));
  const std::vector<float> got = d_back.ToHost();
  for (int64_t i = 2; i < kN; ++i) ASSERT_EQ(got[i], back[i]) << i;
  EXPECT_TRUE(std::isnan(got[0]) && std::isnan(got[1]));
}

// bf16 <-> fp16 through fp32: one rounding each way, bitwise the host's.
TEST(CastCuda, Bf16AndFp16ConvertThroughFp32) {
  MOBIUS_REQUIRE_GPU();
  std::vector<float> x = RandomFloats(kN, -1.0f, 1.0f, 5);
  for (int64_t i = 0; i < kN; ++i) x[i] *= std::ldexp(1.0f, static_cast<int>(i % 40) - 26);
  std::vector<uint16_t> bf(kN), f16(kN), bf_to_f16(kN), f16_to_bf(kN);
  for (int64_t i = 0; i < kN; ++i) {
    bf[i] = ToHalf(HalfType::kBf16, x[i]);
    f16[i] = ToHalf(HalfType::kF16, x[i]);
    bf_to_f16[i] = ToHalf(HalfType::kF16, FromHalf(HalfType::kBf16, bf[i]));
    f16_to_bf[i] = ToHalf(HalfType::kBf16, FromHalf(HalfType::kF16, f16[i]));
  }
  DeviceArray<uint16_t> d_bf(bf), d_f16(f16), d_out1(kN), d_out2(kN);
  MOBIUS_ASSERT_KERNEL_OK(
      cast_half_to_half(HalfType::kF16, HalfType::kBf16, d_out1.get(), d_bf.get(), kN, nullptr));
  MOBIUS_ASSERT_KERNEL_OK(
      cast_half_to_half(HalfType::kBf16, HalfType::kF16, d_out2.get(), d_f16.get(), kN, nullptr));
  EXPECT_EQ(d_out1.ToHost(), bf_to_f16);
  EXPECT_EQ(d_out2.ToHost(), f16_to_bf);
}

// dst += src in fp32 (the backend's Cast with accumulate): bitwise the host's dst + widen(src).
TEST(CastCuda, AddIntoFp32IsBitwiseTheHostSum) {
  MOBIUS_REQUIRE_GPU();
  const std::vector<float> base = RandomFloats(kN, -10.0f, 10.0f, 6);
  const std::vector<float> x = RandomFloats(kN, -3.0f, 3.0f, 7);
  for (HalfType t : {HalfType::kBf16, HalfType::kF16}) {
    std::vector<uint16_t> h(kN);
    std::vector<float> want(kN);
    for (int64_t i = 0; i < kN; ++i) {
      h[i] = ToHalf(t, x[i]);
      want[i] = base[i] + FromHalf(t, h[i]);
    }
    DeviceArray<float> d_dst(base);
    DeviceArray<uint16_t> d_h(h);
    MOBIUS_ASSERT_KERNEL_OK(add_half_to_fp32(t, d_dst.get(), d_h.get(), kN, nullptr));
    EXPECT_EQ(d_dst.ToHost(), want);
  }
  std::vector<float> want(kN);
  for (int64_t i = 0; i < kN; ++i) want[i] = base[i] + x[i];
  DeviceArray<float> d_dst(base), d_x(x);
  MOBIUS_ASSERT_KERNEL_OK(add_fp32_to_fp32(d_dst.get(), d_x.get(), kN, nullptr));
  EXPECT_EQ(d_dst.ToHost(), want);
}

TEST(SumSquaresCuda, AccumulatesInDouble) {
  MOBIUS_REQUIRE_GPU();
  const std::vector<float> x = RandomFloats(kN, -3, 3, 2);
  double want = 0.75;
  for (float v : x) want += static_cast<double>(v) * v;
  DeviceArray<float> d_x(x);
  DeviceArray<double> d_out(std::vector<double>{0.75});
  MOBIUS_ASSERT_KERNEL_OK(sum_squares(d_out.get(), d_x.get(), kN, nullptr));
  const double got = d_out.ToHost()[0];
  std::printf("  sum_squares got %.17g want %.17g rel %.2e\n", got, want,
              std::fabs(got - want) / want);
  EXPECT_NEAR(got, want, 1e-12 * want);
}

TEST(SumSquaresCuda, ChunksAreSummedOneByOneAndDeterministically) {
  MOBIUS_REQUIRE_GPU();
  const int64_t chunk = 65536;
  const std::vector<float> x = RandomFloats(kN, -2, 2, 3);  // 5 chunks, the last partial
  const int64_t chunks = (kN + chunk - 1) / chunk;
  std::vector<double> want(chunks, 0.5);
  for (int64_t i = 0; i < kN; ++i) want[i / chunk] += static_cast<double>(x[i]) * x[i];
  DeviceArray<float> d_x(x);
  DeviceArray<double> a(std::vector<double>(chunks, 0.5)), b(std::vector<double>(chunks, 0.5));
  MOBIUS_ASSERT_KERNEL_OK(sum_squares_chunks(a.get(), d_x.get(), kN, chunk, nullptr));
  MOBIUS_ASSERT_KERNEL_OK(sum_squares_chunks(b.get(), d_x.get(), kN, chunk, nullptr));
  const std::vector<double> got = a.ToHost();
  EXPECT_EQ(got, b.ToHost());  // fixed reduction tree: bitwise the same twice
  for (int64_t j = 0; j < chunks; ++j) EXPECT_NEAR(got[j], want[j], 1e-12 * want[j]) << j;
  EXPECT_FALSE(sum_squares_chunks(a.get(), d_x.get(), kN, 0, nullptr).ok());
}

}  // namespace
}  // namespace mobius::kernels::cuda
