// Everything the reference forward pass saves for its backward pass, sized for one [B, T] batch.
// N = B * T rows; C hidden; H/KV heads; hd head_dim; Q = H * hd; K = KV * hd; I intermediate;
// V vocab. Buffers a configuration does not use stay empty.
#ifndef MOBIUS_WORKER_REFERENCE_ACTIVATIONS_H_
#define MOBIUS_WORKER_REFERENCE_ACTIVATIONS_H_

#include <cstdint>
#include <vector>

#include "common/model/model_config.h"

namespace mobius::reference {

struct LayerActivations {
  std::vector<float> norm1;                     // [N, C]  norm1(residual in)
  std::vector<float> norm1_mean;                // [N]     LayerNorm only
  std::vector<float> norm1_rstd;                // [N]
  std::vector<float> q_proj, k_proj;            // [N, Q], [N, K] projections (+ bias)
  std::vector<float> q_normed, k_normed;        // [N, Q], [N, K] after qk_norm (qk_norm only)
  std::vector<float> q_norm_rstd, k_norm_rstd;  // [N * H], [N * KV] (qk_norm only)
  std::vector<float> q, k, v;                 // [N, Q], [N, K], [N, K] attention inputs (post-RoPE)
  std::vector<float> att;                     // [B, H, T, T] softmax probabilities
  std::vector<float> att_out;                 // [N, Q]  heads concatenated, before o_proj
  std::vector<float> residual_mid;            // [N, C]  residual after the attention block
  std::vector<float> norm2;                   // [N, C]
  std::vector<float> norm2_mean, norm2_rstd;  // [N]
  std::vector<float> mlp_in;                  // [N, I]  c_fc output (GELU) or gate_proj (SwiGLU)
  std::vector<float> mlp_up;                  // [N, I]  up_proj (SwiGLU only)
  std::vector<float> mlp_act;                 // [N, I]  gelu(c_fc) or silu(gate) * up
  // A mixture-of-experts layer (ModelConfig::moe) instead of the three above; E experts, K per
  // token, Ie = expert_intermediate_size; rows N * K are (token, slot) pairs (ops_moe.h).
  std::vector<float> router_probs;                      // [N, E]  softmax of the router logits
  std::vector<int32_t> expert_ids;                      // [N, K]
  std::vector<float> route_weights;                     // [N, K]
  // [N * K, Ie]; clamped SwiGLU experts (gpt-oss): expert_gate holds gate_up [N * K, 2 Ie].
  std::vector<float> expert_gate, expert_up, expert_act;
  std::vector<float> expert_out;                        // [N * K, C]  before the route weight
};

struct Activations {
  int64_t b = 0, t = 0;
  std::vector<int32_t> tokens;   // [B, T]
  std::vector<int32_t> targets;  // [B, T], empty when the forward had none
  // residual[l] is the input of block l ([N, C]); residual[L] the output of the last block.
  std::vector<std::vector<float>> residual;
  std::vector<LayerActivations> layers;
  std::vector<float> final_norm;                        // [N, C]
  std::vector<float> final_norm_mean, final_norm_rstd;  // [N]
  std::vector<float> rope_cos, rope_sin;                // [T, hd / 2] (RoPE only)
  std::vector<float> logits;                            // [N, V]
  std::vector<float> probs;                             // [N, V] softmax(logits)
  std::vector<float> losses;                            // [N] per position, 0 where ignored
  // The load-balancing loss's sums over every MoE layer (ops_moe.h): [E] each, and its rows.
  std::vector<double> expert_counts, expert_prob_sums;
  int64_t routed_rows = 0;
  float aux_loss = 0.0f;  // E * sum f P, before router_aux_loss_coef (0 without MoE layers)

  // Sizes every buffer for `config` and a [b, t] batch.
  void Resize(const model::ModelConfig& config, int64_t b, int64_t t);
};

}  // namespace mobius::reference

#endif  // MOBIUS_WORKER_REFERENCE_ACTIVATIONS_H_
