#include "worker/reference/activations.h"

namespace mobius::reference {

void Activations::Resize(const model::ModelConfig& c, int64_t batch, int64_t seq) {
  b = batch;
  t = seq;
  const int64_t n = b * t, C = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  const bool layer_norm = c.norm == model::NormKind::kLayerNorm;
  const bool swiglu = c.mlp == model::MlpKind::kSwiGlu;
  auto size = [](std::vector<float>& v, int64_t count) { v.assign(count, 0.0f); };

  residual.resize(c.num_layers + 1);
  for (auto& r : residual) size(r, n * C);
  layers.resize(c.num_layers);
  const int64_t E = c.moe.num_experts, K = c.moe.experts_per_token;
  const int64_t Ie = c.moe.expert_intermediate_size;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    LayerActivations& a = layers[l];
    const bool moe = c.moe.IsMoeLayer(l);
    size(a.norm1, n * C);
    size(a.norm1_mean, layer_norm ? n : 0);
    size(a.norm1_rstd, n);
    size(a.q_proj, n * q_dim);
    size(a.k_proj, n * kv_dim);
    size(a.q_normed, c.qk_norm ? n * q_dim : 0);
    size(a.k_normed, c.qk_norm ? n * kv_dim : 0);
    size(a.q_norm_rstd, c.qk_norm ? n * c.num_heads : 0);
    size(a.k_norm_rstd, c.qk_norm ? n * c.num_kv_heads : 0);
    size(a.q, n * q_dim);
    size(a.k, n * kv_dim);
    size(a.v, n * kv_dim);
    size(a.att, b * c.num_heads * t * t);
    size(a.att_out, n * q_dim);
    size(a.residual_mid, n * C);
    size(a.norm2, n * C);
    size(a.norm2_mean, layer_norm ? n : 0);
    size(a.norm2_rstd, n);
    size(a.mlp_in, moe ? 0 : n * I);
    size(a.mlp_up, swiglu && !moe ? n * I : 0);
    size(a.mlp_act, moe ? 0 : n * I);
    size(a.router_probs, moe ? n * E : 0);
    a.expert_ids.assign(moe ? n * K : 0, 0);
    size(a.route_weights, moe ? n * K : 0);
    // Clamped SwiGLU experts keep their gate_up [N * K, 2 Ie] in expert_gate (expert_up unused).
    const bool clamped = c.moe.expert_mlp == model::MoeConfig::ExpertMlp::kClampedSwiGlu;
    size(a.expert_gate, moe ? n * K * Ie * (clamped ? 2 : 1) : 0);
    size(a.expert_up, moe ? n * K * Ie : 0);
    size(a.expert_act, moe ? n * K * Ie : 0);
    size(a.expert_out, moe ? n * K * C : 0);
  }
  expert_counts.assign(E, 0.0);
  expert_prob_sums.assign(E, 0.0);
  routed_rows = 0;
  aux_loss = 0.0f;
  size(final_norm, n * C);
  size(final_norm_mean, layer_norm ? n : 0);
  size(final_norm_rstd, n);
  size(logits, n * V);
  size(probs, n * V);
  size(losses, n);
}

}  // namespace mobius::reference
