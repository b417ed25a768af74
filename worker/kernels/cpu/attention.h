// Causal softmax attention with grouped-query heads (and an optional sliding window), computed
// flash-style on the CPU: keys and values are visited in tiles with an online softmax, the T x T
// score matrix is never stored, and the forward saves only the logsumexp of each query row.
// Oracle: reference ops_attention.h (which does store the probabilities).
//
// Query head h reads key/value head h / (H / KV) (HF repeat_kv). Scores are scaled by
// 1 / sqrt(head_dim); position t attends to 0..t, or with a window W > 0 to t - W < t2 <= t.
// Storage: q, k, v, out and their gradients bf16 (uint16_t), or all fp16 (F16, storage.h); lse
// fp32; arithmetic fp32, one rounding per 16-bit output.
//
// Backward (FlashAttention-2): P = exp(S - lse) is recomputed per tile and
// dS = P * (dP - D), D = rowsum(dO * O). To stay deterministic without atomics it runs in two
// passes: one per (batch, kv head, key tile) owning dK and dV (summing over the heads of the
// group), one per (batch, head, query tile) owning dQ.
//
// Thread-safety: reentrant; tiles are split over `pool` (nullptr: calling thread). Results are
// bitwise identical for any pool size.
#ifndef MOBIUS_WORKER_KERNELS_CPU_ATTENTION_H_
#define MOBIUS_WORKER_KERNELS_CPU_ATTENTION_H_

#include <cstdint>

#include "worker/kernels/cpu/parallel.h"

namespace mobius::kernels::cpu {

struct AttentionShape {
  int64_t b = 0, t = 0;
  int64_t heads = 0;     // H, query heads
  int64_t kv_heads = 0;  // KV, REQUIRES: H % KV == 0
  int64_t head_dim = 0;  // hd
  int64_t window = 0;    // sliding window; 0 = full causal attention
};

// q [B, T, H, hd], k, v [B, T, KV, hd] -> out [B, T, H, hd];
// lse [B, H, T] fp32 = log sum_t2 exp(score[t, t2]) (saved for the backward).
// REQUIRES: out aliases none of q, k, v.
void attention_fwd(uint16_t* out, float* lse, const uint16_t* q, const uint16_t* k,
                   const uint16_t* v, const AttentionShape& s, ThreadPool* pool);
void attention_fwd(F16* out, float* lse, const F16* q, const F16* k, const F16* v,
                   const AttentionShape& s, ThreadPool* pool);

// The same over a key/value cache (incremental decoding): q, out [B, T, H, hd] are positions
// [start, start + T) of their sequences; k_cache, v_cache [B, capacity, KV, hd] hold positions
// [0, start + T); lse [B, H, T] or nullptr. A row gets exactly the bits attention_fwd gives the
// row of the same position over the same keys when window == 0 (the key tiles start at 0 either
// way and masked keys add exact zeros). REQUIRES: start + T <= capacity; out aliases no input.
void attention_cached_fwd(uint16_t* out, float* lse, const uint16_t* q, const uint16_t* k_cache,
                          const uint16_t* v_cache, const AttentionShape& s, int64_t start,
                          int64_t capacity, ThreadPool* pool);
void attention_cached_fwd(F16* out, float* lse, const F16* q, const F16* k_cache,
                          const F16* v_cache, const AttentionShape& s, int64_t start,
                          int64_t capacity, ThreadPool* pool);

// dq [B, T, H, hd], dk, dv [B, T, KV, hd] += gradients from dout [B, T, H, hd], given the
// forward's inputs, its out and lse. REQUIRES: the gradients alias no input.
void attention_bwd(uint16_t* dq, uint16_t* dk, uint16_t* dv, const uint16_t* dout,
                   const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* out,
                   const float* lse, const AttentionShape& s, ThreadPool* pool);
void attention_bwd(F16* dq, F16* dk, F16* dv, const F16* dout, const F16* q, const F16* k,
                   const F16* v, const F16* out, const float* lse, const AttentionShape& s,
                   ThreadPool* pool);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_ATTENTION_H_
