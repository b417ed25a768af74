// The load-balancing loss of a mixture of experts in training (transformers'
// load_balancing_loss_func times router_aux_loss_coef, which its ForCausalLM adds to the loss when
// config.json sets output_router_logits), from the routing statistics the MoE blocks of one
// microbatch wrote (MicroBatch::moe_stats: 2E floats per block, the blocks in layer order). Over
// the R = blocks x N rows of every block concatenated, with count_e the rows routed to expert e
// (each row to k experts) and prob_sum_e its probabilities summed:
//   aux = E sum_e (count_e / R) (prob_sum_e / R),   d aux / d probs[row, e] = E count_e / R^2
// (the counts are piecewise constant). The training loss of a microbatch is its cross-entropy plus
// coef x aux; a step's loss weighs each microbatch by its share of the counted targets, as it does
// the cross-entropy; eval losses are the cross-entropy alone. Oracle: worker/reference/ops_moe.h
// (the same double sums, in the same order).
//
// Pure functions; thread-safe.
#ifndef MOBIUS_WORKER_MODEL_MOE_AUX_H_
#define MOBIUS_WORKER_MODEL_MOE_AUX_H_

#include <cstdint>
#include <vector>

#include "common/model/model_config.h"

namespace mobius::units {

// Whether training adds the load-balancing loss: a mixture of experts with output_router_logits.
bool MoeAuxEnabled(const model::ModelConfig& config);

struct MoeAux {
  double loss = 0;          // router_aux_loss_coef x aux
  std::vector<float> grad;  // [E]: grad_scale x coef x d aux / d probs[row, e]
};

// From `stats` (MoeConfig::NumMoeLayers x 2E floats) of one microbatch of N = rows_per_block rows.
// grad_scale: what the microbatch's loss gradient is scaled by (its share of the batch, times
// the fp16 loss scale).
MoeAux MoeAuxLoss(const model::ModelConfig& config, const float* stats, int64_t rows_per_block,
                  double grad_scale);

}  // namespace mobius::units

#endif  // MOBIUS_WORKER_MODEL_MOE_AUX_H_
