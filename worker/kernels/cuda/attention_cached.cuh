// Attention of new queries over a key/value cache (incremental decoding) on the GPU. Same contract
// as worker/kernels/cpu/attention.h attention_cached_fwd (backend::CachedAttentionParams):
// q, out [B, T, H, hd] are positions [start, start + T) of their sequences; k_cache, v_cache
// [B, capacity, KV, hd] hold positions [0, start + T), all of `type` (bf16 or fp16, half_type.h);
// lse [B, H, T] fp32 or nullptr. Query head h reads kv head h / (H / KV); scores scaled by
// 1 / sqrt(hd); position p attends to 0..p, or with a window W > 0 to p - W < p2 <= p.
//
// One warp per query row walks the keys 32 at a time with an online softmax, as the reference
// forward of attention.cuh does (a decoding step has one query row per head: no tiling to gain).
// A prefill from position 0 (start 0) runs the tiled forward instead (attention_mma_fwd_prefill)
// where it applies and its on-device check passed. Deterministic. Enqueues on `stream` and returns
// the launch status; pointers are device addresses.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_ATTENTION_CACHED_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_ATTENTION_CACHED_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/attention.cuh"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

// INVALID_ARGUMENT for a bad shape (CheckAttentionShape), start < 0 or start + T > capacity.
KernelStatus attention_cached_fwd(HalfType type, uint16_t* out, float* lse, const uint16_t* q,
                                  const uint16_t* k_cache, const uint16_t* v_cache,
                                  const AttentionShape& s, int64_t start, int64_t capacity,
                                  cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_ATTENTION_CACHED_CUH_
