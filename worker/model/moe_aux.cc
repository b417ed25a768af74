#include "worker/model/moe_aux.h"

#include "worker/reference/ops_moe.h"

namespace mobius::units {

bool MoeAuxEnabled(const model::ModelConfig& config) {
  return config.moe.enabled() && config.moe.output_router_logits;
}

MoeAux MoeAuxLoss(const model::ModelConfig& config, const float* stats, int64_t rows_per_block,
                  double grad_scale) {
  const int64_t E = config.moe.num_experts, blocks = config.moe.NumMoeLayers(config.num_layers);
  std::vector<double> counts(E, 0.0), prob_sums(E, 0.0);
  for (int64_t b = 0; b < blocks; ++b) {
    const float* s = stats + b * 2 * E;
    for (int64_t e = 0; e < E; ++e) {
      counts[e] += s[e];
      prob_sums[e] += s[E + e];
    }
  }
  const int64_t rows = blocks * rows_per_block;
  const double coef = config.moe.router_aux_loss_coef;
  MoeAux out;
  out.loss = coef * reference::LoadBalancingLoss(counts, prob_sums, rows);
  out.grad = reference::LoadBalancingGrad(counts, rows, grad_scale * coef);
  return out;
}

}  // namespace mobius::units
