// ReferenceModel: the mixture-of-experts MLP (ops_moe.h), token by token: each (token, slot) row
// runs its expert's SwiGLU on the token's norm2 output; the outputs are summed with the route
// weights in expert order (as transformers' index_add_ over the experts hit), in double.
#include <algorithm>
#include <numeric>
#include <vector>

#include "worker/reference/model.h"
#include "worker/reference/ops_activation.h"
#include "worker/reference/ops_linear.h"
#include "worker/reference/ops_moe.h"

namespace mobius::reference {
namespace {

// The slots of one token's row in increasing expert id: the summation order.
std::vector<int64_t> SlotsByExpert(const int32_t* ids, int64_t k) {
  std::vector<int64_t> slots(k);
  std::iota(slots.begin(), slots.end(), 0);
  std::sort(slots.begin(), slots.end(), [ids](int64_t a, int64_t b) { return ids[a] < ids[b]; });
  return slots;
}

}  // namespace

void ReferenceModel::MoeForward(int64_t layer, float* out) {
  const LayerNames& names = names_.layers[layer];
  LayerActivations& a = acts_.layers[layer];
  const model::MoeConfig& moe = config_.moe;
  const int64_t n = acts_.b * acts_.t, C = config_.hidden_size;
  const int64_t E = moe.num_experts, K = moe.experts_per_token, Ie = moe.expert_intermediate_size;
  const bool clamped = moe.expert_mlp == model::MoeConfig::ExpertMlp::kClampedSwiGlu;
  const float alpha = static_cast<float>(moe.swiglu_alpha), limit = static_cast<float>(moe.swiglu_limit);

  std::vector<float> logits(n * E);
  LinearForward(logits.data(), a.norm2.data(), params_.data(names.router_weight),
                params_.optional_data(names.router_bias), n, C, E, names_.layout);
  RouteForward(a.router_probs.data(), a.expert_ids.data(), a.route_weights.data(), logits.data(),
               n, E, K, moe.norm_topk_prob);
  AccumulateRouting(acts_.expert_counts, acts_.expert_prob_sums, a.router_probs.data(),
                    a.expert_ids.data(), n, E, K);
  acts_.routed_rows += n;

  std::vector<double> sum(C);
  for (int64_t row = 0; row < n; ++row) {
    const float* x = a.norm2.data() + row * C;
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t j : SlotsByExpert(a.expert_ids.data() + row * K, K)) {
      const int64_t r = row * K + j;
      const LayerNames::Expert& ex = names.experts[a.expert_ids[r]];
      float* act = a.expert_act.data() + r * Ie;
      float* y = a.expert_out.data() + r * C;
      if (clamped) {  // gpt-oss: gate_up [in, out] + bias, clamped SwiGLU, down [in, out] + bias
        float* gate_up = a.expert_gate.data() + r * 2 * Ie;
        LinearForward(gate_up, x, params_.data(ex.gate_up_weight), params_.data(ex.gate_up_bias),
                      1, C, 2 * Ie, WeightLayout::kInOut);
        ClampedSwiGluForward(act, gate_up, 1, Ie, alpha, limit);
        LinearForward(y, act, params_.data(ex.down_weight), params_.data(ex.down_bias), 1, Ie, C,
                      WeightLayout::kInOut);
      } else {
        float* gate = a.expert_gate.data() + r * Ie;
        float* up = a.expert_up.data() + r * Ie;
        LinearForward(gate, x, params_.data(ex.gate_weight), nullptr, 1, C, Ie, names_.layout);
        LinearForward(up, x, params_.data(ex.up_weight), nullptr, 1, C, Ie, names_.layout);
        SwiGluForward(act, gate, up, Ie);
        LinearForward(y, act, params_.data(ex.down_weight), nullptr, 1, Ie, C, names_.layout);
      }
      const double w = a.route_weights[r];
      for (int64_t i = 0; i < C; ++i) sum[i] += w * y[i];
    }
    for (int64_t i = 0; i < C; ++i) out[row * C + i] = static_cast<float>(sum[i]);
  }
}

