// UnitRunner: a decoder block's mixture-of-experts MLP (reference: worker/reference/model_moe.cc).
// norm2's output -> router logits (fp32) -> MoeRoute (probabilities, top k, weights, the routed
// rows sorted by expert) -> MoeGather (inputs in expert order) -> per expert with rows: gate, up,
// SwiGLU, down on its contiguous rows -> MoeCombine (the weighted sum) -> mlp_out. The backward
// walks it in reverse; an expert's backward GEMMs write fp32 input gradients (the fp16 backward's
// 16-bit outputs are a dense-MLP optimisation not applied here). LoRA: an expert's adapters see its
// routed rows (their h at those rows of their target's shared slots, model::LoraStateSlots); the
// router has none. The load-balancing loss (MicroBatch::moe_stats, moe_aux_grad): the forward
// sums the probabilities' columns and hands the host the experts' row counts with the offsets it
// reads anyway; the backward adds the loss's gradient to the router's. The routing of a recompute
// is the forward's bit for bit: every op is deterministic on its backend.
// gpt-oss (MoeConfig::ExpertMlp::kClampedSwiGlu): the router has a bias (added to its fp32
// logits), and an expert is gate_up ([in, out] + bias) -> ClampedSwiGlu -> down (+ bias).
// Routed experts (MicroBatch::experts, forward only): after the routing the source makes the
// experts with rows resident and their addresses replace the weight buffer's (FetchExperts).
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "worker/model/linear.h"
#include "worker/model/unit_runner_internal.h"

