// worker/kernels/cuda/adamw.cuh against worker/optim's AdamW formula (label `gpu`).
//
// Tolerance: none. The kernel spells out every rounding with IEEE intrinsics and fuses exactly the
// three multiply-adds that worker/optim's AVX2/AVX-512 kernels fuse (adamw_kernels.h,
// AdamWElement<kFused = true>); the host reference below is that formula with std::fma, so master,
// moments and the 16-bit copy (bf16 or fp16, one rounding of the master) must be bitwise equal.
#include "worker/kernels/cuda/adamw.cuh"

#include <cmath>
#include <cstring>
#include <vector>

#include "test/gpu/gpu_test_util.h"

namespace mobius::kernels::cuda {
namespace {

using gpu_test::DeviceArray;
using gpu_test::RandomFloats;

void ReferenceStep(const AdamWStepScalars& s, std::vector<float>& p, std::vector<float>& m,
                   std::vector<float>& v, const std::vector<float>& grad, HalfType out_type,
                   std::vector<uint16_t>& out) {
  for (size_t i = 0; i < p.size(); ++i) {
    const float g = grad[i] * s.grad_scale;
    const float pd = p[i] * s.decay;
    const float mb = m[i] * s.beta1;
    const float vb = v[i] * s.beta2;
    const float sg = s.one_minus_beta2 * g;
    m[i] = std::fma(g, s.one_minus_beta1, mb);
    v[i] = std::fma(sg, g, vb);
    const float denom = std::sqrt(v[i]) / s.bias_correction2_sqrt + s.eps;
    p[i] = std::fma(s.neg_step_size, m[i] / denom, pd);
    out[i] = gpu_test::ToHalf(out_type, p[i]);
  }
}

template <typename T>
void ExpectBitwise(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      FAIL() << what << " differs at " << i << ": got " << got[i] << " want " << want[i];
    }
  }
}

TEST(AdamWCuda, TenStepsAreBitwiseTheCpuFormula) {
  MOBIUS_REQUIRE_GPU();
  const size_t n = 100003;
  for (bool decay : {true, false}) {
    // The fp16 copy with decay, the bf16 one without: both formats, both kinds of tensor.
    const HalfType out_type = decay ? HalfType::kF16 : HalfType::kBf16;
    SCOPED_TRACE(decay ? "with weight decay, fp16 copy" : "without weight decay, bf16 copy");
    auto p = RandomFloats(n, -1, 1, 1), m = RandomFloats(n, -1e-2f, 1e-2f, 2),
         v = RandomFloats(n, 0, 1e-4f, 3);
    std::vector<uint16_t> out(n);
    DeviceArray<float> d_p(p), d_m(m), d_v(v), d_g(n);
    DeviceArray<uint16_t> d_out(n);
    for (int64_t step = 1; step <= 10; ++step) {
      const auto grad = RandomFloats(n, -1, 1, 100 + static_cast<uint32_t>(step));
      ASSERT_EQ(cudaMemcpy(d_g.get(), grad.data(), n * sizeof(float), cudaMemcpyHostToDevice),
                cudaSuccess);
      const AdamWStepScalars s =
          MakeAdamWStepScalars(1e-3, 0.9, 0.999, 1e-8, 0.1, step, 0.7f, decay);
      MOBIUS_ASSERT_KERNEL_OK(adamw_step(out_type, s, d_p.get(), d_m.get(), d_v.get(), d_g.get(),
                                         d_out.get(), static_cast<int64_t>(n), nullptr));
      ReferenceStep(s, p, m, v, grad, out_type, out);
    }
    ExpectBitwise(d_p.ToHost(), p, "master");
    ExpectBitwise(d_m.ToHost(), m, "m");
    ExpectBitwise(d_v.ToHost(), v, "v");
    ExpectBitwise(d_out.ToHost(), out, "16-bit copy");
  }
}

TEST(AdamWCuda, StepScalarsAreWorkerOptimsFormula) {  // host only
  const AdamWStepScalars s = MakeAdamWStepScalars(2e-4, 0.9, 0.95, 1e-8, 0.1, 3, 1.0f, true);
  EXPECT_EQ(s.decay, static_cast<float>(1.0 - 2e-4 * 0.1));
  EXPECT_EQ(s.neg_step_size, static_cast<float>(-(2e-4 / (1.0 - std::pow(0.9, 3.0)))));
  EXPECT_EQ(s.bias_correction2_sqrt, static_cast<float>(std::sqrt(1.0 - std::pow(0.95, 3.0))));
  EXPECT_EQ(MakeAdamWStepScalars(2e-4, 0.9, 0.95, 1e-8, 0.1, 3, 1.0f, false).decay, 1.0f);
}

}  // namespace
}  // namespace mobius::kernels::cuda
