// The device workspace of one layer unit for one [B, T] microbatch: its layout (what the unit
// runners of worker/model place where) and its size, which the planner's memory model uses too,
// so the two cannot drift apart. Pure arithmetic; shared by the training engine and the planner.
//
// Token chunks (long sequences). Two intermediates grow as tokens x a width much larger than the
// hidden size: the LM head's fp32 logits [N, V] and the MLP's [N, I] activations and gradients.
// Both are computed a chunk of rows at a time, so that they exist for at most `rows` tokens:
//   head: logits, the loss and its gradient, the head's weight gradient accumulated chunk by chunk;
//   MLP:  gate/up/act and their gradients per chunk (the backward re-runs a chunk's MLP forward
//         from the kept norm2 output when there is more than one chunk).
// Everything else a block keeps is O(N x hidden): q, k, v, the attention output (flash attention
// keeps only a logsumexp per head and row), norms, residuals.
//
// The chunk size follows from memory, not a constant: a chunk's widest intermediate ([rows, V] or
// [rows, I] elements) is at most as large as the microbatch's hidden state [N, C], but never fewer
// than kMinChunkRows rows (smaller GEMMs waste the device; on the CPU backend 1024-row chunks cost
// 13-22% at 4096-token microbatches, docs/benchmarks.md), and never more than N. At
// N <= kMinChunkRows there is one chunk and the ops are exactly the unchunked ones.
//
// `chunk_tokens` (the trainer's setting, common/run/trainer_options.h): 0 = that rule; > 0 = at
// most that many rows per chunk (tests and tuning); < 0 = unchunked (one chunk of N rows).
#ifndef MOBIUS_COMMON_MODEL_UNIT_WORKSPACE_H_
#define MOBIUS_COMMON_MODEL_UNIT_WORKSPACE_H_

#include <cstdint>

#include "common/model/layer_units.h"
#include "common/model/model_config.h"

