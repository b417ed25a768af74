// SwiGLU (Llama family MLP) element-wise over bf16 or fp16 (half_type.h) on the GPU with fp32
// arithmetic: out = silu(gate) * up, silu(g) = g * sigmoid(g). Same contract as
// worker/kernels/cpu/swiglu.h (backend::SwiGluParams / SwiGluBackwardParams). Also gpt-oss's
// clamped variant over interleaved pairs (backend::ClampedSwiGluParams / ...BackwardParams).
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

// gate_up [N, 2W] (gate at even columns, up at odd), out [N, W], both of `type`:
// out = (u + 1) * g * sigmoid(alpha * g), g = min(gate, limit), u = clamp(up, -limit, limit) (NaN
// propagates, as std::min / std::max on the CPU). One thread per output element.
KernelStatus clamped_swiglu_fwd(HalfType type, uint16_t* out, const uint16_t* gate_up, int64_t n,
                                int64_t width, float alpha, float limit, cudaStream_t stream);

// dgate_up [N, 2W] = (written, not accumulated) the gradient from dout [N, W]; zero where a clamp
// holds (gate > limit; |up| > limit), the boundary passing the gradient as torch's clamp backward.
// REQUIRES: dgate_up aliases neither input.
KernelStatus clamped_swiglu_bwd(HalfType type, uint16_t* dgate_up, const uint16_t* dout,
                                const uint16_t* gate_up, int64_t n, int64_t width, float alpha,
                                float limit, cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_SWIGLU_CUH_
