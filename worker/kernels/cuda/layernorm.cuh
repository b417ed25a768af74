// LayerNorm over the last dimension of [N, C] rows (GPT-2) on the GPU, as
// torch.nn.functional.layer_norm: out = (x - mean) * rstd * weight + bias, rstd = 1/sqrt(var + eps)
// with the biased variance. Same contract as worker/kernels/cpu/layernorm.h
// (backend::NormParams / NormBackwardParams with NormOp::kLayerNorm): activations and weights bf16
// or fp16 (`type`, half_type.h), mean/rstd and parameter gradients fp32, arithmetic fp32 (two-pass
// mean and variance).
//
// One warp per row. The backward writes dinp per row and adds dweight/dbias with a column
// reduction (device_utils.cuh: fp32 atomics per 256-row chunk, so their last bits may vary from
// run to run).
//
// All functions enqueue on `stream` and return the launch status; pointers are device addresses.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_LAYERNORM_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_LAYERNORM_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

// out, inp [N, C] (out may alias inp); weight, bias [C] (bias may be null); all of `type`.
// mean, rstd [N] fp32 (saved for the backward).
KernelStatus layernorm_fwd(HalfType type, uint16_t* out, float* mean, float* rstd,
                           const uint16_t* inp, const uint16_t* weight, const uint16_t* bias,
                           int64_t n, int64_t c, float eps, cudaStream_t stream);

// dinp [N, C] += (of `type`, or fp32); dweight, dbias [C] fp32 += (dbias may be null). dout, inp
// [N, C] and weight of `type`; mean, rstd from the forward. REQUIRES: dinp aliases neither dout nor
// inp.
KernelStatus layernorm_bwd(HalfType type, uint16_t* dinp, float* dweight, float* dbias,
                           const uint16_t* dout, const uint16_t* inp, const uint16_t* weight,
                           const float* mean, const float* rstd, int64_t n, int64_t c,
                           cudaStream_t stream);
KernelStatus layernorm_bwd(HalfType type, float* dinp, float* dweight, float* dbias,
                           const uint16_t* dout, const uint16_t* inp, const uint16_t* weight,
                           const float* mean, const float* rstd, int64_t n, int64_t c,
                           cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_LAYERNORM_CUH_
