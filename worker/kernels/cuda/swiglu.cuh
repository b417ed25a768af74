// SwiGLU (Llama family MLP) element-wise over bf16 or fp16 (half_type.h) on the GPU with fp32
// arithmetic: out = silu(gate) * up, silu(g) = g * sigmoid(g). Same contract as
// worker/kernels/cpu/swiglu.h (backend::SwiGluParams / SwiGluBackwardParams).
//
// All functions enqueue on `stream` and return the launch status; pointers are device addresses.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_SWIGLU_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_SWIGLU_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

// out, gate, up [N] of `type`; out may alias gate or up.
KernelStatus swiglu_fwd(HalfType type, uint16_t* out, const uint16_t* gate, const uint16_t* up,
                        int64_t n, cudaStream_t stream);

// dgate, dup [N] += (one rounding per element); all of `type`. REQUIRES: dgate and dup alias
// neither each other nor any input.
KernelStatus swiglu_bwd(HalfType type, uint16_t* dgate, uint16_t* dup, const uint16_t* dout,
                        const uint16_t* gate, const uint16_t* up, int64_t n, cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_SWIGLU_CUH_
