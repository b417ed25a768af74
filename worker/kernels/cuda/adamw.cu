#include <cmath>

#include "worker/kernels/cuda/adamw.cuh"
#include "worker/kernels/cuda/device_utils.cuh"

namespace mobius::kernels::cuda {
namespace {

using internal::As;
using internal::GridFor;
using internal::Store;

constexpr int kThreads = 256;

// worker/optim/adamw_kernels.h AdamWElement<kFused = true>, with every rounding spelled out so
// that nvcc cannot contract anything else into an FMA.
template <typename T>
__global__ void adamw_step_kernel(AdamWStepScalars s, float* master, float* m_buf, float* v_buf,
                                  const float* grad, T* half_out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = __fmul_rn(grad[i], s.grad_scale);
    const float pd = __fmul_rn(master[i], s.decay);
    const float mb = __fmul_rn(m_buf[i], s.beta1);
    const float vb = __fmul_rn(v_buf[i], s.beta2);
    const float sg = __fmul_rn(s.one_minus_beta2, g);
    const float m = __fmaf_rn(g, s.one_minus_beta1, mb);
    const float v = __fmaf_rn(sg, g, vb);
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bias_correction2_sqrt), s.eps);
    const float p = __fmaf_rn(s.neg_step_size, __fdiv_rn(m, denom), pd);
    m_buf[i] = m;
    v_buf[i] = v;
    master[i] = p;
    if (half_out != nullptr) Store(half_out, i, p);
  }
}

}  // namespace

AdamWStepScalars MakeAdamWStepScalars(double lr, double beta1, double beta2, double eps,
                                      double weight_decay, int64_t step, float grad_scale,
                                      bool decay) {
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1.0 - std::pow(beta1, t);
  const double bias_correction2 = 1.0 - std::pow(beta2, t);
  AdamWStepScalars s;
  s.grad_scale = grad_scale;
  s.decay = decay ? static_cast<float>(1.0 - lr * weight_decay) : 1.0f;
  s.beta1 = static_cast<float>(beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  s.neg_step_size = static_cast<float>(-(lr / bias_correction1));
  s.eps = static_cast<float>(eps);
  return s;
}

KernelStatus adamw_step(HalfType out_type, const AdamWStepScalars& s, float* master, float* m,
                        float* v, const float* grad, uint16_t* half_out, int64_t n,
                        cudaStream_t stream) {
  if (n == 0) return OkStatus();
  return internal::DispatchHalf(out_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    adamw_step_kernel<T>
        <<<GridFor(n, kThreads), kThreads, 0, stream>>>(s, master, m, v, grad, As<T>(half_out), n);
    return MOBIUS_KERNEL_LAUNCH_STATUS("adamw_step_kernel");
  });
}

}  // namespace mobius::kernels::cuda