void ReferenceModel::MoeBackward(int64_t layer, const float* dout, float* dnorm2,
                                 const std::vector<float>& aux_grad) {
  const LayerNames& names = names_.layers[layer];
  const LayerActivations& a = acts_.layers[layer];
  const model::MoeConfig& moe = config_.moe;
  const int64_t n = acts_.b * acts_.t, C = config_.hidden_size;
  const int64_t E = moe.num_experts, K = moe.experts_per_token, Ie = moe.expert_intermediate_size;

  const bool clamped = moe.expert_mlp == model::MoeConfig::ExpertMlp::kClampedSwiGlu;
  const float alpha = static_cast<float>(moe.swiglu_alpha), limit = static_cast<float>(moe.swiglu_limit);
  std::vector<float> dweights(n * K), dy(C), dact(Ie), dgate(Ie), dup(Ie), dgate_up(2 * Ie);
  for (int64_t row = 0; row < n; ++row) {
    const float* x = a.norm2.data() + row * C;
    const float* g = dout + row * C;
    for (int64_t j = 0; j < K; ++j) {
      const int64_t r = row * K + j;
      const LayerNames::Expert& ex = names.experts[a.expert_ids[r]];
      const float* y = a.expert_out.data() + r * C;
      double dw = 0.0;
      for (int64_t i = 0; i < C; ++i) dw += static_cast<double>(g[i]) * y[i];
      dweights[r] = static_cast<float>(dw);
      const float w = a.route_weights[r];
      for (int64_t i = 0; i < C; ++i) dy[i] = w * g[i];
      std::fill(dact.begin(), dact.end(), 0.0f);
      if (clamped) {
        LinearBackward(dact.data(), grads_.data(ex.down_weight), grads_.data(ex.down_bias),
                       dy.data(), a.expert_act.data() + r * Ie, params_.data(ex.down_weight), 1,
                       Ie, C, WeightLayout::kInOut);
        ClampedSwiGluBackward(dgate_up.data(), dact.data(), a.expert_gate.data() + r * 2 * Ie, 1,
                              Ie, alpha, limit);
        LinearBackward(dnorm2 + row * C, grads_.data(ex.gate_up_weight),
                       grads_.data(ex.gate_up_bias), dgate_up.data(), x,
                       params_.data(ex.gate_up_weight), 1, C, 2 * Ie, WeightLayout::kInOut);
        continue;
      }
      std::fill(dgate.begin(), dgate.end(), 0.0f);
      std::fill(dup.begin(), dup.end(), 0.0f);
      LinearBackward(dact.data(), grads_.data(ex.down_weight), nullptr, dy.data(),
                     a.expert_act.data() + r * Ie, params_.data(ex.down_weight), 1, Ie, C,
                     names_.layout);
      SwiGluBackward(dgate.data(), dup.data(), dact.data(), a.expert_gate.data() + r * Ie,
                     a.expert_up.data() + r * Ie, Ie);
      LinearBackward(dnorm2 + row * C, grads_.data(ex.gate_weight), nullptr, dgate.data(), x,
                     params_.data(ex.gate_weight), 1, C, Ie, names_.layout);
      LinearBackward(dnorm2 + row * C, grads_.data(ex.up_weight), nullptr, dup.data(), x,
                     params_.data(ex.up_weight), 1, C, Ie, names_.layout);
    }
  }
  std::vector<float> dlogits(n * E, 0.0f);
  RouteBackward(dlogits.data(), dweights.data(), aux_grad.empty() ? nullptr : aux_grad.data(),
                a.router_probs.data(), a.expert_ids.data(), a.route_weights.data(), n, E, K,
                moe.norm_topk_prob);
  LinearBackward(dnorm2, grads_.data(names.router_weight), grads_.optional_data(names.router_bias),
                 dlogits.data(), a.norm2.data(), params_.data(names.router_weight), n, C, E,
                 names_.layout);
}

}  // namespace mobius::reference
