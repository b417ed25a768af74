// worker/kernels/cuda/layernorm.cuh and rmsnorm.cuh against a plain C++ reference (label `gpu`),
// in bf16 and in fp16.
//
// Tolerances (relative to max|ref| of each tensor): 16-bit outputs HalfTol (two ulps of the
// format, 8e-3 bf16 / 2e-3 fp16: one rounding plus a possible neighbour from a different fp32
// summation order); fp32 statistics,
// fp32 dinp and the parameter gradients 1e-4 (fp32 sums of C = 200..2048 terms or N = 67 rows in a
// different order than the double reference, plus fp32 atomics for dweight/dbias: ~C * 2^-24
// ~ 1e-5 at worst, 10x margin).
#include <cmath>
#include <vector>

#include "test/gpu/gpu_test_util.h"
#include "worker/kernels/cuda/layernorm.cuh"
#include "worker/kernels/cuda/rmsnorm.cuh"

namespace mobius::kernels::cuda {
namespace {

using gpu_test::Bf16Data;
using gpu_test::DeviceArray;
using gpu_test::ExpectClose;
using gpu_test::HalfTol;
using gpu_test::kHalfTypes;
using gpu_test::RandomFloats;
using gpu_test::RandomHalf;

struct Shape {
  int64_t n, c;
};
const Shape kShapes[] = {{67, 200}, {16, 2048}, {5, 7}};

// Rows with an offset, so that the two-pass mean/variance matters.
Bf16Data Input(HalfType ht, int64_t n, int64_t c, uint32_t seed) {
  auto x = RandomHalf(ht, n * c, 1.0f, seed);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < c; ++i) {
      const float v = x.values[r * c + i] + 0.25f * static_cast<float>(r % 5);
      x.bits[r * c + i] = gpu_test::ToHalf(ht, v);
      x.values[r * c + i] = gpu_test::FromHalf(ht, x.bits[r * c + i]);
    }
  }
  return x;
}

