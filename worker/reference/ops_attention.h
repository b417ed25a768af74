// Causal softmax attention with grouped-query heads.
//
// Query head h reads key/value head h / (H / KV) (HF repeat_kv). Scores are scaled by
// 1 / sqrt(head_dim); position t attends to positions 0..t (with a sliding window W > 0: only
// t - W < t2 <= t, as Mistral); masked probabilities are exactly 0.
#ifndef MOBIUS_WORKER_REFERENCE_OPS_ATTENTION_H_
#define MOBIUS_WORKER_REFERENCE_OPS_ATTENTION_H_

#include <cstdint>

namespace mobius::reference {

struct AttentionShape {
  int64_t b = 0, t = 0;
  int64_t heads = 0;     // H, query heads
  int64_t kv_heads = 0;  // KV, REQUIRES: H % KV == 0
  int64_t head_dim = 0;  // hd
  int64_t window = 0;    // sliding window; 0 = full causal attention
  // Attention sinks [H] (gpt-oss): a logit per head in every row's softmax, with no value; the
  // probabilities in `att` then sum to 1 - the sink's. nullptr: none.
  const float* sinks = nullptr;
};

// q [B, T, H, hd], k, v [B, T, KV, hd] -> out [B, T, H, hd];
// att [B, H, T, T] softmax probabilities (saved for the backward; zero above the diagonal).
void AttentionForward(float* out, float* att, const float* q, const float* k, const float* v,
                      const AttentionShape& s);

// Accumulates dq [B, T, H, hd], dk, dv [B, T, KV, hd] from dout [B, T, H, hd], and with sinks
// dsinks [H] (REQUIRED then).
void AttentionBackward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                       const float* k, const float* v, const float* att, const AttentionShape& s,
                       float* dsinks = nullptr);

}  // namespace mobius::reference

#endif  // MOBIUS_WORKER_REFERENCE_OPS_ATTENTION_H_
