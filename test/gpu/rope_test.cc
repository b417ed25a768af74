// worker/kernels/cuda/rope.cuh against a plain C++ reference (label `gpu`).
//
// Tolerances: the tables are the CPU path's formula (fp32 angle, cos/sin in double, rounded to
// fp32); CUDA's double cos/sin are within 2 ulp of double, so the fp32 tables agree up to one fp32
// ulp in rare cases: 3e-7 of max|ref| = 1. The rotations are two products and a sum per element in
// fp32 rounded to bf16 or fp16 (the GPU may fuse one product into an FMA): HalfTol (two ulps of
// the format).
#include "worker/kernels/cuda/rope.cuh"

#include <cmath>
#include <vector>

#include "test/gpu/gpu_test_util.h"

namespace mobius::kernels::cuda {
namespace {

using gpu_test::DeviceArray;
using gpu_test::ExpectClose;
using gpu_test::HalfTol;
using gpu_test::kHalfTypes;
using gpu_test::RandomHalf;

TEST(RopeCuda, TablesForwardBackwardMatchReference) {
  MOBIUS_REQUIRE_GPU();
  const int64_t b = 2, t = 61, nh = 3, hd = 64, half = hd / 2;
  std::vector<float> inv_freq(half);
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[i] = static_cast<float>(1.0 / std::pow(10000.0, 2.0 * i / hd));
  }
  std::vector<float> cos_ref(t * half), sin_ref(t * half);
  for (int64_t p = 0; p < t; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv_freq[i];
      cos_ref[p * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin_ref[p * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
  DeviceArray<float> d_inv(inv_freq), d_cos(t * half), d_sin(t * half);
  MOBIUS_ASSERT_KERNEL_OK(rope_tables(d_cos.get(), d_sin.get(), d_inv.get(), t, half, nullptr));
  ExpectClose(d_cos.ToHost(), cos_ref, 3e-7, "rope cos table");
  ExpectClose(d_sin.ToHost(), sin_ref, 3e-7, "rope sin table");

  const int64_t n = b * t * nh * hd;
  for (HalfType ht : kHalfTypes) {
    SCOPED_TRACE(HalfTypeName(ht));
    const auto x = RandomHalf(ht, n, 2.0f, 1), dy = RandomHalf(ht, n, 1.0f, 2),
               dx0 = RandomHalf(ht, n, 1.0f, 3);
    std::vector<float> out(n), dx(dx0.values);
    for (int64_t row = 0; row < b * t * nh; ++row) {
      const int64_t p = row / nh % t;
      for (int64_t i = 0; i < half; ++i) {
        const double c = cos_ref[p * half + i], s = sin_ref[p * half + i];
        const int64_t o = row * hd + i;
        out[o] = static_cast<float>(x.values[o] * c - x.values[o + half] * s);
        out[o + half] = static_cast<float>(x.values[o + half] * c + x.values[o] * s);
        dx[o] += static_cast<float>(dy.values[o] * c + dy.values[o + half] * s);
        dx[o + half] += static_cast<float>(dy.values[o + half] * c - dy.values[o] * s);
      }
    }
    DeviceArray<uint16_t> d_x(x.bits), d_out(n), d_dy(dy.bits), d_dx(dx0.bits);
    MOBIUS_ASSERT_KERNEL_OK(
        rope_fwd(ht, d_out.get(), d_x.get(), d_cos.get(), d_sin.get(), b, t, nh, hd, nullptr));
    ExpectClose(ht, d_out.ToHost(), out, HalfTol(ht), "rope out");
    MOBIUS_ASSERT_KERNEL_OK(
        rope_bwd(ht, d_dx.get(), d_dy.get(), d_cos.get(), d_sin.get(), b, t, nh, hd, nullptr));
    ExpectClose(ht, d_dx.ToHost(), dx, HalfTol(ht), "rope dinp");
    // In place equals out of place.
    MOBIUS_ASSERT_KERNEL_OK(
        rope_fwd(ht, d_x.get(), d_x.get(), d_cos.get(), d_sin.get(), b, t, nh, hd, nullptr));
    EXPECT_EQ(d_x.ToHost(), d_out.ToHost());
  }
}

TEST(RopeCuda, OddHeadDimIsInvalid) {  // checked before anything touches the device
  const KernelStatus st =
      rope_fwd(HalfType::kF16, nullptr, nullptr, nullptr, nullptr, 1, 1, 1, 5, nullptr);
  EXPECT_EQ(st.code(), KernelCode::kInvalidArgument) << st.ToString();
}

}  // namespace
}  // namespace mobius::kernels::cuda
