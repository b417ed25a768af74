// ResidentModel: the whole model resident on one backend, every unit run in order by its
// UnitRunner: the engine of the standalone trainer and the unsplit baseline the pipeline must match.
//
// Device memory (all against the backend's cap; RESOURCE_EXHAUSTED from Create/SetWeights/
// ForwardBackward is the caller's to handle): per unit its bf16 weights and fp32 gradients (a tied
// head holds its own copy of the token embedding, as a pipeline stage would), per microbatch shape
// the boundary activations (tokens, every unit's input: the only activations kept), two fp32
// boundary gradients and the workspace: one shared by all units with recompute (the point of
// recompute), one per unit without.
//
// Recompute: with Options::recompute every decoder block re-runs its forward internals in the
// backward; the head never does, because it is the last forward and its backward follows at once,
// so the shared workspace still holds its internals. Either way the same ops run in the same order
// on the same inputs: gradients are bitwise identical with and without recompute.
//
//   auto m = *ResidentModel::Create(config, &backend, {});
//   m->SetWeights(bf16_by_name);
//   float loss = *m->Step(tokens, targets, B, T, /*microbatches=*/2);  // zeroes, accumulates
//   auto grads = *m->Grads();                                        // fp32, by HF name
//
// Not thread-safe; one caller at a time.
#ifndef MOBIUS_WORKER_MODEL_RESIDENT_MODEL_H_
#define MOBIUS_WORKER_MODEL_RESIDENT_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "common/numeric/nf4.h"
#include "worker/backend/backend.h"
#include "worker/model/adapter.h"
#include "worker/model/unit_runner.h"

namespace mobius::units {

class ResidentModel {
 public:
  struct Options {
    bool recompute = true;  // false: each unit keeps its internals from forward to backward
    // LoRA (adapter.h): the base weights frozen (no gradient buffers for them), the adapters'
    // fp32 parameters and gradients on the device; Grads() and ReadGrad() then give the
    // adapters' gradients by PEFT's tensor names (model/lora.h). With lora->base_nf4 the base's
    // linear weights are held in NF4, quantised by SetWeights from the 16-bit values given.
    std::optional<LoraSpec> lora;
    int64_t chunk_tokens = 0;  // token chunks of the head and MLP (UnitRunner::Create)
    // The weights' and activations' 16-bit format (UnitRunner::Create): SetWeights then takes
    // that format's bits, UnitInput converts from it.
    backend::DType precision = backend::DType::kBf16;
  };

  // Allocates weights and gradients (zeroed). `backend` is not owned and must outlive the model.
  static absl::StatusOr<std::unique_ptr<ResidentModel>> Create(const model::ModelConfig& config,
                                                               backend::Backend* backend,
                                                               const Options& options);
  ~ResidentModel();

  // Uploads every parameter from host bf16 bits keyed by HF name ([numel] each; missing or
  // misshapen: INVALID_ARGUMENT). Returns after the copies completed.
  absl::Status SetWeights(const std::map<std::string, std::vector<uint16_t>>& bf16);

  absl::Status ZeroGrads();

  // One microbatch [b, t] (host tokens and targets, targets -100 = ignored): forward through all
  // units, then backward in reverse; gradients += loss_scale * d(mean loss) / d(param). Returns the
  // microbatch's mean loss (a mixture of experts with output_router_logits: plus its
  // load-balancing loss, moe_aux.h). INVALID_ARGUMENT for out-of-range ids (reported by the op).
  // LoRA dropout: `dropout_key` (0: none) and the microbatch's first token row in its batch
  // (MicroBatch in unit_runner.h).
  absl::StatusOr<float> ForwardBackward(const int32_t* tokens, const int32_t* targets, int64_t b,
                                        int64_t t, float loss_scale, uint64_t dropout_key = 0,
                                        int64_t row_offset = 0);

  // The forward alone (eval): the microbatch's mean loss (the cross-entropy alone, moe_aux.h);
  // gradients are untouched.
  absl::StatusOr<float> Forward(const int32_t* tokens, const int32_t* targets, int64_t b,
                                int64_t t);

  // ZeroGrads, then the batch [b, t] in `microbatches` equal row slices, each scaled by its share
  // of the batch's non-ignored targets; returns the batch's mean loss. `dropout_key`: the step's
  // LoRA dropout key (worker/kernels/dropout_mask.h; 0: none). `loss_scale`: every share is
  // multiplied by it (an fp16 run's dynamic loss scale, train/loss_scaler.h); the loss returned is
  // unscaled. REQUIRES: b % microbatches == 0 (INVALID_ARGUMENT otherwise).
  absl::StatusOr<float> Step(const int32_t* tokens, const int32_t* targets, int64_t b, int64_t t,
                             int64_t microbatches, uint64_t dropout_key = 0,
                             float loss_scale = 1.0f);

