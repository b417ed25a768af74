// Rotary position embeddings on the GPU, Hugging Face convention (LlamaRotaryEmbedding +
// rotate_half), over bf16 or fp16 (half_type.h) [B, T, NH, head_dim] with fp32 arithmetic. Same
// contract as worker/kernels/cpu/rope.h (backend::RopeTablesParams / RopeParams /
// RopeBackwardParams): for position p and a_i = p * inv_freq[i], dimensions i and i + head_dim/2
// form a pair,
//   out[i] = x[i] cos a_i - x[i + d/2] sin a_i,  out[i + d/2] = x[i + d/2] cos a_i + x[i] sin a_i.
// The tables are the CPU path's: the fp32 angle as HF forms it, cos/sin taken in double and
// rounded to fp32 (CUDA's double cos/sin are within 2 ulp of double, so the fp32 results match the
// CPU's except in the rare case where that changes the rounding to fp32: 1 fp32 ulp).
//
// All functions enqueue on `stream` and return the launch status; pointers are device addresses.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_ROPE_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_ROPE_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

// cos, sin [T, half] fp32 for positions 0 .. T-1 from inv_freq [half] fp32, each fp32 value
// multiplied by `scale` (YaRN's attention factor, as HF's cos() * attention_scaling; 1 otherwise).
KernelStatus rope_tables(float* cos, float* sin, const float* inv_freq, int64_t t, int64_t half,
                         float scale, cudaStream_t stream);
// scale 1: the plain tables.
inline KernelStatus rope_tables(float* cos, float* sin, const float* inv_freq, int64_t t,
                                int64_t half, cudaStream_t stream) {
  return rope_tables(cos, sin, inv_freq, t, half, 1.0f, stream);
}

// out, inp [B, T, NH, head_dim] of `type` (out may alias inp); cos, sin [T, head_dim / 2].
// INVALID_ARGUMENT for an odd head_dim.
KernelStatus rope_fwd(HalfType type, uint16_t* out, const uint16_t* inp, const float* cos,
                      const float* sin, int64_t b, int64_t t, int64_t nh, int64_t head_dim,
                      cudaStream_t stream);

// dinp [B, T, NH, head_dim] += R^T dout (both of `type`), one rounding per element.
// REQUIRES: dinp does not alias dout.
KernelStatus rope_bwd(HalfType type, uint16_t* dinp, const uint16_t* dout, const float* cos,
                      const float* sin, int64_t b, int64_t t, int64_t nh, int64_t head_dim,
                      cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_ROPE_CUH_
