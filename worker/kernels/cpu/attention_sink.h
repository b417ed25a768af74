// Attention sinks (gpt-oss): a learned logit per head that joins every row's softmax without a
// value (backend::AttentionSinkParams / AttentionSinkBackwardParams). Applied after the attention
// forward on its out and lse, so the attention kernels stay sink-free; the attention backward
// then reads the adjusted out and lse as they are.
// Oracle: reference::AttentionForward / AttentionBackward with sinks.
//
// Thread-safety: reentrant; work split over `pool` (nullptr: calling thread), bitwise identical
// for any pool size (sums in a fixed order).
#ifndef MOBIUS_WORKER_KERNELS_CPU_ATTENTION_SINK_H_
#define MOBIUS_WORKER_KERNELS_CPU_ATTENTION_SINK_H_

#include <cstdint>

#include "worker/kernels/cpu/parallel.h"
#include "worker/kernels/cpu/storage.h"

namespace mobius::kernels::cpu {

// out [B, T, H, hd] scaled by exp(lse - lse'), lse [B, H, T] := lse' = logaddexp(lse, sinks[h]);
// sinks [H] in out's format.
void attention_sink_fwd(uint16_t* out, float* lse, const uint16_t* sinks, int64_t b, int64_t t,
                        int64_t heads, int64_t head_dim, ThreadPool* pool);
void attention_sink_fwd(F16* out, float* lse, const F16* sinks, int64_t b, int64_t t,
                        int64_t heads, int64_t head_dim, ThreadPool* pool);

// dsinks [H] += -sum_{b,t} exp(sinks[h] - lse[b,h,t]) * sum_d dout * out.
void attention_sink_bwd(float* dsinks, const uint16_t* out, const uint16_t* dout,
                        const float* lse, const uint16_t* sinks, int64_t b, int64_t t,
                        int64_t heads, int64_t head_dim, ThreadPool* pool);
void attention_sink_bwd(float* dsinks, const F16* out, const F16* dout, const float* lse,
                        const F16* sinks, int64_t b, int64_t t, int64_t heads, int64_t head_dim,
                        ThreadPool* pool);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_ATTENTION_SINK_H_
