// RMSNorm over the last dimension of [N, C] rows (Llama family; Qwen3's q/k norm over rows of
// head_dim) on the GPU, as LlamaRMSNorm in fp32: out = weight * (x * rstd),
// rstd = 1 / sqrt(mean(x^2) + eps). Same contract as worker/kernels/cpu/rmsnorm.h
// (backend::NormParams with NormOp::kRmsNorm): activations and weights bf16 or fp16 (`type`,
// half_type.h), rstd and parameter gradients fp32, arithmetic fp32.
//
// One warp per row; dweight by the column reduction of device_utils.cuh (fp32 atomics per 256-row
// chunk: last bits may vary from run to run).
//
// All functions enqueue on `stream` and return the launch status; pointers are device addresses.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_RMSNORM_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_RMSNORM_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

// out, inp [N, C] (out may alias inp), weight [C], of `type`; rstd [N] fp32 (saved).
KernelStatus rmsnorm_fwd(HalfType type, uint16_t* out, float* rstd, const uint16_t* inp,
                         const uint16_t* weight, int64_t n, int64_t c, float eps,
                         cudaStream_t stream);

// dinp [N, C] += (of `type`, or fp32); dweight [C] fp32 +=; dout, inp, weight of `type`.
// REQUIRES: dinp aliases neither dout nor inp.
KernelStatus rmsnorm_bwd(HalfType type, uint16_t* dinp, float* dweight, const uint16_t* dout,
                         const uint16_t* inp, const uint16_t* weight, const float* rstd, int64_t n,
                         int64_t c, cudaStream_t stream);
KernelStatus rmsnorm_bwd(HalfType type, float* dinp, float* dweight, const uint16_t* dout,
                         const uint16_t* inp, const uint16_t* weight, const float* rstd, int64_t n,
                         int64_t c, cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_RMSNORM_CUH_
