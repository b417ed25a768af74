// Bias add over rows and its gradient (column sums) on the GPU, for linear layers whose GEMM does
// not fuse the bias (the cuBLASLt GEMM can: gemm.h). Same contract as worker/kernels/cpu/bias.h
// (backend::BiasAddParams / BiasBackwardParams): activations and bias bf16 or fp16 (half_type.h),
// bias gradient fp32. bias_add_fwd is bitwise the CPU result; bias_bwd sums with the column
// reduction of device_utils.cuh (fp32 atomics per 256-row chunk: last bits may vary run to run).
//
// All functions enqueue on `stream` and return the launch status; pointers are device addresses.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_BIAS_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_BIAS_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

// out[n, j] = inp[n, j] + bias[j]; out, inp [N, C] (out may alias inp), bias [C], all of `type`.
KernelStatus bias_add_fwd(HalfType type, uint16_t* out, const uint16_t* inp, const uint16_t* bias,
                          int64_t n, int64_t c, cudaStream_t stream);
// out, inp [N, C] fp32 (out may alias inp) + bias [C] of `bias_type`.
KernelStatus bias_add_fwd_f32(HalfType bias_type, float* out, const float* inp,
                              const uint16_t* bias, int64_t n, int64_t c, cudaStream_t stream);

// dbias[j] += sum_n dout[n, j]; dbias [C] fp32, dout [N, C] of dout_type, or fp32.
KernelStatus bias_bwd(HalfType dout_type, float* dbias, const uint16_t* dout, int64_t n, int64_t c,
                      cudaStream_t stream);
KernelStatus bias_bwd(float* dbias, const float* dout, int64_t n, int64_t c, cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_BIAS_CUH_