  // The accumulated gradients, fp32 on the host by HF name (a tied embedding's two parts summed).
  // Allocates the whole model's gradients on the host: for tests; ReadGrad streams one tensor.
  absl::StatusOr<std::map<std::string, std::vector<float>>> Grads();

  // Elements [begin, begin + n) of one parameter's accumulated gradient into `out` [n] (host),
  // exactly as Grads() gives them. `scratch` [n] holds a tied embedding's second part (may be
  // null otherwise). INVALID_ARGUMENT for an unknown name or a range outside the tensor. Returns
  // after the copies completed.
  absl::Status ReadGrad(const std::string& name, int64_t begin, int64_t n, float* out,
                        float* scratch);
  // Uploads bf16 bits [n] as elements [begin, begin + n) of one parameter, to every unit that
  // reads it (a tied embedding's two copies). Errors as ReadGrad's; a weight of an NF4 base
  // (LoraSpec::base_nf4) is quantised and must be set whole. Returns after the copies.
  absl::Status SetWeight(const std::string& name, int64_t begin, int64_t n, const uint16_t* bf16);
  // A weight of an NF4 base set from its NF4 form as stored (a bitsandbytes checkpoint's codes and
  // scales, checkpoint::TensorSetReader::ReadNf4), without requantising. INVALID_ARGUMENT for a
  // name that is not an NF4 weight or a tensor of another size.
  absl::Status SetNf4Weight(const std::string& name, const numeric::Nf4Tensor& t);
  // Whether `name` is a weight this model holds in NF4.
  bool IsNf4Weight(const std::string& name) const;

  // LoRA: every adapter tensor (PEFT name, elements) in unit and module order; uploading one
  // (fp32 [elements], returns after the copy); reading one's accumulated gradient.
  // INVALID_ARGUMENT for an unknown name.
  std::vector<std::pair<std::string, int64_t>> AdapterTensors() const;
  absl::Status SetAdapter(const std::string& name, const float* data);
  absl::Status ReadAdapterGrad(const std::string& name, float* out);

  // The input of unit `unit` (>= 1) in the last ForwardBackward: hidden [b, t, C] widened to fp32.
  absl::StatusOr<std::vector<float>> UnitInput(int64_t unit);

  int64_t num_units() const { return static_cast<int64_t>(runners_.size()); }
  bool recompute() const { return options_.recompute; }

 private:
  ResidentModel(const model::ModelConfig& config, backend::Backend* backend, const Options& options);
  absl::Status Prepare(int64_t b, int64_t t);  // (re)allocates the per-shape buffers
  // Copies the microbatch in and enqueues every unit's forward; the loss lands in loss_.
  absl::Status EnqueueForward(const int32_t* tokens, const int32_t* targets, int64_t b, int64_t t);
  const backend::DeviceBuffer& Workspace(int64_t unit) const;
  uint64_t dropout_key_ = 0;  // of the ForwardBackward running (0: none, as in Forward)
  int64_t row_offset_ = 0;
  MicroBatch Batch(int64_t unit) const;  // of the current shape
  // The load-balancing loss (moe_aux.h): the MoE blocks' routing statistics of the microbatch
  // running, and the gradient its backward adds (empty when the loss is off or in Forward).
  std::vector<float> moe_stats_;
  std::vector<float> moe_aux_grad_;

  model::ModelConfig config_;
  backend::Backend* backend_;
  Options options_;
  std::unique_ptr<backend::Queue> queue_;
  std::vector<std::unique_ptr<UnitRunner>> runners_;
  std::vector<backend::DeviceBuffer> weights_, grads_;  // per unit (grads_ empty when frozen)
  std::vector<backend::DeviceBuffer> adapter_params_, adapter_grads_;  // per unit (LoRA)
  std::vector<AdapterBuffers> adapters_;                                // per unit, into the above
  // Where an adapter tensor lives: unit, element offset, elements.
  struct AdapterTensor {
    int64_t unit = 0, offset = 0, elements = 0;
  };
  absl::StatusOr<AdapterTensor> FindAdapter(const std::string& name) const;

  int64_t b_ = 0, t_ = 0;  // shape of the buffers below
  backend::DeviceBuffer tokens_, targets_, loss_;
  std::vector<backend::DeviceBuffer> inputs_;      // [unit] hidden input (unit >= 1)
  backend::DeviceBuffer dhidden_[2];               // fp32 boundary gradients, ping-pong
  std::vector<backend::DeviceBuffer> workspaces_;  // 1 (recompute) or one per unit
};

}  // namespace mobius::units

#endif  // MOBIUS_WORKER_MODEL_RESIDENT_MODEL_H_
