#include "common/model/unit_workspace.h"

#include <algorithm>

namespace mobius::model {
namespace {

class Slots {
 public:
  uint64_t Add(uint64_t bytes) {
    if (bytes == 0) return 0;
    const uint64_t offset = (total_ + 63) / 64 * 64;
    total_ = offset + bytes;
    return offset;
  }
  uint64_t total() const { return total_; }

 private:
  uint64_t total_ = 0;
};

}  // namespace

int64_t ChunkRows(int64_t n, int64_t hidden, int64_t width, int64_t chunk_tokens) {
  if (n <= 0) return 1;
  if (chunk_tokens < 0) return n;
  if (chunk_tokens > 0) return std::min(n, chunk_tokens);
  // [rows, width] no larger than [n, hidden]: rows = n * hidden / width, rounded up.
  const int64_t fit = width <= 0 ? n : (n * hidden + width - 1) / width;
  return std::min(n, std::max(fit, kMinChunkRows));
}

WorkspaceLayout MakeWorkspaceLayout(const ModelConfig& cfg, UnitKind kind, int64_t b, int64_t t,
                                    int64_t chunk_tokens, bool half_backward) {
  const uint64_t n = b * t, C = cfg.hidden_size, hd = cfg.head_dim;
  const uint64_t Q = cfg.num_heads * hd, K = cfg.num_kv_heads * hd;
  const bool qk = cfg.qk_norm, rope = cfg.position == PositionKind::kRope;
  const bool swiglu = cfg.mlp == MlpKind::kSwiGlu;
  const bool layer = cfg.norm == NormKind::kLayerNorm;
  Slots s;
  WorkspaceLayout w;
  auto bf = [&](uint64_t elements) { return s.Add(2 * elements); };
  auto f32 = [&](uint64_t elements) { return s.Add(4 * elements); };
  switch (kind) {
    case UnitKind::kEmbedding:
      w.d_norm = bf(n * C);
      break;
    case UnitKind::kHead: {
      const uint64_t r = w.head_rows = HeadChunkRows(cfg, static_cast<int64_t>(n), chunk_tokens);
      w.norm1 = bf(n * C), w.norm1_mean = f32(layer ? n : 0), w.norm1_rstd = f32(n);
      // fp16 backward: fp16 logits and their gradient, the input gradient straight into d_norm.
      w.logits = half_backward ? bf(r * cfg.vocab_size) : f32(r * cfg.vocab_size);
      w.losses = f32(n), w.ce_lse = f32(n), w.loss = f32(1);
      w.d_norm_f32 = f32(half_backward ? 0 : n * C), w.d_norm = bf(n * C);
      if (half_backward) {
        const uint64_t V = cfg.vocab_size;
        // chunk_tokens > 0 (tests, tuning): blocks of at most that many rows too; < 0: one.
        const uint64_t rows = chunk_tokens > 0   ? static_cast<uint64_t>(chunk_tokens)
                              : chunk_tokens < 0 ? V
                                                 : std::max<uint64_t>(n, kMinChunkRows);
        w.head_dw_rows = static_cast<int64_t>(std::min<uint64_t>(V, rows));
        w.dw_half = bf(w.head_dw_rows * C);
      }
      break;
    }
    case UnitKind::kDecoderBlock: {
      const uint64_t r = w.mlp_rows = MlpChunkRows(cfg, static_cast<int64_t>(n), chunk_tokens);
      // The dense MLP's buffers exist when some block has a dense MLP (not every block has
      // experts); one layout serves every block of the model.
      bool dense = !cfg.moe.enabled();
      for (int64_t l = 0; l < cfg.num_layers && !dense; ++l) dense = !cfg.moe.IsMoeLayer(l);
      const uint64_t I = dense ? cfg.intermediate_size : 0;
      w.norm1 = bf(n * C), w.q_proj = bf(n * Q), w.k_proj = bf(n * K);
      w.q_normed = bf(qk ? n * Q : 0), w.k_normed = bf(qk ? n * K : 0);
      // RoPE runs in place (the backend contract allows it) on the buffer that is dead after it:
      // q_normed / k_normed with a q/k norm (its backward reads q_proj, not them), else q_proj /
      // k_proj (nothing but RoPE reads them).
      w.q = !rope ? 0 : qk ? w.q_normed : w.q_proj;
      w.k = !rope ? 0 : qk ? w.k_normed : w.k_proj;
      w.v = bf(n * K);
      w.att = bf(n * Q), w.o = bf(n * C), w.mid = bf(n * C), w.norm2 = bf(n * C);
      w.mlp_in = bf(r * I), w.mlp_up = bf(swiglu ? r * I : 0), w.mlp_act = bf(r * I);
      w.mlp_out = bf(n * C);
      w.norm1_mean = f32(layer ? n : 0), w.norm1_rstd = f32(n);
      w.norm2_mean = f32(layer ? n : 0), w.norm2_rstd = f32(n);
      w.qn_rstd = f32(qk ? n * cfg.num_heads : 0), w.kn_rstd = f32(qk ? n * cfg.num_kv_heads : 0);
      w.lse = f32(b * cfg.num_heads * t);
      w.inv_freq = f32(rope ? hd / 2 : 0), w.cos = f32(rope ? t * hd / 2 : 0);
      w.sin = f32(rope ? t * hd / 2 : 0);
      w.d_act = bf(r * I), w.d_in = bf(r * I), w.d_up = bf(swiglu ? r * I : 0);
      w.d_att = bf(n * Q), w.dq = bf(n * Q), w.dk = bf(n * K), w.dv = bf(n * K);
      // The q and k gradients before RoPE and before the q/k norm live in buffers that are dead
      // by then (block_runner.cc's backward order): the attention output's gradient d_att and
      // the forward's v (both read last by the attention backward), then dq, dk themselves
      // (read last by the RoPE backward). [N, Q] and [N, K] buffers fewer: 2 of each for Qwen3.
      w.dq_pre = rope ? w.d_att : 0, w.dk_pre = rope ? w.v : 0;
      w.dq_proj = !qk ? 0 : rope ? w.dq : w.d_att;
      w.dk_proj = !qk ? 0 : rope ? w.dk : w.v;
      w.d_norm_f32 = f32(half_backward ? 0 : std::max({n * C, n * Q, r * I}));
      w.d_norm = bf(n * C);
      w.dy_half = bf(half_backward ? n * C : 0);
      // One fp16 weight gradient at a time; with several MLP chunks one per MLP weight, summed
      // over the chunks in fp16 and added into the fp32 gradient once per call (linear.h).
      const uint64_t mlp_weights = r < n ? (swiglu ? 3 : 2) : 1;
      w.dw_half = bf(half_backward ? std::max({C * Q, C * K, mlp_weights * C * I}) : 0);
      if (cfg.moe.enabled()) {
        const uint64_t E = cfg.moe.num_experts, k = cfg.moe.experts_per_token;
        const uint64_t Ie = cfg.moe.expert_intermediate_size, routed = n * k;
        auto i32 = f32;  // 4-byte indices
        w.moe_logits = f32(n * E), w.moe_probs = f32(n * E);
        w.moe_ids = i32(n * k), w.moe_order = i32(routed), w.moe_pos = i32(routed);
        w.moe_offsets = i32(E + 1), w.moe_weights = f32(n * k);
        w.moe_x = bf(routed * C), w.moe_y = bf(routed * C);
        // Clamped SwiGLU experts (gpt-oss): one gate_up [rows, 2 Ie] in moe_gate (and its
        // gradient in moe_d_gate), moe_up and moe_d_up empty.
        const uint64_t fused =
            cfg.moe.expert_mlp == model::MoeConfig::ExpertMlp::kClampedSwiGlu ? 2 : 1;
        w.moe_gate = bf(routed * Ie * fused), w.moe_up = bf(fused == 2 ? 0 : routed * Ie);
        w.moe_act = bf(routed * Ie);
        w.moe_d_act = bf(n * Ie), w.moe_d_gate = bf(n * Ie * fused);
        w.moe_d_up = bf(fused == 2 ? 0 : n * Ie);
        w.moe_d_act_f32 = f32(n * Ie);
        w.moe_dy = f32(routed * C), w.moe_dnorm = f32(n * C), w.moe_dweights = f32(n * k);
        w.moe_prob_sums = f32(E), w.moe_aux_grad = f32(E);
      }
      break;
    }
  }
  w.total = s.total();
  return w;
}

}  // namespace mobius::model
