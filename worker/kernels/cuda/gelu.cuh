// GELU, tanh approximation (HF "gelu_new", GPT-2), element-wise over bf16 or fp16 (half_type.h)
// on the GPU with fp32 arithmetic: gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
// evaluated as x * sigmoid(2u) like worker/kernels/cpu/gelu.h (no cancellation for negative u).
// Same contract as the CPU kernel (backend::GeluParams / GeluBackwardParams).
//
// All functions enqueue on `stream` and return the launch status; pointers are device addresses.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_GELU_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_GELU_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

// out, inp [N] of `type`; out may alias inp.
KernelStatus gelu_fwd(HalfType type, uint16_t* out, const uint16_t* inp, int64_t n,
                      cudaStream_t stream);

// dinp [N] += gelu'(inp) * dout, one rounding per element; all of `type`. REQUIRES: dinp aliases
// no input.
KernelStatus gelu_bwd(HalfType type, uint16_t* dinp, const uint16_t* dout, const uint16_t* inp,
                      int64_t n, cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_GELU_CUH_
