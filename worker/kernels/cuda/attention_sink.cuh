// Attention sinks (gpt-oss) on the GPU: one learned logit per head that joins every row's softmax
// and carries no value. Same contract as worker/kernels/cpu/attention_sink.h
// (backend::AttentionSinkParams / AttentionSinkBackwardParams): out, dout [B, T, H, hd] and
// sinks [H] of `type` (bf16 or fp16, half_type.h), lse [B, H, T] fp32, dsinks [H] fp32; fp32
// arithmetic. Applied after the attention forward on its out and lse; the attention backward then
// reads the adjusted out and lse as they are.
//
// The forward is one warp per (b, t, h) row; the backward one block per head that walks every
// (b, t) row in a fixed order (a fixed block reduction, no atomics): deterministic.
//
// All functions enqueue on `stream` and return the launch status; pointers are device addresses.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_ATTENTION_SINK_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_ATTENTION_SINK_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

// lse[b, h, t] := l2 = logaddexp(l, z) with l the old value and z = sinks[h] (m + log(exp(l - m)
// + exp(z - m)), m = max(l, z)); every element of out[b, t, h, :] *= exp(l - l2), one rounding.
KernelStatus attention_sink_fwd(HalfType type, uint16_t* out, float* lse, const uint16_t* sinks,
                                int64_t b, int64_t t, int64_t heads, int64_t head_dim,
                                cudaStream_t stream);

// dsinks[h] += -sum over b, t of exp(sinks[h] - lse[b, h, t]) * sum_d dout * out, from the
// sink-adjusted out and lse.
KernelStatus attention_sink_bwd(HalfType type, float* dsinks, const uint16_t* out,
                                const uint16_t* dout, const float* lse, const uint16_t* sinks,
                                int64_t b, int64_t t, int64_t heads, int64_t head_dim,
                                cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_ATTENTION_SINK_CUH_