TEST(LayerNormCuda, ForwardAndBackwardMatchReference) {
  MOBIUS_REQUIRE_GPU();
  const float eps = 1e-5f;
  for (HalfType ht : kHalfTypes)
    for (const Shape& sh : kShapes) {
      SCOPED_TRACE(testing::Message() << HalfTypeName(ht) << " n=" << sh.n << " c=" << sh.c);
      const int64_t n = sh.n, c = sh.c;
      const double tol = HalfTol(ht);
      const auto x = Input(ht, n, c, 1), w = RandomHalf(ht, c, 1.0f, 2),
                 b = RandomHalf(ht, c, 0.5f, 3);
      const auto dy = RandomHalf(ht, n * c, 1.0f, 4), dx0 = RandomHalf(ht, n * c, 0.5f, 5);
      const auto dx0_f32 = RandomFloats(n * c, -0.5f, 0.5f, 6);
      const auto dw0 = RandomFloats(c, -1, 1, 7), db0 = RandomFloats(c, -1, 1, 8);
      // Reference in double.
      std::vector<float> out(n * c), mean(n), rstd(n), dx(dx0.values), dx_f32(dx0_f32), dw(dw0),
          db(db0);
      std::vector<double> dw_acc(c, 0.0), db_acc(c, 0.0);
      for (int64_t r = 0; r < n; ++r) {
        double m = 0, v = 0;
        for (int64_t i = 0; i < c; ++i) m += x.values[r * c + i];
        m /= c;
        for (int64_t i = 0; i < c; ++i) v += (x.values[r * c + i] - m) * (x.values[r * c + i] - m);
        const double s = 1.0 / std::sqrt(v / c + eps);
        mean[r] = static_cast<float>(m);
        rstd[r] = static_cast<float>(s);
        double g_sum = 0, gx_sum = 0;
        for (int64_t i = 0; i < c; ++i) {
          const double xhat = (x.values[r * c + i] - m) * s;
          out[r * c + i] = static_cast<float>(xhat * w.values[i] + b.values[i]);
          const double g = double{w.values[i]} * dy.values[r * c + i];
          g_sum += g;
          gx_sum += g * xhat;
          dw_acc[i] += dy.values[r * c + i] * xhat;
          db_acc[i] += dy.values[r * c + i];
        }
        for (int64_t i = 0; i < c; ++i) {
          const double xhat = (x.values[r * c + i] - m) * s;
          const double g = double{w.values[i]} * dy.values[r * c + i];
          const double d = s * (g - g_sum / c - xhat * gx_sum / c);
          dx[r * c + i] += static_cast<float>(d);
          dx_f32[r * c + i] += static_cast<float>(d);
        }
      }
      for (int64_t i = 0; i < c; ++i) {
        dw[i] += static_cast<float>(dw_acc[i]);
        db[i] += static_cast<float>(db_acc[i]);
      }

      DeviceArray<uint16_t> d_x(x.bits), d_w(w.bits), d_b(b.bits), d_out(n * c), d_dy(dy.bits),
          d_dx(dx0.bits);
      DeviceArray<float> d_mean(n), d_rstd(n), d_dx_f32(dx0_f32), d_dw(dw0), d_db(db0);
      MOBIUS_ASSERT_KERNEL_OK(layernorm_fwd(ht, d_out.get(), d_mean.get(), d_rstd.get(), d_x.get(),
                                            d_w.get(), d_b.get(), n, c, eps, nullptr));
      ExpectClose(ht, d_out.ToHost(), out, tol, "layernorm out");
      ExpectClose(d_mean.ToHost(), mean, 1e-4, "layernorm mean");
      ExpectClose(d_rstd.ToHost(), rstd, 1e-4, "layernorm rstd");
      MOBIUS_ASSERT_KERNEL_OK(layernorm_bwd(ht, d_dx.get(), d_dw.get(), d_db.get(), d_dy.get(),
                                            d_x.get(), d_w.get(), d_mean.get(), d_rstd.get(), n, c,
                                            nullptr));
      ExpectClose(ht, d_dx.ToHost(), dx, tol, "layernorm dinp (16-bit)");
      ExpectClose(d_dw.ToHost(), dw, 1e-4, "layernorm dweight");
      ExpectClose(d_db.ToHost(), db, 1e-4, "layernorm dbias");
      // fp32 dinp, and no dbias (its buffer must stay as it was... it is not passed).
      DeviceArray<float> d_dw2(dw0);
      MOBIUS_ASSERT_KERNEL_OK(layernorm_bwd(ht, d_dx_f32.get(), d_dw2.get(), nullptr, d_dy.get(),
                                            d_x.get(), d_w.get(), d_mean.get(), d_rstd.get(), n, c,
                                            nullptr));
      ExpectClose(d_dx_f32.ToHost(), dx_f32, 1e-4, "layernorm dinp (fp32)");
      ExpectClose(d_dw2.ToHost(), dw, 1e-4, "layernorm dweight (no dbias)");
    }
}

TEST(LayerNormCuda, InPlaceForwardEqualsOutOfPlace) {
  MOBIUS_REQUIRE_GPU();
  const int64_t n = 9, c = 300;
  for (HalfType ht : kHalfTypes) {
    SCOPED_TRACE(HalfTypeName(ht));
    const auto x = Input(ht, n, c, 11), w = RandomHalf(ht, c, 1.0f, 12);
    DeviceArray<uint16_t> d_x(x.bits), d_w(w.bits), d_out(n * c);
    DeviceArray<float> d_mean(n), d_rstd(n);
    MOBIUS_ASSERT_KERNEL_OK(layernorm_fwd(ht, d_out.get(), d_mean.get(), d_rstd.get(), d_x.get(),
                                          d_w.get(), nullptr, n, c, 1e-5f, nullptr));
    MOBIUS_ASSERT_KERNEL_OK(layernorm_fwd(ht, d_x.get(), d_mean.get(), d_rstd.get(), d_x.get(),
                                          d_w.get(), nullptr, n, c, 1e-5f, nullptr));
    EXPECT_EQ(d_x.ToHost(), d_out.ToHost());
  }
}

