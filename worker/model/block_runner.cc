// UnitRunner: the decoder block, forward and backward (the order of reference/model_forward.cc and
// model_backward.cc): x -> norm1 -> q/k/v -> [qk_norm] -> [RoPE] -> attention -> o_proj -> + x = mid
// -> norm2 -> MLP -> + mid. Parameter gradients are accumulated; the residual stream's gradient is
// kept in fp32, branch gradients are bf16 (the activation type) where a kernel takes bf16.
#include <utility>

#include "common/status_macros.h"
#include "worker/model/linear.h"
#include "worker/model/unit_runner_internal.h"
#include "worker/reference/ops_rope.h"

namespace mobius::units {

using backend::DType;

namespace {

// A linear over rows [row0, ...) of its call: its adapter term's per-row state offset.
LinearWeight Rows(LinearWeight w, int64_t row0) {
  w.lora = LoraRows(w.lora, row0);
  return w;
}

}  // namespace

static BlockWeights MakeBlockWeights(const UnitRunner::Ctx& c, const reference::LayerNames& ln,
                                     const model::ModelConfig& cfg, bool in_out);

absl::Status UnitRunner::BlockForward(const Ctx& c, void* out) const {
  const model::ModelConfig& cfg = config_;
  const reference::LayerNames& ln = names_.layers[unit_index() - 1];
  const BlockWeights w = MakeBlockWeights(c, ln, cfg, names_.layout == reference::WeightLayout::kInOut);
  const int64_t n = c.n, C = cfg.hidden_size, I = cfg.intermediate_size, hd = cfg.head_dim;
  const int64_t H = cfg.num_heads, KV = cfg.num_kv_heads, Q = H * hd, K = KV * hd;
  backend::Backend& be = *backend_;
  backend::Queue& q = *c.queue;
  const WorkspaceLayout& ws = c.ws;

  MOBIUS_RETURN_IF_ERROR(Norm(c, ln.norm1_weight, ln.norm1_bias, c.mb.input, c.at(ws.norm1),
                              c.f32(ws.norm1_mean), c.f32(ws.norm1_rstd), n));
  MOBIUS_RETURN_IF_ERROR(LinearForward(be, q, w.q, c.at(ws.norm1), c.at(ws.q_proj), c.half, n, C, Q));
  MOBIUS_RETURN_IF_ERROR(LinearForward(be, q, w.k, c.at(ws.norm1), c.at(ws.k_proj), c.half, n, C, K));
  MOBIUS_RETURN_IF_ERROR(LinearForward(be, q, w.v, c.at(ws.norm1), c.at(ws.v), c.half, n, C, K));
  const void* q_src = c.at(ws.q_proj);
  const void* k_src = c.at(ws.k_proj);
  if (cfg.qk_norm) {  // Qwen3: RMSNorm over rows of head_dim, before RoPE
    const float eps = static_cast<float>(cfg.norm_eps);
    MOBIUS_RETURN_IF_ERROR(be.NormForward(
        q, {.dtype = c.half, .op = backend::NormOp::kRmsNorm, .n = n * H, .c = hd, .eps = eps, .inp = q_src,
            .weight = c.W(ln.q_norm), .out = c.at(ws.q_normed), .rstd = c.f32(ws.qn_rstd)}));
    MOBIUS_RETURN_IF_ERROR(be.NormForward(
        q, {.dtype = c.half, .op = backend::NormOp::kRmsNorm, .n = n * KV, .c = hd, .eps = eps, .inp = k_src,
            .weight = c.W(ln.k_norm), .out = c.at(ws.k_normed), .rstd = c.f32(ws.kn_rstd)}));
    q_src = c.at(ws.q_normed);
    k_src = c.at(ws.k_normed);
  }
  const void* q_att = q_src;
  const void* k_att = k_src;
  const KvCache* kv = c.mb.kv;
  if (cfg.position == model::PositionKind::kRope) {
    // Decoding rotates by the cache's tables from the rows' first position; training computes
    // positions 0 .. t-1 (the same values: a table row depends on its position only).
    const float* cos = c.f32(ws.cos);
    const float* sin = c.f32(ws.sin);
    if (kv != nullptr) {
      cos = kv->cos + c.mb.position * (hd / 2);
      sin = kv->sin + c.mb.position * (hd / 2);
    } else {
      MOBIUS_RETURN_IF_ERROR(be.CopyToDevice(q, inv_freq_.data(), *c.workspace, ws.inv_freq,
                                             4 * inv_freq_.size()));
      MOBIUS_RETURN_IF_ERROR(be.RopeTables(q, {.t = c.mb.t, .half = hd / 2,
                                               .scale = reference::RopeTableScale(cfg.rope_scaling),
                                               .inv_freq = c.f32(ws.inv_freq),
                                               .cos = c.f32(ws.cos), .sin = c.f32(ws.sin)}));
    }
    MOBIUS_RETURN_IF_ERROR(be.RopeForward(q, {.dtype = c.half, .b = c.mb.b, .t = c.mb.t, .nh = H, .head_dim = hd,
                                              .cos = cos, .sin = sin, .inp = q_src,
                                              .out = c.at(ws.q)}));
    MOBIUS_RETURN_IF_ERROR(be.RopeForward(q, {.dtype = c.half, .b = c.mb.b, .t = c.mb.t, .nh = KV, .head_dim = hd,
                                              .cos = cos, .sin = sin, .inp = k_src,
                                              .out = c.at(ws.k)}));
    q_att = c.at(ws.q);
    k_att = c.at(ws.k);
  }
  const backend::AttentionShapeParams shape{c.mb.b, c.mb.t, H, KV, hd,
                                            cfg.WindowOf(unit_index() - 1)};
  if (kv != nullptr) {  // append this call's keys and values, then attend over the cache
    for (int64_t b = 0; b < c.mb.b; ++b) {
      const uint64_t src = 2 * static_cast<uint64_t>(b * c.mb.t * K);
      const uint64_t dst = 2 * static_cast<uint64_t>((b * kv->capacity + c.mb.position) * K);
      using Rows = std::pair<const void*, void*>;  // the new rows -> the cache
      for (const auto& [from, to] : {Rows{k_att, kv->k}, Rows{c.at(ws.v), kv->v}}) {
        MOBIUS_RETURN_IF_ERROR(be.Cast(
            q, {.n = c.mb.t * K, .src_type = c.half, .dst_type = c.half,
                .src = static_cast<const char*>(from) + src, .dst = static_cast<char*>(to) + dst}));
      }
    }
    MOBIUS_RETURN_IF_ERROR(be.CachedAttentionForward(
        q, {.dtype = c.half, .shape = shape, .start = c.mb.position, .capacity = kv->capacity, .q = q_att,
            .k = kv->k, .v = kv->v, .out = c.at(ws.att), .lse = c.f32(ws.lse)}));
  } else {
    MOBIUS_RETURN_IF_ERROR(be.AttentionForward(q, {.dtype = c.half, .shape = shape, .q = q_att, .k = k_att,
                                                   .v = c.at(ws.v), .out = c.at(ws.att),
                                                   .lse = c.f32(ws.lse)}));
  }
  if (!ln.sinks.empty()) {  // gpt-oss: each head's sink joins the softmax (op_params.h)
    MOBIUS_RETURN_IF_ERROR(be.AttentionSinkForward(
        q, {.dtype = c.half, .b = c.mb.b, .t = c.mb.t, .heads = H, .head_dim = hd,
            .sinks = c.W(ln.sinks), .out = c.at(ws.att), .lse = c.f32(ws.lse)}));
  }
  MOBIUS_RETURN_IF_ERROR(LinearForward(be, q, w.o, c.at(ws.att), c.at(ws.o), c.half, n, Q, C));
  MOBIUS_RETURN_IF_ERROR(be.ResidualAdd(q, {.dtype = c.half, .n = n * C, .a = c.mb.input, .b = c.at(ws.o),
                                            .out = c.at(ws.mid)}));

  MOBIUS_RETURN_IF_ERROR(Norm(c, ln.norm2_weight, ln.norm2_bias, c.at(ws.mid), c.at(ws.norm2),
                              c.f32(ws.norm2_mean), c.f32(ws.norm2_rstd), n));
  if (!ln.router_weight.empty()) {  // experts (moe_runner.cc)
    MOBIUS_RETURN_IF_ERROR(MoeForward(c, ln, /*combine=*/out != nullptr));
    if (out == nullptr) return absl::OkStatus();
    return be.ResidualAdd(q, {.dtype = c.half, .n = n * C, .a = c.at(ws.mid), .b = c.at(ws.mlp_out), .out = out});
  }
  // Internals only (a backward's recompute) with several MLP chunks: the backward re-runs each
  // chunk's MLP itself, so there is nothing to keep here. With one chunk the recompute leaves out
  // the down projection: the backward reads its input (and its adapter's h), never its output.
  if (out == nullptr && ws.mlp_rows < n) return absl::OkStatus();
  for (int64_t r0 = 0; r0 < n; r0 += ws.mlp_rows) {
    MOBIUS_RETURN_IF_ERROR(
        MlpChunkForward(c, w, r0, std::min(ws.mlp_rows, n - r0), /*down=*/out != nullptr));
  }
  if (out == nullptr) return absl::OkStatus();  // recompute: internals only
  return be.ResidualAdd(q, {.dtype = c.half, .n = n * C, .a = c.at(ws.mid), .b = c.at(ws.mlp_out), .out = out});
}

// Rows [row0, row0 + rows) of the MLP: from norm2's output to mlp_in / mlp_up / mlp_act (the
// chunk's buffers) and, with `down`, the down projection into those rows of mlp_out; without it,
// the down projection's adapter input h alone (its backward reads it), when it has an adapter.
absl::Status UnitRunner::MlpChunkForward(const Ctx& c, const BlockWeights& w, int64_t row0,
                                         int64_t rows, bool down) const {
  const int64_t C = config_.hidden_size, I = config_.intermediate_size;
  backend::Backend& be = *backend_;
  backend::Queue& q = *c.queue;
  const WorkspaceLayout& ws = c.ws;
  const void* x = c.bf(ws.norm2) + row0 * C;
  void* y = c.bf(ws.mlp_out) + row0 * C;
  const int64_t e = rows * I;
  if (config_.mlp == model::MlpKind::kGeluTanh) {
    MOBIUS_RETURN_IF_ERROR(LinearForward(be, q, Rows(w.fc, row0), x, c.at(ws.mlp_in), c.half, rows, C, I));
    MOBIUS_RETURN_IF_ERROR(be.GeluForward(q, {.dtype = c.half, .n = e, .inp = c.at(ws.mlp_in), .out = c.at(ws.mlp_act)}));
    if (!down) return LoraProjectInput(be, q, Rows(w.proj, row0).lora, c.at(ws.mlp_act), c.half, rows, I);
    return LinearForward(be, q, Rows(w.proj, row0), c.at(ws.mlp_act), y, c.half, rows, I, C);
  }
  MOBIUS_RETURN_IF_ERROR(LinearForward(be, q, Rows(w.gate, row0), x, c.at(ws.mlp_in), c.half, rows, C, I));
  MOBIUS_RETURN_IF_ERROR(LinearForward(be, q, Rows(w.up, row0), x, c.at(ws.mlp_up), c.half, rows, C, I));
  MOBIUS_RETURN_IF_ERROR(be.SwiGluForward(q, {.dtype = c.half, .n = e, .gate = c.at(ws.mlp_in), .up = c.at(ws.mlp_up),
                                              .out = c.at(ws.mlp_act)}));
  if (!down) return LoraProjectInput(be, q, Rows(w.down, row0).lora, c.at(ws.mlp_act), c.half, rows, I);
  return LinearForward(be, q, Rows(w.down, row0), c.at(ws.mlp_act), y, c.half, rows, I, C);
}

// The MLP's backward over rows [row0, row0 + rows): dout's rows flow through the down projection
// and the activation to the up projections; their input gradient, rounded to bf16, lands in those
// rows of d_norm (d_norm_f32 is the chunk's fp32 scratch). With several chunks the chunk's forward
// is re-run first (the workspace holds one chunk's intermediates).
absl::Status UnitRunner::MlpChunkBackward(const Ctx& c, const BlockWeights& w, int64_t row0,
                                          int64_t rows, const float* dout) const {
  const int64_t C = config_.hidden_size, I = config_.intermediate_size;
  backend::Backend& be = *backend_;
  backend::Queue& q = *c.queue;
  const WorkspaceLayout& ws = c.ws;
  const int64_t e = rows * I;
  auto zero = [&](uint64_t offset, int64_t bf16_elements) {
    return be.Zero(q, {.dst = c.at(offset), .bytes = 2 * static_cast<uint64_t>(bf16_elements)});
  };
  auto to_bf16 = [&](const void* src, void* dst, int64_t elements) {
    return be.Cast(q, {.n = elements, .src_type = DType::kFp32, .dst_type = c.half,
                       .src = src, .dst = dst});
  };
  if (ws.mlp_rows < c.n) MOBIUS_RETURN_IF_ERROR(MlpChunkForward(c, w, row0, rows, false));
  const void* x = c.bf(ws.norm2) + row0 * C;
  const bool gelu = config_.mlp == model::MlpKind::kGeluTanh;
  // fp16 backward with several chunks: MLP weight k's fp16 gradient is summed over the chunks in
  // its own part of dw_half and added into the fp32 one after the last (linear.h).
  auto chunked = [&](LinearWeight lw, int64_t k) {
    if (!c.half_backward || ws.mlp_rows >= c.n) return lw;
    lw.dw_half = c.bf(ws.dw_half) + k * C * I;
    lw.dw_half_first = row0 == 0;
    lw.dw_half_last = row0 + rows >= c.n;
    return lw;
  };
  const LinearWeight w_out = chunked(Rows(gelu ? w.proj : w.down, row0), 0);
  // fp16 backward: the GEMMs write the 16-bit gradients themselves; else fp32 scratch, rounded.
  const bool hb = c.half_backward;
  const DType dx_type = hb ? c.half : DType::kFp32;
  void* d_norm_rows = c.bf(ws.d_norm) + row0 * C;
  MOBIUS_RETURN_IF_ERROR(LinearBackward(be, q, w_out, c.at(ws.mlp_act), dout + row0 * C,
                                        DType::kFp32, hb ? c.at(ws.d_act) : c.at(ws.d_norm_f32),
                                        dx_type, false, rows, I, C));
  if (!hb) MOBIUS_RETURN_IF_ERROR(to_bf16(c.at(ws.d_norm_f32), c.at(ws.d_act), e));
  MOBIUS_RETURN_IF_ERROR(zero(ws.d_in, e));
  void* d_x = hb ? d_norm_rows : c.at(ws.d_norm_f32);
  if (gelu) {
    MOBIUS_RETURN_IF_ERROR(be.GeluBackward(q, {.dtype = c.half, .n = e, .dout = c.at(ws.d_act),
                                               .inp = c.at(ws.mlp_in), .dinp = c.at(ws.d_in)}));
    MOBIUS_RETURN_IF_ERROR(LinearBackward(be, q, chunked(Rows(w.fc, row0), 1), x, c.at(ws.d_in),
                                          c.half, d_x, dx_type, false, rows, C, I));
  } else {
    MOBIUS_RETURN_IF_ERROR(zero(ws.d_up, e));
    MOBIUS_RETURN_IF_ERROR(be.SwiGluBackward(q, {.dtype = c.half, .n = e, .dout = c.at(ws.d_act),
                                                 .gate = c.at(ws.mlp_in), .up = c.at(ws.mlp_up),
                                                 .dgate = c.at(ws.d_in), .dup = c.at(ws.d_up)}));
    MOBIUS_RETURN_IF_ERROR(LinearBackward(be, q, chunked(Rows(w.gate, row0), 1), x, c.at(ws.d_in),
                                          c.half, d_x, dx_type, false, rows, C, I));
    MOBIUS_RETURN_IF_ERROR(LinearBackward(be, q, chunked(Rows(w.up, row0), 2), x, c.at(ws.d_up),
                                          c.half, d_x, dx_type, true, rows, C, I));
  }
  if (hb) return absl::OkStatus();
  return to_bf16(c.at(ws.d_norm_f32), d_norm_rows, rows * C);
}

absl::Status UnitRunner::BlockBackward(const Ctx& c, const float* dout, float* dinp) const {
  const model::ModelConfig& cfg = config_;
  const reference::LayerNames& ln = names_.layers[unit_index() - 1];
  const BlockWeights w = MakeBlockWeights(c, ln, cfg, names_.layout == reference::WeightLayout::kInOut);
  const int64_t n = c.n, C = cfg.hidden_size, I = cfg.intermediate_size, hd = cfg.head_dim;
  const int64_t H = cfg.num_heads, KV = cfg.num_kv_heads, Q = H * hd, K = KV * hd;
  backend::Backend& be = *backend_;
  backend::Queue& q = *c.queue;
  const WorkspaceLayout& ws = c.ws;
  auto zero = [&](uint64_t offset, int64_t bf16_elements) {
    return be.Zero(q, {.dst = c.at(offset), .bytes = 2 * static_cast<uint64_t>(bf16_elements)});
  };
  auto to_bf16 = [&](const void* src, void* dst, int64_t elements) {
    return be.Cast(q, {.n = elements, .src_type = DType::kFp32, .dst_type = c.half,
                       .src = src, .dst = dst});
  };

  // MLP: dout flows to mlp_out and (residual) to mid; d_norm gets norm2's output gradient.
  if (!ln.router_weight.empty()) {
    MOBIUS_RETURN_IF_ERROR(MoeBackward(c, ln, dout));
  } else {
    for (int64_t r0 = 0; r0 < n; r0 += ws.mlp_rows) {
      MOBIUS_RETURN_IF_ERROR(MlpChunkBackward(c, w, r0, std::min(ws.mlp_rows, n - r0), dout));
    }
  }
  // dinp holds d(mid) = dout + norm2'(d_norm).
  MOBIUS_RETURN_IF_ERROR(be.Cast(q, {.n = n * C, .src_type = DType::kFp32,
                                     .dst_type = DType::kFp32, .src = dout, .dst = dinp}));
  MOBIUS_RETURN_IF_ERROR(NormBackward(c, ln.norm2_weight, ln.norm2_bias, c.at(ws.d_norm),
                                      c.at(ws.mid), c.f32(ws.norm2_mean), c.f32(ws.norm2_rstd),
                                      dinp, n));

  // Attention: d(mid) flows to o_proj and (residual) to x.
  const bool hb = c.half_backward;  // fp16 backward: GEMMs write the 16-bit gradients
  const DType dx_type = hb ? c.half : DType::kFp32;
  MOBIUS_RETURN_IF_ERROR(LinearBackward(be, q, w.o, c.at(ws.att), dinp, DType::kFp32,
                                        hb ? c.at(ws.d_att) : c.at(ws.d_norm_f32), dx_type, false,
                                        n, Q, C));
  if (!hb) MOBIUS_RETURN_IF_ERROR(to_bf16(c.at(ws.d_norm_f32), c.at(ws.d_att), n * Q));
  if (!ln.sinks.empty() && !c.frozen) {  // the sinks' gradient (frozen under LoRA)
    MOBIUS_RETURN_IF_ERROR(be.AttentionSinkBackward(
        q, {.dtype = c.half, .b = c.mb.b, .t = c.mb.t, .heads = H, .head_dim = hd,
            .sinks = c.W(ln.sinks), .out = c.at(ws.att), .dout = c.at(ws.d_att),
            .lse = c.f32(ws.lse), .dsinks = c.G(ln.sinks)}));
  }
  MOBIUS_RETURN_IF_ERROR(zero(ws.dq, n * Q));
  MOBIUS_RETURN_IF_ERROR(zero(ws.dk, n * K));
  MOBIUS_RETURN_IF_ERROR(zero(ws.dv, n * K));
  const bool rope = cfg.position == model::PositionKind::kRope;
  const void* q_proj = c.at(ws.q_proj);
  const void* k_proj = c.at(ws.k_proj);
  const void* q_src = cfg.qk_norm ? c.at(ws.q_normed) : q_proj;  // RoPE inputs
  const void* k_src = cfg.qk_norm ? c.at(ws.k_normed) : k_proj;
  const backend::AttentionShapeParams shape{c.mb.b, c.mb.t, H, KV, hd,
                                            cfg.WindowOf(unit_index() - 1)};
  MOBIUS_RETURN_IF_ERROR(be.AttentionBackward(
      q, {.dtype = c.half, .shape = shape, .dout = c.at(ws.d_att), .q = rope ? c.at(ws.q) : q_src,
          .k = rope ? c.at(ws.k) : k_src, .v = c.at(ws.v), .out = c.at(ws.att),
          .lse = c.f32(ws.lse), .dq = c.at(ws.dq), .dk = c.at(ws.dk), .dv = c.at(ws.dv)}));
  uint64_t dq = ws.dq, dk = ws.dk;  // gradients w.r.t. the current stage's q and k
  if (rope) {
    MOBIUS_RETURN_IF_ERROR(zero(ws.dq_pre, n * Q));
    MOBIUS_RETURN_IF_ERROR(zero(ws.dk_pre, n * K));
    MOBIUS_RETURN_IF_ERROR(be.RopeBackward(q, {.dtype = c.half, .b = c.mb.b, .t = c.mb.t, .nh = H, .head_dim = hd,
                                               .cos = c.f32(ws.cos), .sin = c.f32(ws.sin),
                                               .dout = c.at(dq), .dinp = c.at(ws.dq_pre)}));
    MOBIUS_RETURN_IF_ERROR(be.RopeBackward(q, {.dtype = c.half, .b = c.mb.b, .t = c.mb.t, .nh = KV, .head_dim = hd,
                                               .cos = c.f32(ws.cos), .sin = c.f32(ws.sin),
                                               .dout = c.at(dk), .dinp = c.at(ws.dk_pre)}));
    dq = ws.dq_pre, dk = ws.dk_pre;
  }
  if (cfg.qk_norm) {
    MOBIUS_RETURN_IF_ERROR(zero(ws.dq_proj, n * Q));
    MOBIUS_RETURN_IF_ERROR(zero(ws.dk_proj, n * K));
    MOBIUS_RETURN_IF_ERROR(be.NormBackward(
        q, {.dtype = c.half, .op = backend::NormOp::kRmsNorm, .n = n * H, .c = hd, .dout = c.at(dq), .inp = q_proj,
            .weight = c.W(ln.q_norm), .rstd = c.f32(ws.qn_rstd), .dinp_type = c.half,
            .dinp = c.at(ws.dq_proj), .dweight = c.NormG(ln.q_norm, 0)}));
    MOBIUS_RETURN_IF_ERROR(be.NormBackward(
        q, {.dtype = c.half, .op = backend::NormOp::kRmsNorm, .n = n * KV, .c = hd, .dout = c.at(dk), .inp = k_proj,
            .weight = c.W(ln.k_norm), .rstd = c.f32(ws.kn_rstd), .dinp_type = c.half,
            .dinp = c.at(ws.dk_proj), .dweight = c.NormG(ln.k_norm, 0)}));
    dq = ws.dq_proj, dk = ws.dk_proj;
  }
  void* d_norm1 = hb ? c.at(ws.d_norm) : c.at(ws.d_norm_f32);
  MOBIUS_RETURN_IF_ERROR(LinearBackward(be, q, w.q, c.at(ws.norm1), c.at(dq), c.half, d_norm1, dx_type, false, n, C, Q));
  MOBIUS_RETURN_IF_ERROR(LinearBackward(be, q, w.k, c.at(ws.norm1), c.at(dk), c.half, d_norm1, dx_type, true, n, C, K));
  MOBIUS_RETURN_IF_ERROR(LinearBackward(be, q, w.v, c.at(ws.norm1), c.at(ws.dv), c.half, d_norm1, dx_type, true, n, C, K));
  if (!hb) MOBIUS_RETURN_IF_ERROR(to_bf16(d_norm1, c.at(ws.d_norm), n * C));
  return NormBackward(c, ln.norm1_weight, ln.norm1_bias, c.at(ws.d_norm), c.mb.input,
                      c.f32(ws.norm1_mean), c.f32(ws.norm1_rstd), dinp, n);
}

static BlockWeights MakeBlockWeights(const UnitRunner::Ctx& c, const reference::LayerNames& ln,
                                     const model::ModelConfig& cfg, bool in_out) {
  const int64_t C = cfg.hidden_size, I = cfg.intermediate_size;
  const int64_t Q = cfg.num_heads * cfg.head_dim, K = cfg.num_kv_heads * cfg.head_dim;
  void* dy_half = c.half_backward ? c.at(c.ws.dy_half) : nullptr;
  void* dw_half = c.half_backward ? c.at(c.ws.dw_half) : nullptr;
  // One projection `name` of `out` columns reading `in` features.
  // With frozen base weights (LoRA) G is null: no weight or bias gradient; Lora() attaches the
  // module's adapter, if it has one.
  auto linear = [&](const std::string& weight, const std::string& bias, int64_t in, int64_t out) {
    return c.Base(LinearWeight{.in_out = in_out, .dtype = c.half,
                               .half_accumulate = c.half_accumulate,
                               .half_backward = c.half_backward, .dy_half = dy_half,
                               .dw_half = dw_half, .w = c.W(weight), .ld = in_out ? out : in,
                               .bias = c.W(bias), .dw = c.G(weight), .dbias = c.G(bias),
                               .lora = c.Lora(weight, 0, true, true)},
                  weight);
  };
  BlockWeights w;
  if (!ln.qkv_weight.empty()) {  // GPT-2 c_attn [C, Q + 2K]: column slices, row stride Q + 2K
    const int64_t ld = Q + 2 * K;
    // One adapter over the fused weight: each slice its rows of B, h computed by q, dx by v.
    auto slice = [&](int64_t col, bool first, bool last) {
      return LinearWeight{.in_out = true, .dtype = c.half, .half_accumulate = c.half_accumulate,
                          .half_backward = c.half_backward, .dy_half = dy_half,
                          .dw_half = dw_half, .w = c.W(ln.qkv_weight, col), .ld = ld,
                          .bias = c.W(ln.qkv_bias, col), .dw = c.G(ln.qkv_weight, col),
                          .dbias = c.G(ln.qkv_bias, col),
                          .lora = c.Lora(ln.qkv_weight, col, first, last)};
    };
    w.q = slice(0, true, false), w.k = slice(Q, false, false), w.v = slice(Q + K, false, true);
  } else {
    w.q = linear(ln.q_weight, ln.q_bias, C, Q);
    w.k = linear(ln.k_weight, ln.k_bias, C, K);
    w.v = linear(ln.v_weight, ln.v_bias, C, K);
  }
  w.o = linear(ln.o_weight, ln.o_bias, Q, C);
  if (cfg.mlp == model::MlpKind::kGeluTanh) {
    w.fc = linear(ln.fc_weight, ln.fc_bias, C, I);
    w.proj = linear(ln.proj_weight, ln.proj_bias, I, C);
  } else {
    w.gate = linear(ln.gate_weight, ln.gate_bias, C, I);
    w.up = linear(ln.up_weight, ln.up_bias, C, I);
    w.down = linear(ln.down_weight, ln.down_bias, I, C);
  }
  return w;
}

}  // namespace mobius::units
