// fp32 <-> bf16 casts and the sum of squares (worker/kernels/cuda/cast.cuh, sum_squares.cuh)
// against plain C++ references (label `gpu`).
//
// Tolerances: the casts are bitwise (one rounding to nearest even, NaN kept quiet, as
// common/numeric/bf16.h); the sum of squares accumulates in double in another order (and with
// atomics across blocks): relative 1e-12.
#include <cmath>
#include <limits>
#include <vector>

#include "test/gpu/gpu_test_util.h"
#include "worker/kernels/cuda/cast.cuh"
#include "worker/kernels/cuda/sum_squares.cuh"

namespace mobius::kernels::cuda {
namespace {

using gpu_test::DeviceArray;
using gpu_test::RandomFloats;

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
  MOBIUS_ASSERT_KERNEL_OK(cast_fp32_to_bf16(d_h.get(), d_x.get(), kN, nullptr));
  EXPECT_EQ(d_h.ToHost(), want);
  MOBIUS_ASSERT_KERNEL_OK(cast_bf16_to_fp32(d_back.get(), d_h.get(), kN, nullptr));
  const std::vector<float> got = d_back.ToHost();
  for (int64_t i = 1; i < kN; ++i) ASSERT_EQ(got[i], back[i]) << i;
  EXPECT_TRUE(std::isnan(got[0]));
  MOBIUS_ASSERT_KERNEL_OK(cast_fp32_to_bf16(d_h.get(), d_x.get(), 0, nullptr));  // n = 0: no-op
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