namespace mobius::units {

using backend::DType;

namespace {

int32_t* I32(const UnitRunner::Ctx& c, uint64_t offset) {
  return static_cast<int32_t*>(c.at(offset));
}

// A bias-free projection `weight` of `out` features from `in` over the rows from `row0` of its
// call (an expert's: its first routed row), with its adapter if it has one (the router never).
// `w`, `b`: the weight's and the bias's addresses when they are not in the unit's buffer (an
// ExpertSource's expert). `bias`: the bias's name (empty: none).
LinearWeight Projection(const UnitRunner::Ctx& c, const std::string& weight, int64_t in,
                        int64_t out, bool in_out, int64_t row0 = 0, const void* w = nullptr,
                        const std::string& bias = "", const void* b = nullptr) {
  return c.Base(LinearWeight{.in_out = in_out,
                             .dtype = c.half,
                             .half_accumulate = c.half_accumulate,
                             .w = w != nullptr ? w : c.W(weight),
                             .ld = in_out ? out : in,
                             .bias = b != nullptr ? b : c.W(bias),
                             .dw = c.G(weight),
                             .dbias = c.G(bias),
                             .lora = LoraRows(c.Lora(weight, 0, true, true), row0)},
                weight);
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> UnitRunner::ExpertOffsets(const Ctx& c,
                                                               float* prob_sums) const {
  const int64_t E = config_.moe.num_experts;
  std::vector<int32_t> offsets(E + 1);
  MOBIUS_RETURN_IF_ERROR(backend_->CopyToHost(*c.queue, *c.workspace, c.ws.moe_offsets,
                                              offsets.data(), 4 * offsets.size()));
  if (prob_sums != nullptr) {
    MOBIUS_RETURN_IF_ERROR(backend_->CopyToHost(*c.queue, *c.workspace, c.ws.moe_prob_sums,
                                                prob_sums, 4 * static_cast<uint64_t>(E)));
  }
  MOBIUS_RETURN_IF_ERROR(backend_->Synchronize(*c.queue));
  return offsets;
}

absl::StatusOr<std::vector<const void*>> UnitRunner::FetchExperts(
    const Ctx& c, const std::vector<int32_t>& offsets) const {
  if (c.mb.experts == nullptr) return std::vector<const void*>{};
  const int64_t E = config_.moe.num_experts;
  std::vector<int32_t> used;
  for (int32_t e = 0; e < E; ++e) {
    if (offsets[e + 1] > offsets[e]) used.push_back(e);
  }
  MOBIUS_ASSIGN_OR_RETURN(std::vector<const void*> got,
                          c.mb.experts->Fetch(*c.queue, unit_index(), used));
  if (got.size() != used.size()) {
    return absl::InternalError(absl::StrCat("unit ", unit_index(), ": the expert source gave ",
                                            got.size(), " addresses for ", used.size(),
                                            " experts"));
  }
  std::vector<const void*> by_expert(E, nullptr);
  for (size_t i = 0; i < used.size(); ++i) by_expert[used[i]] = got[i];
  return by_expert;
}

absl::Status UnitRunner::MoeForward(const Ctx& c, const reference::LayerNames& ln,
                                    bool combine) const {
  const model::MoeConfig& m = config_.moe;
  const int64_t n = c.n, C = config_.hidden_size, E = m.num_experts, K = m.experts_per_token;
  const int64_t Ie = m.expert_intermediate_size;
  const bool in_out = names_.layout == reference::WeightLayout::kInOut;
  const bool clamped = m.expert_mlp == model::MoeConfig::ExpertMlp::kClampedSwiGlu;
  const float alpha = static_cast<float>(m.swiglu_alpha), limit = static_cast<float>(m.swiglu_limit);
  backend::Backend& be = *backend_;
  backend::Queue& q = *c.queue;
  const WorkspaceLayout& ws = c.ws;

  MOBIUS_RETURN_IF_ERROR(LinearForward(
      be, q, Projection(c, ln.router_weight, C, E, in_out, 0, nullptr, ln.router_bias),
      c.at(ws.norm2), c.at(ws.moe_logits), DType::kFp32, n, C, E));
  MOBIUS_RETURN_IF_ERROR(be.MoeRoute(
      q, {.n = n, .experts = E, .k = K, .renormalize = m.norm_topk_prob,
          .logits = c.f32(ws.moe_logits), .probs = c.f32(ws.moe_probs), .ids = I32(c, ws.moe_ids),
          .weights = c.f32(ws.moe_weights), .order = I32(c, ws.moe_order),
          .pos = I32(c, ws.moe_pos), .offsets = I32(c, ws.moe_offsets)}));
  MOBIUS_RETURN_IF_ERROR(be.MoeGather(q, {.dtype = c.half, .n = n, .k = K, .c = C,
                                          .order = I32(c, ws.moe_order), .src = c.at(ws.norm2),
                                          .dst = c.at(ws.moe_x)}));
  // The load-balancing loss's statistics: each expert's routed rows, its probabilities' sum.
  float* stats = c.mb.moe_stats;
  if (stats != nullptr) {
    MOBIUS_RETURN_IF_ERROR(
        be.Zero(q, {.dst = c.at(ws.moe_prob_sums), .bytes = 4 * static_cast<uint64_t>(E)}));
    MOBIUS_RETURN_IF_ERROR(be.BiasBackward(q, {.n = n,
                                               .c = E,
                                               .dout_type = DType::kFp32,
                                               .dout = c.at(ws.moe_probs),
                                               .dbias = c.f32(ws.moe_prob_sums)}));
  }
  MOBIUS_ASSIGN_OR_RETURN(const std::vector<int32_t> offsets,
                          ExpertOffsets(c, stats == nullptr ? nullptr : stats + E));
  if (stats != nullptr) {
    for (int64_t e = 0; e < E; ++e) stats[e] = static_cast<float>(offsets[e + 1] - offsets[e]);
  }
  MOBIUS_ASSIGN_OR_RETURN(const std::vector<const void*> fetched, FetchExperts(c, offsets));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t row0 = offsets[e], rows = offsets[e + 1] - offsets[e];
    if (rows == 0) continue;
    const reference::LayerNames::Expert& ex = ln.experts[e];
    // With an ExpertSource, the expert's tensors at their offsets from its address.
    auto w = [&](const std::string& name) -> const void* {
      if (fetched.empty()) return nullptr;
      const int64_t rel = layout_.Find(name)->offset - (experts_.begin + e * experts_.stride);
      return static_cast<const uint16_t*>(fetched[e]) + rel;
    };
    void* act = c.bf(ws.moe_act) + row0 * Ie;
    const void* x = c.bf(ws.moe_x) + row0 * C;
    if (clamped) {  // gpt-oss: gate_up [C, 2 Ie] + bias, clamped SwiGLU, down [Ie, C] + bias
      void* gate_up = c.bf(ws.moe_gate) + row0 * 2 * Ie;
      MOBIUS_RETURN_IF_ERROR(LinearForward(
          be, q,
          Projection(c, ex.gate_up_weight, C, 2 * Ie, true, row0, w(ex.gate_up_weight),
                     ex.gate_up_bias, w(ex.gate_up_bias)),
          x, gate_up, c.half, rows, C, 2 * Ie));
      MOBIUS_RETURN_IF_ERROR(be.ClampedSwiGluForward(
          q, {.dtype = c.half, .n = rows, .width = Ie, .alpha = alpha, .limit = limit,
              .gate_up = gate_up, .out = act}));
      MOBIUS_RETURN_IF_ERROR(LinearForward(
          be, q,
          Projection(c, ex.down_weight, Ie, C, true, row0, w(ex.down_weight), ex.down_bias,
                     w(ex.down_bias)),
          act, c.bf(ws.moe_y) + row0 * C, c.half, rows, Ie, C));
      continue;
    }
    void* gate = c.bf(ws.moe_gate) + row0 * Ie;
    void* up = c.bf(ws.moe_up) + row0 * Ie;
    MOBIUS_RETURN_IF_ERROR(LinearForward(
        be, q, Projection(c, ex.gate_weight, C, Ie, in_out, row0, w(ex.gate_weight)), x, gate,
        c.half, rows, C, Ie));
    MOBIUS_RETURN_IF_ERROR(LinearForward(
        be, q, Projection(c, ex.up_weight, C, Ie, in_out, row0, w(ex.up_weight)), x, up, c.half,
        rows, C, Ie));
    MOBIUS_RETURN_IF_ERROR(
        be.SwiGluForward(q, {.dtype = c.half, .n = rows * Ie, .gate = gate, .up = up, .out = act}));
    MOBIUS_RETURN_IF_ERROR(LinearForward(
        be, q, Projection(c, ex.down_weight, Ie, C, in_out, row0, w(ex.down_weight)), act,
        c.bf(ws.moe_y) + row0 * C, c.half, rows, Ie, C));
  }
  if (!combine) return absl::OkStatus();
  return be.MoeCombine(q, {.dtype = c.half, .n = n, .k = K, .c = C, .pos = I32(c, ws.moe_pos),
                           .weights = c.f32(ws.moe_weights), .y = c.at(ws.moe_y),
                           .out = c.at(ws.mlp_out)});
}

absl::Status UnitRunner::MoeBackward(const Ctx& c, const reference::LayerNames& ln,
                                     const float* dout) const {
  const model::MoeConfig& m = config_.moe;
  const int64_t n = c.n, C = config_.hidden_size, E = m.num_experts, K = m.experts_per_token;
  const int64_t Ie = m.expert_intermediate_size;
  const bool in_out = names_.layout == reference::WeightLayout::kInOut;
  const bool clamped = m.expert_mlp == model::MoeConfig::ExpertMlp::kClampedSwiGlu;
  const float alpha = static_cast<float>(m.swiglu_alpha), limit = static_cast<float>(m.swiglu_limit);
  backend::Backend& be = *backend_;
  backend::Queue& q = *c.queue;
  const WorkspaceLayout& ws = c.ws;

  MOBIUS_ASSIGN_OR_RETURN(const std::vector<int32_t> offsets, ExpertOffsets(c));
  MOBIUS_RETURN_IF_ERROR(be.MoeCombineBackward(
      q, {.dtype = c.half, .n = n, .k = K, .c = C, .pos = I32(c, ws.moe_pos),
          .weights = c.f32(ws.moe_weights), .dout = dout, .y = c.at(ws.moe_y),
          .dy = c.f32(ws.moe_dy), .dweights = c.f32(ws.moe_dweights)}));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t row0 = offsets[e], rows = offsets[e + 1] - offsets[e];
    if (rows == 0) continue;
    const reference::LayerNames::Expert& ex = ln.experts[e];
    // dy's rows of this expert: its output gradient, then (once read) its input gradient.
    float* dy = c.f32(ws.moe_dy) + row0 * C;
    const void* x = c.bf(ws.moe_x) + row0 * C;
    if (clamped) {  // gpt-oss (MoeForward)
      MOBIUS_RETURN_IF_ERROR(LinearBackward(
          be, q, Projection(c, ex.down_weight, Ie, C, true, row0, nullptr, ex.down_bias),
          c.bf(ws.moe_act) + row0 * Ie, dy, DType::kFp32, c.at(ws.moe_d_act_f32), DType::kFp32,
          false, rows, Ie, C));
      MOBIUS_RETURN_IF_ERROR(be.Cast(q, {.n = rows * Ie, .src_type = DType::kFp32,
                                         .dst_type = c.half, .src = c.at(ws.moe_d_act_f32),
                                         .dst = c.at(ws.moe_d_act)}));
      MOBIUS_RETURN_IF_ERROR(be.ClampedSwiGluBackward(
          q, {.dtype = c.half, .n = rows, .width = Ie, .alpha = alpha, .limit = limit,
              .dout = c.at(ws.moe_d_act), .gate_up = c.bf(ws.moe_gate) + row0 * 2 * Ie,
              .dgate_up = c.at(ws.moe_d_gate)}));
      MOBIUS_RETURN_IF_ERROR(LinearBackward(
          be, q, Projection(c, ex.gate_up_weight, C, 2 * Ie, true, row0, nullptr, ex.gate_up_bias),
          x, c.at(ws.moe_d_gate), c.half, dy, DType::kFp32, false, rows, C, 2 * Ie));
      continue;
    }
    MOBIUS_RETURN_IF_ERROR(LinearBackward(
        be, q, Projection(c, ex.down_weight, Ie, C, in_out, row0), c.bf(ws.moe_act) + row0 * Ie, dy,
        DType::kFp32, c.at(ws.moe_d_act_f32), DType::kFp32, false, rows, Ie, C));
    MOBIUS_RETURN_IF_ERROR(be.Cast(q, {.n = rows * Ie, .src_type = DType::kFp32,
                                       .dst_type = c.half, .src = c.at(ws.moe_d_act_f32),
                                       .dst = c.at(ws.moe_d_act)}));
    const uint64_t bytes = 2 * static_cast<uint64_t>(rows * Ie);
    MOBIUS_RETURN_IF_ERROR(be.Zero(q, {.dst = c.at(ws.moe_d_gate), .bytes = bytes}));
    MOBIUS_RETURN_IF_ERROR(be.Zero(q, {.dst = c.at(ws.moe_d_up), .bytes = bytes}));
    MOBIUS_RETURN_IF_ERROR(be.SwiGluBackward(
        q, {.dtype = c.half, .n = rows * Ie, .dout = c.at(ws.moe_d_act),
            .gate = c.bf(ws.moe_gate) + row0 * Ie, .up = c.bf(ws.moe_up) + row0 * Ie,
            .dgate = c.at(ws.moe_d_gate), .dup = c.at(ws.moe_d_up)}));
    MOBIUS_RETURN_IF_ERROR(LinearBackward(be, q, Projection(c, ex.gate_weight, C, Ie, in_out, row0),
                                          x, c.at(ws.moe_d_gate), c.half, dy, DType::kFp32, false,
                                          rows, C, Ie));
    MOBIUS_RETURN_IF_ERROR(LinearBackward(be, q, Projection(c, ex.up_weight, C, Ie, in_out, row0),
                                          x, c.at(ws.moe_d_up), c.half, dy, DType::kFp32, true,
                                          rows, C, Ie));
  }
  float* dnorm = c.f32(ws.moe_dnorm);
  MOBIUS_RETURN_IF_ERROR(be.Zero(q, {.dst = dnorm, .bytes = 4 * static_cast<uint64_t>(n * C)}));
  MOBIUS_RETURN_IF_ERROR(be.MoeScatterAdd(q, {.n = n, .k = K, .c = C, .pos = I32(c, ws.moe_pos),
                                              .src = c.f32(ws.moe_dy), .dst = dnorm}));
  const float* aux_grad = nullptr;  // the load-balancing loss's, the same for every row
  if (c.mb.moe_aux_grad != nullptr) {
    MOBIUS_RETURN_IF_ERROR(be.CopyToDevice(q, c.mb.moe_aux_grad, *c.workspace, ws.moe_aux_grad,
                                           4 * static_cast<uint64_t>(E)));
    aux_grad = c.f32(ws.moe_aux_grad);
  }
  MOBIUS_RETURN_IF_ERROR(be.MoeRouteBackward(q, {.n = n,
                                                 .experts = E,
                                                 .k = K,
                                                 .renormalize = m.norm_topk_prob,
                                                 .dweights = c.f32(ws.moe_dweights),
                                                 .probs = c.f32(ws.moe_probs),
                                                 .ids = I32(c, ws.moe_ids),
                                                 .weights = c.f32(ws.moe_weights),
                                                 .aux_grad = aux_grad,
                                                 .dlogits = c.f32(ws.moe_logits)}));
  MOBIUS_RETURN_IF_ERROR(LinearBackward(
      be, q, Projection(c, ln.router_weight, C, E, in_out, 0, nullptr, ln.router_bias),
      c.at(ws.norm2), c.f32(ws.moe_logits), DType::kFp32, dnorm, DType::kFp32, true, n, C, E));
  return be.Cast(q, {.n = n * C, .src_type = DType::kFp32, .dst_type = c.half, .src = dnorm,
                     .dst = c.at(ws.d_norm)});
}

}  // namespace mobius::units
