// ReferenceModel: the backward pass. Mirrors model_forward.cc in reverse; every parameter
// gradient is accumulated (+=) into grads_, activation gradients live in local buffers.
#include <algorithm>
#include <vector>

#include "worker/reference/model.h"
#include "worker/reference/ops_activation.h"
#include "worker/reference/ops_attention.h"
#include "worker/reference/ops_embedding.h"
#include "worker/reference/ops_linear.h"
#include "worker/reference/ops_loss.h"
#include "worker/reference/ops_moe.h"
#include "worker/reference/ops_norm.h"
#include "worker/reference/ops_rope.h"

namespace mobius::reference {

void ReferenceModel::ZeroGrad() {
  for (auto& [name, tensor] : grads_.tensors)
    std::fill(tensor.data.begin(), tensor.data.end(), 0.0f);
}

void ReferenceModel::NormBackward(float* dinp, const float* dout, const float* inp,
                                  const float* mean, const float* rstd, const std::string& weight,
                                  const std::string& bias, int64_t n, int64_t c) {
  if (config_.norm == model::NormKind::kLayerNorm) {
    LayerNormBackward(dinp, grads_.data(weight), grads_.optional_data(bias), dout, inp,
                      params_.data(weight), mean, rstd, n, c);
  } else {
    RmsNormBackward(dinp, grads_.data(weight), dout, inp, params_.data(weight), rstd, n, c);
  }
}

absl::Status ReferenceModel::Backward(float loss_scale) {
  if (!have_targets_) {
    return absl::FailedPreconditionError("Backward: the last Forward had no targets");
  }
  const int64_t n = acts_.b * acts_.t, C = config_.hidden_size, V = config_.vocab_size;

  // Loss and LM head: logits = final_norm @ head^T.
  std::vector<float> dlogits(n * V, 0.0f);  // [N, V]
  CrossEntropyBackward(dlogits.data(), acts_.probs.data(), acts_.targets.data(), n, V, loss_scale);
  std::vector<float> dfinal(n * C, 0.0f);  // [N, C]
  LinearBackward(dfinal.data(), grads_.data(names_.lm_head), nullptr, dlogits.data(),
                 acts_.final_norm.data(), params_.data(names_.lm_head), n, C, V,
                 WeightLayout::kOutIn);

  // dresidual: gradient of the residual stream, walked from the top block down.
  std::vector<float> dresidual(n * C, 0.0f);  // [N, C]
  NormBackward(dresidual.data(), dfinal.data(), acts_.residual[config_.num_layers].data(),
               acts_.final_norm_mean.data(), acts_.final_norm_rstd.data(), names_.final_norm_weight,
               names_.final_norm_bias, n, C);
  if (config_.moe.output_router_logits) {
    aux_grad_ = LoadBalancingGrad(acts_.expert_counts, acts_.routed_rows,
                                  loss_scale * config_.moe.router_aux_loss_coef);
  } else {
    aux_grad_.clear();
  }
  for (int64_t l = config_.num_layers - 1; l >= 0; --l) BlockBackward(l, dresidual);

  EmbeddingBackward(grads_.data(names_.token_embedding),
                    grads_.optional_data(names_.position_embedding), dresidual.data(),
                    acts_.tokens.data(), acts_.b, acts_.t, C);
  return absl::OkStatus();
}

// On entry dresidual is d loss / d residual[layer + 1]; on exit d loss / d residual[layer].
void ReferenceModel::BlockBackward(int64_t layer, std::vector<float>& dresidual) {
  const LayerNames& names = names_.layers[layer];
  const LayerActivations& a = acts_.layers[layer];
  const model::ModelConfig& c = config_;
  const int64_t n = acts_.b * acts_.t, C = c.hidden_size, I = c.intermediate_size;
  const int64_t hd = c.head_dim, q_dim = c.num_heads * hd, kv_dim = c.num_kv_heads * hd;
  const WeightLayout layout = names_.layout;

  // MLP block: out = residual_mid + mlp(norm2(residual_mid)). dresidual is d out; the skip path
  // passes it through unchanged, the MLP path adds its input gradient below.
  std::vector<float> dnorm2(n * C, 0.0f);
  if (!names.router_weight.empty()) {
    MoeBackward(layer, dresidual.data(), dnorm2.data(), aux_grad_);
  } else if (c.mlp == model::MlpKind::kGeluTanh) {
    std::vector<float> dact(n * I, 0.0f);
    LinearBackward(dact.data(), grads_.data(names.proj_weight),
                   grads_.optional_data(names.proj_bias), dresidual.data(), a.mlp_act.data(),
                   params_.data(names.proj_weight), n, I, C, layout);
    std::vector<float> dfc(n * I, 0.0f);
    GeluBackward(dfc.data(), dact.data(), a.mlp_in.data(), n * I);
    LinearBackward(dnorm2.data(), grads_.data(names.fc_weight), grads_.optional_data(names.fc_bias),
                   dfc.data(), a.norm2.data(), params_.data(names.fc_weight), n, C, I, layout);
  } else {
    std::vector<float> dact(n * I, 0.0f);
    LinearBackward(dact.data(), grads_.data(names.down_weight),
                   grads_.optional_data(names.down_bias), dresidual.data(), a.mlp_act.data(),
                   params_.data(names.down_weight), n, I, C, layout);
    std::vector<float> dgate(n * I, 0.0f), dup(n * I, 0.0f);
    SwiGluBackward(dgate.data(), dup.data(), dact.data(), a.mlp_in.data(), a.mlp_up.data(), n * I);
    LinearBackward(dnorm2.data(), grads_.data(names.gate_weight),
                   grads_.optional_data(names.gate_bias), dgate.data(), a.norm2.data(),
                   params_.data(names.gate_weight), n, C, I, layout);
    LinearBackward(dnorm2.data(), grads_.data(names.up_weight), grads_.optional_data(names.up_bias),
                   dup.data(), a.norm2.data(), params_.data(names.up_weight), n, C, I, layout);
  }
  NormBackward(dresidual.data(), dnorm2.data(), a.residual_mid.data(), a.norm2_mean.data(),
               a.norm2_rstd.data(), names.norm2_weight, names.norm2_bias, n, C);

  // Attention block: residual_mid = x + o_proj(attention(...)). dresidual is now d residual_mid.
  std::vector<float> datt_out(n * q_dim, 0.0f);
  LinearBackward(datt_out.data(), grads_.data(names.o_weight), grads_.optional_data(names.o_bias),
                 dresidual.data(), a.att_out.data(), params_.data(names.o_weight), n, q_dim, C,
                 layout);
  std::vector<float> dq(n * q_dim, 0.0f), dk(n * kv_dim, 0.0f), dv(n * kv_dim, 0.0f);
  const AttentionShape shape{acts_.b,        acts_.t, c.num_heads, c.num_kv_heads, hd,
                             c.WindowOf(layer), params_.optional_data(names.sinks)};
  AttentionBackward(dq.data(), dk.data(), dv.data(), datt_out.data(), a.q.data(), a.k.data(),
                    a.v.data(), a.att.data(), shape, grads_.optional_data(names.sinks));

  // Undo RoPE, then qk_norm: dq/dk become gradients w.r.t. the projections q_proj/k_proj.
  if (c.position == model::PositionKind::kRope) {
    std::vector<float> dq_pre(n * q_dim, 0.0f), dk_pre(n * kv_dim, 0.0f);
    RopeBackward(dq_pre.data(), dq.data(), acts_.rope_cos.data(), acts_.rope_sin.data(), acts_.b,
                 acts_.t, c.num_heads, hd);
    RopeBackward(dk_pre.data(), dk.data(), acts_.rope_cos.data(), acts_.rope_sin.data(), acts_.b,
                 acts_.t, c.num_kv_heads, hd);
    dq.swap(dq_pre);
    dk.swap(dk_pre);
  }
  if (c.qk_norm) {
    std::vector<float> dq_proj(n * q_dim, 0.0f), dk_proj(n * kv_dim, 0.0f);
    RmsNormBackward(dq_proj.data(), grads_.data(names.q_norm), dq.data(), a.q_proj.data(),
                    params_.data(names.q_norm), a.q_norm_rstd.data(), n * c.num_heads, hd);
    RmsNormBackward(dk_proj.data(), grads_.data(names.k_norm), dk.data(), a.k_proj.data(),
                    params_.data(names.k_norm), a.k_norm_rstd.data(), n * c.num_kv_heads, hd);
    dq.swap(dq_proj);
    dk.swap(dk_proj);
  }

  std::vector<float> dnorm1(n * C, 0.0f);
  if (!names.qkv_weight.empty()) {
    const int64_t qkv_dim = q_dim + 2 * kv_dim;
    std::vector<float> dqkv(n * qkv_dim);  // [N, Q + 2K] = [dq | dk | dv] per row
    for (int64_t row = 0; row < n; ++row) {
      float* dst = dqkv.data() + row * qkv_dim;
      std::copy_n(dq.data() + row * q_dim, q_dim, dst);
      std::copy_n(dk.data() + row * kv_dim, kv_dim, dst + q_dim);
      std::copy_n(dv.data() + row * kv_dim, kv_dim, dst + q_dim + kv_dim);
    }
    LinearBackward(dnorm1.data(), grads_.data(names.qkv_weight),
                   grads_.optional_data(names.qkv_bias), dqkv.data(), a.norm1.data(),
                   params_.data(names.qkv_weight), n, C, qkv_dim, layout);
  } else {
    LinearBackward(dnorm1.data(), grads_.data(names.q_weight), grads_.optional_data(names.q_bias),
                   dq.data(), a.norm1.data(), params_.data(names.q_weight), n, C, q_dim, layout);
    LinearBackward(dnorm1.data(), grads_.data(names.k_weight), grads_.optional_data(names.k_bias),
                   dk.data(), a.norm1.data(), params_.data(names.k_weight), n, C, kv_dim, layout);
    LinearBackward(dnorm1.data(), grads_.data(names.v_weight), grads_.optional_data(names.v_bias),
                   dv.data(), a.norm1.data(), params_.data(names.v_weight), n, C, kv_dim, layout);
  }
  NormBackward(dresidual.data(), dnorm1.data(), acts_.residual[layer].data(), a.norm1_mean.data(),
               a.norm1_rstd.data(), names.norm1_weight, names.norm1_bias, n, C);
}

}  // namespace mobius::reference