TEST(RmsNormCuda, ForwardAndBackwardMatchReference) {
  MOBIUS_REQUIRE_GPU();
  const float eps = 1e-6f;
  for (HalfType ht : kHalfTypes)
    for (const Shape& sh : kShapes) {
      SCOPED_TRACE(testing::Message() << HalfTypeName(ht) << " n=" << sh.n << " c=" << sh.c);
      const int64_t n = sh.n, c = sh.c;
      const double tol = HalfTol(ht);
      const auto x = Input(ht, n, c, 21), w = RandomHalf(ht, c, 1.0f, 22);
      const auto dy = RandomHalf(ht, n * c, 1.0f, 23), dx0 = RandomHalf(ht, n * c, 0.5f, 24);
      const auto dx0_f32 = RandomFloats(n * c, -0.5f, 0.5f, 25);
      const auto dw0 = RandomFloats(c, -1, 1, 26);
      std::vector<float> out(n * c), rstd(n), dx(dx0.values), dx_f32(dx0_f32), dw(dw0);
      std::vector<double> dw_acc(c, 0.0);
      for (int64_t r = 0; r < n; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < c; ++i) ss += double{x.values[r * c + i]} * x.values[r * c + i];
        const double s = 1.0 / std::sqrt(ss / c + eps);
        rstd[r] = static_cast<float>(s);
        double gx = 0;
        for (int64_t i = 0; i < c; ++i) {
          const double xv = x.values[r * c + i], dyv = dy.values[r * c + i];
          out[r * c + i] = static_cast<float>(w.values[i] * xv * s);
          gx += w.values[i] * dyv * xv;
          dw_acc[i] += dyv * xv * s;
        }
        const double k = s * s * s * gx / c;
        for (int64_t i = 0; i < c; ++i) {
          const double d = s * w.values[i] * dy.values[r * c + i] - k * x.values[r * c + i];
          dx[r * c + i] += static_cast<float>(d);
          dx_f32[r * c + i] += static_cast<float>(d);
        }
      }
      for (int64_t i = 0; i < c; ++i) dw[i] += static_cast<float>(dw_acc[i]);

      DeviceArray<uint16_t> d_x(x.bits), d_w(w.bits), d_out(n * c), d_dy(dy.bits), d_dx(dx0.bits);
      DeviceArray<float> d_rstd(n), d_dx_f32(dx0_f32), d_dw(dw0), d_dw2(dw0);
      MOBIUS_ASSERT_KERNEL_OK(
          rmsnorm_fwd(ht, d_out.get(), d_rstd.get(), d_x.get(), d_w.get(), n, c, eps, nullptr));
      ExpectClose(ht, d_out.ToHost(), out, tol, "rmsnorm out");
      ExpectClose(d_rstd.ToHost(), rstd, 1e-4, "rmsnorm rstd");
      MOBIUS_ASSERT_KERNEL_OK(rmsnorm_bwd(ht, d_dx.get(), d_dw.get(), d_dy.get(), d_x.get(),
                                          d_w.get(), d_rstd.get(), n, c, nullptr));
      ExpectClose(ht, d_dx.ToHost(), dx, tol, "rmsnorm dinp (16-bit)");
      ExpectClose(d_dw.ToHost(), dw, 1e-4, "rmsnorm dweight");
      MOBIUS_ASSERT_KERNEL_OK(rmsnorm_bwd(ht, d_dx_f32.get(), d_dw2.get(), d_dy.get(), d_x.get(),
                                          d_w.get(), d_rstd.get(), n, c, nullptr));
      ExpectClose(d_dx_f32.ToHost(), dx_f32, 1e-4, "rmsnorm dinp (fp32)");
    }
}

}  // namespace
}  // namespace mobius::kernels::cuda
