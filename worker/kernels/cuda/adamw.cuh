// AdamW on the GPU for the `resident` schedule (fp32 master weights, moments and gradients in
// device memory): the update of worker/optim/adamw.h's CPU AdamW, per element, step t (1-based):
//   g = grad * grad_scale;  p = p * (1 - lr * wd);
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g g;
//   p = p - (lr / (1 - beta1^t)) m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//   half_out = round_to_nearest_even(p) in out_type (bf16 or fp16, half_type.h)
// The per-step scalars come from AdamWStepScalars, computed on the host in double and rounded to
// float once, exactly as worker/optim does. The element update is written with explicit IEEE
// intrinsics (__fmul_rn, __fmaf_rn, correctly rounded sqrt and division), fusing the same three
// multiply-adds as the CPU's AVX2/AVX-512 kernels, so the GPU result is bitwise that of the CPU's
// fused formula (test/gpu/adamw_test.cc checks it bit for bit).
//
// Enqueued on `stream`; pointers are device addresses.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_ADAMW_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_ADAMW_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

// Mirrors worker/optim/adamw_kernels.h AdamWScalars (kept separate: that header is not part of the
// CUDA-only subset).
struct AdamWStepScalars {
  float grad_scale;
  float decay;  // 1 - lr * weight_decay, or 1 for tensors without decay
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  float neg_step_size;          // -lr / (1 - beta1^t)
  float eps;
};

// The scalars of step `step` (1-based), as worker/optim/adamw.cc computes them. `decay` false: no
// weight decay for this tensor (biases, norms).
AdamWStepScalars MakeAdamWStepScalars(double lr, double beta1, double beta2, double eps,
                                      double weight_decay, int64_t step, float grad_scale,
                                      bool decay);

// master, m, v [n] fp32 updated in place; grad [n] fp32; half_out [n] the new master rounded to
// out_type (nullptr: not written). REQUIRES: the buffers do not overlap.
KernelStatus adamw_step(HalfType out_type, const AdamWStepScalars& s, float* master, float* m,
                        float* v, const float* grad, uint16_t* half_out, int64_t n,
                        cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_ADAMW_CUH_
