// Residual add on the GPU: out = a + b over bf16 or fp16 (half_type.h), summed in fp32 and rounded
// once (bitwise the CPU kernel, worker/kernels/cpu/residual.h; backend::ResidualParams). The
// backward is the identity.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_RESIDUAL_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_RESIDUAL_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

// out, a, b [N] of `type`; out may alias a or b. Enqueued on `stream`.
KernelStatus residual_fwd(HalfType type, uint16_t* out, const uint16_t* a, const uint16_t* b,
                          int64_t n, cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_RESIDUAL_CUH_
