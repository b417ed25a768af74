// GELU, SwiGLU, residual add, bias add and bias backward (worker/kernels/cuda/) against plain C++
// references (label `gpu`), each in bf16 and in fp16.
//
// Tolerances (relative to max|ref|): 16-bit outputs HalfTol (two ulps of the format: bf16
// kBf16Tol 8e-3, fp16 kF16Tol 2e-3; the output rounding and a neighbour when the GPU's expf
// differs from the double reference by an fp32 ulp or two); the residual and bias adds are one
// fp32 add and one rounding, so they must be bitwise equal; the bias gradient is an fp32 sum of
// N = 300 unit-sized terms in another order (+ atomics per 256-row chunk): 1e-5.
#include <cmath>
#include <vector>

#include "test/gpu/gpu_test_util.h"
#include "worker/kernels/cuda/bias.cuh"
#include "worker/kernels/cuda/gelu.cuh"
#include "worker/kernels/cuda/residual.cuh"
#include "worker/kernels/cuda/swiglu.cuh"

namespace mobius::kernels::cuda {
namespace {

using gpu_test::DeviceArray;
using gpu_test::ExpectClose;
using gpu_test::HalfTol;
using gpu_test::kHalfTypes;
using gpu_test::RandomFloats;
using gpu_test::RandomHalf;
using gpu_test::ToHalf;

constexpr int64_t kN = 100003;  // not a multiple of any block size

TEST(GeluCuda, ForwardAndBackwardMatchReference) {
  MOBIUS_REQUIRE_GPU();
  for (HalfType ht : kHalfTypes) {
    SCOPED_TRACE(HalfTypeName(ht));
    const auto x = RandomHalf(ht, kN, 5.0f, 1), dy = RandomHalf(ht, kN, 1.0f, 2),
               dx0 = RandomHalf(ht, kN, 1.0f, 3);
    std::vector<float> out(kN), dx(kN);
    const double k = std::sqrt(2.0 / M_PI);
    for (int64_t i = 0; i < kN; ++i) {
      const double v = x.values[i];
      const double u = k * (v + 0.044715 * v * v * v);
      const double th = std::tanh(u);
      out[i] = static_cast<float>(0.5 * v * (1.0 + th));
      const double grad =
          0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * k * (1.0 + 3 * 0.044715 * v * v);
      dx[i] = static_cast<float>(dx0.values[i] + grad * dy.values[i]);
    }
    DeviceArray<uint16_t> d_x(x.bits), d_out(kN), d_dy(dy.bits), d_dx(dx0.bits);
    MOBIUS_ASSERT_KERNEL_OK(gelu_fwd(ht, d_out.get(), d_x.get(), kN, nullptr));
    ExpectClose(ht, d_out.ToHost(), out, HalfTol(ht), "gelu out");
    MOBIUS_ASSERT_KERNEL_OK(gelu_bwd(ht, d_dx.get(), d_dy.get(), d_x.get(), kN, nullptr));
    ExpectClose(ht, d_dx.ToHost(), dx, HalfTol(ht), "gelu dinp");
    // In place.
    MOBIUS_ASSERT_KERNEL_OK(gelu_fwd(ht, d_x.get(), d_x.get(), kN, nullptr));
    EXPECT_EQ(d_x.ToHost(), d_out.ToHost());
  }
}

TEST(SwiGluCuda, ForwardAndBackwardMatchReference) {
  MOBIUS_REQUIRE_GPU();
  for (HalfType ht : kHalfTypes) {
    SCOPED_TRACE(HalfTypeName(ht));
    const auto g = RandomHalf(ht, kN, 6.0f, 4), u = RandomHalf(ht, kN, 2.0f, 5),
               dy = RandomHalf(ht, kN, 1.0f, 6);
    const auto dg0 = RandomHalf(ht, kN, 1.0f, 7), du0 = RandomHalf(ht, kN, 1.0f, 8);
    std::vector<float> out(kN), dg(kN), du(kN);
    for (int64_t i = 0; i < kN; ++i) {
      const double gv = g.values[i], sig = 1.0 / (1.0 + std::exp(-gv));
      out[i] = static_cast<float>(gv * sig * u.values[i]);
      dg[i] = static_cast<float>(dg0.values[i] +
                                 dy.values[i] * u.values[i] * sig * (1 + gv * (1 - sig)));
      du[i] = static_cast<float>(du0.values[i] + dy.values[i] * gv * sig);
    }
    DeviceArray<uint16_t> d_g(g.bits), d_u(u.bits), d_out(kN), d_dy(dy.bits), d_dg(dg0.bits),
        d_du(du0.bits);
    MOBIUS_ASSERT_KERNEL_OK(swiglu_fwd(ht, d_out.get(), d_g.get(), d_u.get(), kN, nullptr));
    ExpectClose(ht, d_out.ToHost(), out, HalfTol(ht), "swiglu out");
    MOBIUS_ASSERT_KERNEL_OK(
        swiglu_bwd(ht, d_dg.get(), d_du.get(), d_dy.get(), d_g.get(), d_u.get(), kN, nullptr));
    ExpectClose(ht, d_dg.ToHost(), dg, HalfTol(ht), "swiglu dgate");
    ExpectClose(ht, d_du.ToHost(), du, HalfTol(ht), "swiglu dup");
  }
}

TEST(ResidualCuda, BitwiseOneRounding) {
  MOBIUS_REQUIRE_GPU();
  for (HalfType ht : kHalfTypes) {
    SCOPED_TRACE(HalfTypeName(ht));
    const auto a = RandomHalf(ht, kN, 3.0f, 9), b = RandomHalf(ht, kN, 3.0f, 10);
    DeviceArray<uint16_t> d_a(a.bits), d_b(b.bits), d_out(kN);
    MOBIUS_ASSERT_KERNEL_OK(residual_fwd(ht, d_out.get(), d_a.get(), d_b.get(), kN, nullptr));
    const auto out = d_out.ToHost();
    for (int64_t i = 0; i < kN; ++i) {
      ASSERT_EQ(out[i], ToHalf(ht, a.values[i] + b.values[i])) << "at " << i;
    }
    MOBIUS_ASSERT_KERNEL_OK(residual_fwd(ht, d_a.get(), d_a.get(), d_b.get(), kN, nullptr));
    EXPECT_EQ(d_a.ToHost(), out);  // in place
  }
}

// fp16 overflows to infinity: a sum from 65520 up is +-inf, as on the host (the loss scaler of a
// fp16 job detects it); 65504 is the largest finite value.
TEST(ResidualCuda, Fp16OverflowIsInfinity) {
  MOBIUS_REQUIRE_GPU();
  const std::vector<float> a = {60000.0f, -60000.0f, 32752.0f, 65504.0f, -1.0f};
  const std::vector<float> b = {10000.0f, -10000.0f, 32752.0f, -65504.0f, 1.0f};
  std::vector<uint16_t> ah(a.size()), bh(b.size()), want(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ah[i] = ToHalf(HalfType::kF16, a[i]);
    bh[i] = ToHalf(HalfType::kF16, b[i]);
    want[i] = ToHalf(HalfType::kF16, gpu_test::FromHalf(HalfType::kF16, ah[i]) +
                                         gpu_test::FromHalf(HalfType::kF16, bh[i]));
  }
  EXPECT_EQ(want[0], 0x7c00);  // +inf
  EXPECT_EQ(want[1], 0xfc00);  // -inf
  EXPECT_EQ(want[2], 0x7bff);  // 65504
  DeviceArray<uint16_t> d_a(ah), d_b(bh), d_out(a.size());
  MOBIUS_ASSERT_KERNEL_OK(residual_fwd(HalfType::kF16, d_out.get(), d_a.get(), d_b.get(),
                                       static_cast<int64_t>(a.size()), nullptr));
  EXPECT_EQ(d_out.ToHost(), want);
}

TEST(BiasCuda, AddIsBitwiseAndBackwardSumsColumns) {
  MOBIUS_REQUIRE_GPU();
  const int64_t n = 300, c = 77;
  for (HalfType ht : kHalfTypes) {
    SCOPED_TRACE(HalfTypeName(ht));
    const auto x = RandomHalf(ht, n * c, 2.0f, 11), bias = RandomHalf(ht, c, 1.0f, 12);
    DeviceArray<uint16_t> d_x(x.bits), d_bias(bias.bits), d_out(n * c);
    MOBIUS_ASSERT_KERNEL_OK(bias_add_fwd(ht, d_out.get(), d_x.get(), d_bias.get(), n, c, nullptr));
    const auto out = d_out.ToHost();
    for (int64_t i = 0; i < n * c; ++i) {
      ASSERT_EQ(out[i], ToHalf(ht, x.values[i] + bias.values[i % c])) << "at " << i;
    }
    const auto dy32 = RandomFloats(n * c, -1, 1, 13);
    const auto db0 = RandomFloats(c, -1, 1, 14);
    std::vector<float> db_half(db0), db_f32(db0);
    for (int64_t j = 0; j < c; ++j) {
      double s16 = 0, s32 = 0;
      for (int64_t r = 0; r < n; ++r) {
        s16 += x.values[r * c + j];
        s32 += dy32[r * c + j];
      }
      db_half[j] += static_cast<float>(s16);
      db_f32[j] += static_cast<float>(s32);
    }
    DeviceArray<float> d_dy32(dy32), d_db1(db0), d_db2(db0);
    MOBIUS_ASSERT_KERNEL_OK(bias_bwd(ht, d_db1.get(), d_x.get(), n, c, nullptr));
    MOBIUS_ASSERT_KERNEL_OK(bias_bwd(d_db2.get(), d_dy32.get(), n, c, nullptr));
    ExpectClose(d_db1.ToHost(), db_half, 1e-5, "bias dbias (16-bit dout)");
    ExpectClose(d_db2.ToHost(), db_f32, 1e-5, "bias dbias (fp32 dout)");
  }
}

}  // namespace
}  // namespace mobius::kernels::cuda