namespace mobius::model {

inline constexpr int64_t kMinChunkRows = 4096;

// Rows per chunk of an intermediate `width` elements wide over n = B * T rows (1 <= result <= n).
int64_t ChunkRows(int64_t n, int64_t hidden, int64_t width, int64_t chunk_tokens);
inline int64_t HeadChunkRows(const ModelConfig& c, int64_t n, int64_t chunk_tokens) {
  return ChunkRows(n, c.hidden_size, c.vocab_size, chunk_tokens);
}
inline int64_t MlpChunkRows(const ModelConfig& c, int64_t n, int64_t chunk_tokens) {
  return ChunkRows(n, c.hidden_size, c.intermediate_size, chunk_tokens);
}

// Byte offsets into the workspace (64-byte aligned); fields a kind does not use stay 0-sized.
// Names follow worker/reference/activations.h. N = B * T, Q = H * hd, K = KV * hd, I intermediate,
// R = MlpChunkRows, R_h = HeadChunkRows.
struct WorkspaceLayout {
  uint64_t total = 0;
  int64_t mlp_rows = 0;   // R: rows of the MLP buffers below
  int64_t head_rows = 0;  // R_h: rows of `logits`
  // half_backward: vocabulary rows of the head's fp16 weight gradient block (dw_half
  // [head_dw_rows, C]): min(V, max(N, kMinChunkRows)), no larger than the [N, C] buffers
  // (chunk_tokens > 0: min(V, chunk_tokens); < 0: V).
  int64_t head_dw_rows = 0;
  // block forward, bf16: [N, *] except mlp_in, mlp_up, mlp_act [R, I]
  uint64_t norm1 = 0, q_proj = 0, k_proj = 0, q_normed = 0, k_normed = 0, q = 0, k = 0, v = 0;
  uint64_t att = 0, o = 0, mid = 0, norm2 = 0, mlp_in = 0, mlp_up = 0, mlp_act = 0, mlp_out = 0;
  // block forward, fp32
  uint64_t norm1_mean = 0, norm1_rstd = 0, qn_rstd = 0, kn_rstd = 0, lse = 0;
  uint64_t norm2_mean = 0, norm2_rstd = 0, inv_freq = 0, cos = 0, sin = 0;
  // block backward: bf16 [R, I] x3, [N, Q] / [N, K] x3 each; fp32 [max(N C, N Q, R I)]; bf16 [N, C]
  uint64_t d_act = 0, d_in = 0, d_up = 0, d_att = 0, dq = 0, dk = 0, dv = 0;
  // q, k are the RoPE outputs in place of their inputs (q_normed / k_normed, else q_proj / k_proj);
  // dq_pre, dk_pre, dq_proj, dk_proj share the space of buffers dead by the time they are written
  // (unit_workspace.cc): d_att / v, then dq / dk.
  uint64_t dq_pre = 0, dk_pre = 0, dq_proj = 0, dk_proj = 0, d_norm_f32 = 0, d_norm = 0;
  // block backward with half_backward (below): fp16 [N, C] and [the block's largest weight]
  uint64_t dy_half = 0, dw_half = 0;
  // Mixture-of-experts blocks (config.moe; worker/backend/moe_params.h): E experts, k per token,
  // Ie expert width, N k routed rows. Kept from forward to backward: the router's probabilities
  // fp32 [N, E] and routing int32 ids [N, k], order and pos [N k], offsets [E + 1] and fp32
  // weights [N, k]; the gathered inputs, expert outputs 16-bit [N k, C] and the experts'
  // gate/up/act 16-bit [N k, Ie]. Backward scratch: one expert's rows at a time (an expert gets at
  // most N) in d_act/d_gate/d_up 16-bit [N, Ie] and moe_d_act_f32 fp32 [N, Ie]; moe_dy fp32
  // [N k, C] (the experts' output gradient, then their input gradient); moe_dnorm fp32 [N, C];
  // moe_dweights fp32 [N, k]; the router logits fp32 [N, E] (forward) hold its gradient
  // (backward). A block without experts leaves them unused.
  uint64_t moe_logits = 0, moe_probs = 0, moe_ids = 0, moe_order = 0, moe_pos = 0;
  uint64_t moe_offsets = 0, moe_weights = 0, moe_x = 0, moe_y = 0;
  uint64_t moe_gate = 0, moe_up = 0, moe_act = 0;
  uint64_t moe_d_act = 0, moe_d_gate = 0, moe_d_up = 0, moe_d_act_f32 = 0;
  uint64_t moe_dy = 0, moe_dnorm = 0, moe_dweights = 0;
  // The load-balancing loss (output_router_logits): the probabilities' column sums fp32 [E]
  // (forward) and the loss's gradient per probability column fp32 [E] (backward).
  uint64_t moe_prob_sums = 0, moe_aux_grad = 0;
  // head (norm out and stats reuse norm1*, d_norm*): fp32; logits [R_h, V] (fp16: above)
  uint64_t logits = 0, losses = 0, ce_lse = 0, loss = 0;
  // embedding backward: the bf16 copy of dout reuses d_norm
};

// `half_backward` (training.precision fp16 with trainable weights: worker/model/linear.h): the
// block's backward GEMMs write fp16 outputs, so it has no fp32 d_norm_f32 but an fp16 copy of
// an fp32 output gradient (dy_half) and one fp16 weight gradient (dw_half; with several MLP token
// chunks one per MLP weight, each summed over the chunks before its one add); the head's logits
// (and their gradient, in place) are fp16 [R_h, V], it has no d_norm_f32 either, and its weight
// gradient goes through an fp16 block of head_dw_rows vocabulary rows (dw_half), added into the
// fp32 gradient block by block once per token chunk.
WorkspaceLayout MakeWorkspaceLayout(const ModelConfig& config, UnitKind kind, int64_t b, int64_t t,
                                    int64_t chunk_tokens = 0, bool half_backward = false);

}  // namespace mobius::model

#endif  // MOBIUS_COMMON_MODEL_UNIT_WORKSPACE_H_
