// The fp32 CPU reference transformer: the numerical oracle for every backend op and for the
// pipeline (docs: "One reference model" in shared/design/style.md).
//
// Plain loops, no BLAS, double accumulation inside dot products. One decoder-only model covers
// GPT-2 and the Llama family; what differs is read from ModelConfig's fields (norm, MLP, positions,
// biases, qk_norm, GQA, tied head, RoPE scaling), never from the family name, except for the
// tensor naming scheme (parameters.h).
//
//   ReferenceModel model = *ReferenceModel::Create(config, params);
//   float loss = *model.Forward(tokens, targets, B, T);   // also fills model.logits()
//   model.ZeroGrad();
//   MOBIUS_RETURN_IF_ERROR(model.Backward());             // grads() += d loss / d params
//   adamw.Step(&model.params(), model.grads());
//
// Not thread-safe; one instance per thread.
#ifndef MOBIUS_WORKER_REFERENCE_MODEL_H_
#define MOBIUS_WORKER_REFERENCE_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "worker/reference/activations.h"
#include "worker/reference/parameters.h"

namespace mobius::reference {

class ReferenceModel {
 public:
  // INVALID_ARGUMENT / UNIMPLEMENTED when the config is unsupported or `params` does not hold
  // exactly the config's tensors with the right shapes. Gradients start at zero.
  static absl::StatusOr<ReferenceModel> Create(const model::ModelConfig& config, Parameters params);

  // tokens [B, T] in [0, V); targets [B, T] in [0, V) or kIgnoreIndex (-100), or nullptr for
  // logits only. Returns the mean cross-entropy over non-ignored targets (0 without targets or
  // when all are ignored), plus router_aux_loss_coef times the load-balancing loss of a mixture of
  // experts whose config sets output_router_logits (as transformers' ForCausalLM adds it; the aux
  // loss alone is activations().aux_loss, computed for every MoE model). INVALID_ARGUMENT for
  // out-of-range ids or T beyond learned positions.
  absl::StatusOr<float> Forward(const int32_t* tokens, const int32_t* targets, int64_t b,
                                int64_t t);

  // Accumulates loss_scale * d(mean loss of the last Forward) / d(param) into grads(), so
  // several microbatches can be accumulated (scale each by its share of the full batch).
  // FAILED_PRECONDITION when the last Forward had no targets.
  absl::Status Backward(float loss_scale = 1.0f);

  void ZeroGrad();

  const model::ModelConfig& config() const { return config_; }
  const ModelNames& names() const { return names_; }
  Parameters& params() { return params_; }
  const Parameters& params() const { return params_; }
  Parameters& grads() { return grads_; }
  const Parameters& grads() const { return grads_; }
  const std::vector<float>& logits() const { return acts_.logits; }  // [B, T, V], last Forward
  const Activations& activations() const { return acts_; }

 private:
  ReferenceModel(const model::ModelConfig& config, Parameters params);

  void EmbedForward();
  void BlockForward(int64_t layer);
  void HeadForward();
  void BlockBackward(int64_t layer, std::vector<float>& dresidual);
  // A mixture-of-experts MLP (model_moe.cc): out [N, C] = moe(norm2); the backward adds
  // d/d norm2 into dnorm2 and every router and expert gradient, given d out; aux_grad [E] is the
  // load-balancing loss's gradient per router probability (empty without it).
  void MoeForward(int64_t layer, float* out);
  void MoeBackward(int64_t layer, const float* dout, float* dnorm2,
                   const std::vector<float>& aux_grad);
  // Norm over rows of width c, dispatching on config_.norm; bias names may be empty.
  void NormForward(float* out, float* mean, float* rstd, const float* inp,
                   const std::string& weight, const std::string& bias, int64_t n, int64_t c);
  void NormBackward(float* dinp, const float* dout, const float* inp, const float* mean,
                    const float* rstd, const std::string& weight, const std::string& bias,
                    int64_t n, int64_t c);

  model::ModelConfig config_;
  ModelNames names_;
  Parameters params_;
  Parameters grads_;
  std::vector<float> inv_freq_;  // [hd / 2] RoPE inverse frequencies (RoPE only)
  Activations acts_;
  bool have_targets_ = false;
  std::vector<float> aux_grad_;  // [E] during Backward when the aux loss is on; else empty
};

}  // namespace mobius::reference

#endif  // MOBIUS_WORKER_REFERENCE_MODEL_H_
