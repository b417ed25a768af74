// ReferenceModel: construction and the forward pass.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/reference/model.h"
#include "worker/reference/ops_activation.h"
#include "worker/reference/ops_attention.h"
#include "worker/reference/ops_embedding.h"
#include "worker/reference/ops_linear.h"
#include "common/model/model_config_parse.h"
#include "worker/reference/ops_loss.h"
#include "worker/reference/ops_moe.h"
#include "worker/reference/ops_norm.h"
#include "worker/reference/ops_rope.h"

namespace mobius::reference {

absl::StatusOr<ReferenceModel> ReferenceModel::Create(const model::ModelConfig& config,
                                                      Parameters params) {
  MOBIUS_RETURN_IF_ERROR(ValidateConfig(config));
  MOBIUS_RETURN_IF_ERROR(ValidateParameters(config, params));
  return ReferenceModel(config, std::move(params));
}

ReferenceModel::ReferenceModel(const model::ModelConfig& config, Parameters params)
    : config_(config),
      names_(ParameterNames(config)),
      params_(std::move(params)),
      grads_(ZeroParameters(config)) {
  if (config_.position == model::PositionKind::kRope) {
    inv_freq_ = RopeInverseFrequencies(config_.head_dim, config_.rope_theta, config_.rope_scaling);
  }
}

absl::StatusOr<float> ReferenceModel::Forward(const int32_t* tokens, const int32_t* targets,
                                              int64_t b, int64_t t) {
  if (b <= 0 || t <= 0) return absl::InvalidArgumentError("Forward: empty batch");
  if (config_.position == model::PositionKind::kLearned && t > config_.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Forward: T = ", t, " exceeds ", config_.max_position_embeddings, " learned positions"));
  }
  const int64_t n = b * t, V = config_.vocab_size;
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= V) {
      return absl::InvalidArgumentError(
          absl::StrCat("Forward: token ", tokens[i], " at ", i, " outside [0, ", V, ")"));
    }
    if (targets && targets[i] != kIgnoreIndex && (targets[i] < 0 || targets[i] >= V)) {
      return absl::InvalidArgumentError(absl::StrCat("Forward: target ", targets[i], " at ", i,
                                                     " outside [0, ", V, ") and not -100"));
    }
  }
  acts_.Resize(config_, b, t);
  acts_.tokens.assign(tokens, tokens + n);
  have_targets_ = targets != nullptr;
  acts_.targets.assign(targets ? targets : tokens, targets ? targets + n : tokens);
  if (!inv_freq_.empty()) {
    RopeTables(&acts_.rope_cos, &acts_.rope_sin, inv_freq_, t,
               RopeTableScale(config_.rope_scaling));
  }

  EmbedForward();
  for (int64_t l = 0; l < config_.num_layers; ++l) BlockForward(l);
  HeadForward();
  acts_.aux_loss = static_cast<float>(
      LoadBalancingLoss(acts_.expert_counts, acts_.expert_prob_sums, acts_.routed_rows));
  if (!have_targets_) return 0.0f;
  float loss = CrossEntropyForward(acts_.probs.data(), acts_.losses.data(), acts_.logits.data(),
                                   acts_.targets.data(), n, V);
  if (config_.moe.output_router_logits) {
    loss += static_cast<float>(config_.moe.router_aux_loss_coef) * acts_.aux_loss;
  }
  return loss;
}

void ReferenceModel::EmbedForward() {
  EmbeddingForward(
      acts_.residual[0].data(), acts_.tokens.data(), params_.data(names_.token_embedding),
      params_.optional_data(names_.position_embedding), acts_.b, acts_.t, config_.hidden_size);
}

void ReferenceModel::NormForward(float* out, float* mean, float* rstd, const float* inp,
                                 const std::string& weight, const std::string& bias, int64_t n,
                                 int64_t c) {
  const float eps = static_cast<float>(config_.norm_eps);
  if (config_.norm == model::NormKind::kLayerNorm) {
    LayerNormForward(out, mean, rstd, inp, params_.data(weight), params_.optional_data(bias), n, c,
                     eps);
  } else {
    RmsNormForward(out, rstd, inp, params_.data(weight), n, c, eps);
  }
}

