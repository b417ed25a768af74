// LoRA dropout on the GPU: the counter-based mask of worker/kernels/dropout_mask.h, so every
// element is the CPU kernel's bit for bit (worker/kernels/cpu/dropout.h; backend::DropoutParams).
//
// All functions enqueue on `stream` and return the launch status; pointers are device addresses.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_DROPOUT_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_DROPOUT_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

// out [N, C] fp32 = (accumulate: +=) kept ? inp * 1/(1-p) : 0; inp [N, C] of inp_type (bf16 or
// fp16), or fp32.
KernelStatus dropout(HalfType inp_type, float* out, const uint16_t* inp, int64_t n, int64_t c,
                     float p, uint64_t key, int64_t row_offset, bool accumulate,
                     cudaStream_t stream);
KernelStatus dropout(float* out, const float* inp, int64_t n, int64_t c, float p, uint64_t key,
                     int64_t row_offset, bool accumulate, cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_DROPOUT_CUH_
