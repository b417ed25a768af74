// Mixture-of-experts routing of the reference model (transformers' Qwen3MoeSparseMoeBlock and
// MixtralSparseMoeBlock, and load_balancing_loss_func):
//   probs   = softmax(router logits)                       per token, over the E experts
//   ids     = the k experts of highest probability          (descending; ties: lower index first)
//   weights = probs at ids, divided by their sum when renormalize (norm_topk_prob; Mixtral always)
//   mlp(x)  = sum_j weights[j] * expert_{ids[j]}(x)        each expert a SwiGLU MLP
// and the load-balancing loss over the R rows of every MoE layer of a batch, concatenated:
//   aux = E * sum_e f_e * P_e,  f_e = (1/R) #{(row, j): ids[row, j] = e},  P_e = (1/R) sum_row probs[row, e]
// whose gradient is d aux / d probs[row, e] = E * f_e / R (f is piecewise constant). Backward
// functions accumulate (+=) where they say so.
#ifndef MOBIUS_WORKER_REFERENCE_OPS_MOE_H_
#define MOBIUS_WORKER_REFERENCE_OPS_MOE_H_

#include <cstdint>
#include <vector>

namespace mobius::reference {

// logits, probs [N, E]; ids [N, K] in [0, E); weights [N, K]. REQUIRES: 0 < K <= E.
void RouteForward(float* probs, int32_t* ids, float* weights, const float* logits, int64_t n,
                  int64_t e, int64_t k, bool renormalize);

// dlogits [N, E] += d/d logits of (sum dweights . weights + sum_rows aux_grad . probs), where
// aux_grad [E] (or nullptr) is the same for every row. probs, ids, weights: RouteForward's.
void RouteBackward(float* dlogits, const float* dweights, const float* aux_grad, const float* probs,
                   const int32_t* ids, const float* weights, int64_t n, int64_t e, int64_t k,
                   bool renormalize);

// Accumulates the aux loss's sums: counts[e] += #{(row, j): ids[row, j] = e} and
// prob_sums[e] += sum_row probs[row, e] over N rows (counts, prob_sums [E], double).
void AccumulateRouting(std::vector<double>& counts, std::vector<double>& prob_sums,
                       const float* probs, const int32_t* ids, int64_t n, int64_t e, int64_t k);

// aux = E * sum_e (counts[e] / rows) * (prob_sums[e] / rows); 0 when rows == 0.
double LoadBalancingLoss(const std::vector<double>& counts, const std::vector<double>& prob_sums,
                         int64_t rows);

// aux_grad[e] = scale * E * (counts[e] / rows) / rows: d (scale * aux) / d probs[row, e].
std::vector<float> LoadBalancingGrad(const std::vector<double>& counts, int64_t rows, double scale);

}  // namespace mobius::reference

#endif  // MOBIUS_WORKER_REFERENCE_OPS_MOE_H_