void ReferenceModel::BlockForward(int64_t layer) {
  const LayerNames& names = names_.layers[layer];
  LayerActivations& a = acts_.layers[layer];
  const model::ModelConfig& c = config_;
  const int64_t n = acts_.b * acts_.t, C = c.hidden_size, I = c.intermediate_size;
  const int64_t hd = c.head_dim, q_dim = c.num_heads * hd, kv_dim = c.num_kv_heads * hd;
  const WeightLayout layout = names_.layout;
  const float* x = acts_.residual[layer].data();  // [N, C]

  // Attention block: x + o_proj(attention(rope(qk_norm(q, k)), v)) on norm1(x).
  NormForward(a.norm1.data(), a.norm1_mean.data(), a.norm1_rstd.data(), x, names.norm1_weight,
              names.norm1_bias, n, C);
  if (!names.qkv_weight.empty()) {
    // GPT-2's fused c_attn: [N, Q + 2K] = [q | k | v] per row.
    const int64_t qkv_dim = q_dim + 2 * kv_dim;
    std::vector<float> qkv(n * qkv_dim);
    LinearForward(qkv.data(), a.norm1.data(), params_.data(names.qkv_weight),
                  params_.optional_data(names.qkv_bias), n, C, qkv_dim, layout);
    for (int64_t row = 0; row < n; ++row) {
      const float* src = qkv.data() + row * qkv_dim;
      std::copy(src, src + q_dim, a.q_proj.data() + row * q_dim);
      std::copy(src + q_dim, src + q_dim + kv_dim, a.k_proj.data() + row * kv_dim);
      std::copy(src + q_dim + kv_dim, src + qkv_dim, a.v.data() + row * kv_dim);
    }
  } else {
    LinearForward(a.q_proj.data(), a.norm1.data(), params_.data(names.q_weight),
                  params_.optional_data(names.q_bias), n, C, q_dim, layout);
    LinearForward(a.k_proj.data(), a.norm1.data(), params_.data(names.k_weight),
                  params_.optional_data(names.k_bias), n, C, kv_dim, layout);
    LinearForward(a.v.data(), a.norm1.data(), params_.data(names.v_weight),
                  params_.optional_data(names.v_bias), n, C, kv_dim, layout);
  }
  const float* q_src = a.q_proj.data();  // [N, H, hd]
  const float* k_src = a.k_proj.data();  // [N, KV, hd]
  if (c.qk_norm) {                       // Qwen3: RMSNorm over head_dim, per head, before RoPE
    const float eps = static_cast<float>(c.norm_eps);
    RmsNormForward(a.q_normed.data(), a.q_norm_rstd.data(), q_src, params_.data(names.q_norm),
                   n * c.num_heads, hd, eps);
    RmsNormForward(a.k_normed.data(), a.k_norm_rstd.data(), k_src, params_.data(names.k_norm),
                   n * c.num_kv_heads, hd, eps);
    q_src = a.q_normed.data();
    k_src = a.k_normed.data();
  }
  if (c.position == model::PositionKind::kRope) {
    RopeForward(a.q.data(), q_src, acts_.rope_cos.data(), acts_.rope_sin.data(), acts_.b, acts_.t,
                c.num_heads, hd);
    RopeForward(a.k.data(), k_src, acts_.rope_cos.data(), acts_.rope_sin.data(), acts_.b, acts_.t,
                c.num_kv_heads, hd);
  } else {
    std::copy(q_src, q_src + n * q_dim, a.q.begin());
    std::copy(k_src, k_src + n * kv_dim, a.k.begin());
  }
  const AttentionShape shape{acts_.b,        acts_.t, c.num_heads, c.num_kv_heads, hd,
                             c.WindowOf(layer), params_.optional_data(names.sinks)};
  AttentionForward(a.att_out.data(), a.att.data(), a.q.data(), a.k.data(), a.v.data(), shape);
  std::vector<float> o(n * C);
  LinearForward(o.data(), a.att_out.data(), params_.data(names.o_weight),
                params_.optional_data(names.o_bias), n, q_dim, C, layout);
  for (int64_t i = 0; i < n * C; ++i) a.residual_mid[i] = x[i] + o[i];

  // MLP block: residual_mid + mlp(norm2(residual_mid)).
  NormForward(a.norm2.data(), a.norm2_mean.data(), a.norm2_rstd.data(), a.residual_mid.data(),
              names.norm2_weight, names.norm2_bias, n, C);
  std::vector<float> m(n * C);
  if (!names.router_weight.empty()) {
    MoeForward(layer, m.data());
  } else if (c.mlp == model::MlpKind::kGeluTanh) {
    LinearForward(a.mlp_in.data(), a.norm2.data(), params_.data(names.fc_weight),
                  params_.optional_data(names.fc_bias), n, C, I, layout);
    GeluForward(a.mlp_act.data(), a.mlp_in.data(), n * I);
    LinearForward(m.data(), a.mlp_act.data(), params_.data(names.proj_weight),
                  params_.optional_data(names.proj_bias), n, I, C, layout);
  } else {
    LinearForward(a.mlp_in.data(), a.norm2.data(), params_.data(names.gate_weight),
                  params_.optional_data(names.gate_bias), n, C, I, layout);
    LinearForward(a.mlp_up.data(), a.norm2.data(), params_.data(names.up_weight),
                  params_.optional_data(names.up_bias), n, C, I, layout);
    SwiGluForward(a.mlp_act.data(), a.mlp_in.data(), a.mlp_up.data(), n * I);
    LinearForward(m.data(), a.mlp_act.data(), params_.data(names.down_weight),
                  params_.optional_data(names.down_bias), n, I, C, layout);
  }
  float* out = acts_.residual[layer + 1].data();
  for (int64_t i = 0; i < n * C; ++i) out[i] = a.residual_mid[i] + m[i];
}

void ReferenceModel::HeadForward() {
  const int64_t n = acts_.b * acts_.t, C = config_.hidden_size;
  NormForward(acts_.final_norm.data(), acts_.final_norm_mean.data(), acts_.final_norm_rstd.data(),
              acts_.residual[config_.num_layers].data(), names_.final_norm_weight,
              names_.final_norm_bias, n, C);
  // logits = final_norm @ head^T; the head is [V, C] in every layout (GPT-2 ties it to wte).
  LinearForward(acts_.logits.data(), acts_.final_norm.data(), params_.data(names_.lm_head), nullptr,
                n, C, config_.vocab_size, WeightLayout::kOutIn);
}

}  // namespace mobius::reference
