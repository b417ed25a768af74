// LoRA mode in the planner: the job trains low-rank adapters (common/model/lora.h, PEFT's) on a
// frozen base. What changes against full fine-tuning, as the pipeline runtime runs it (docs/
// planner.md, "LoRA"):
//
//   host store    the base's bf16 weights once (2 bytes/parameter: no fp32 master, no moments, no
//                 base gradients, no second copy: optimizer staleness 0 only); per adapter
//                 parameter fp32 master + Adam m + v + fp32 gradient (16 bytes); one double per
//                 64 Ki-element chunk of every adapter tensor (grad-norm partials); activation
//                 checkpoints and activation gradients as in full fine-tuning (estimator.h).
//   device slot   the stage's bf16 base weights + its fp32 adapters (4 bytes/adapter parameter)
//                 + their fp32 gradients (4 bytes/adapter parameter): no base gradient buffer.
//   traffic       every pass uploads W = bf16 base + fp32 adapters; a backward offloads only the
//                 adapters' gradients (G = 4 bytes/adapter parameter).
//   compute       a frozen linear's backward is its input gradient alone (one GEMM, no weight
//                 gradient): a block's backward ~ one forward (+ the recompute); attention's
//                 backward is unchanged (it has no weights); the embedding has no backward (no
//                 scatter). Each adapted module adds x A^T (2 T in r FLOPs) and h B^T (2 T r out)
//                 to the forward and twice that (dB, dh, dA, dx) to the backward.
//   optimizer     CPU AdamW over the adapter parameters alone, at the host's rate.
//
// An NF4 base (QLoRA, LoraOptions::base_nf4; common/run/unit_params.h): every linear an adapter
// could name is held as its NF4 blob, numeric::Nf4Bytes per weight (~0.52 bytes per value) in the
// host store, the slot and every upload (LoraLayout::BaseBytes); each call that reads such a weight
// first dequantises it on the device (0.5 bytes read, 2 written per value: Nf4DequantizeSeconds),
// once in the forward, and in the backward once for the input gradient and once more in the
// recompute; the scratch it dequantises into is the unit's largest NF4 weight in 16 bits
// (workspace).
//
// The profile carries the mode (Profile::lora): AnalyticProfile computes it (profile.h), a
// measured (full fine-tuning) profile is converted by ApplyLoraToMeasuredProfile; the cost model,
// partitioners, simulator and estimator then read W, G and the optimizer's parameters from it.
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_PLANNER_LORA_H_
#define MOBIUS_HOST_PLANNER_LORA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/layer_units.h"
#include "common/model/lora.h"

namespace mobius::planner {

// The job's adapters as the planner takes them (train::AdapterOptions carries the same; make_plan.h
// converts).
struct LoraOptions {
  int64_t rank = 0;  // 0: full fine-tuning
  // PEFT target_modules names (model::LoraTargetNames); empty: the family's PEFT default
  // (model::DefaultLoraTargets: q_proj, v_proj; GPT-2 c_attn).
  std::vector<std::string> target_modules;
  bool base_nf4 = false;  // QLoRA: the base's linears in NF4 (above)
  bool enabled() const { return rank > 0; }
};

// The adapters of a model, resolved.
struct LoraLayout {
  int64_t rank = 0;
  std::vector<std::string> target_modules;  // as given, or the family's default
  // [unit]: the unit's adapted modules (decoder block i is unit i + 1; the embedding and the head
  // carry none).
  std::vector<std::vector<model::LoraModule>> unit_modules;
  int64_t parameters = 0;   // sum of r (in + out) over every adapted module
  int64_t norm_chunks = 0;  // sum over adapter tensors (A and B) of ceil(elements / 64 Ki)
  // NF4 base: per unit, the values of its NF4 weights, their blobs' bytes, and the largest one's
  // values (the dequantise scratch); all 0 with a 16-bit base.
  bool base_nf4 = false;
  std::vector<int64_t> unit_nf4_elements, unit_nf4_bytes, unit_nf4_largest;

  int64_t UnitParameters(int64_t unit) const;
  // A unit's frozen base bytes given its 16-bit bytes: the NF4 weights' blobs instead of 2 bytes
  // per value (unchanged with a 16-bit base).
  int64_t BaseBytes(int64_t unit, int64_t base16_bytes) const;
  int64_t Nf4Elements(int64_t unit) const;
};

// Seconds one dequantise of `elements` NF4 values takes on a device streaming memory_bytes_per_s
// (0: unknown, the cost not modelled): 2.5 bytes per value moved.
double Nf4DequantizeSeconds(int64_t elements, double memory_bytes_per_s);

// INVALID_ARGUMENT (model::ValidateLora's message, fields "lora.rank" and "lora.target_modules")
// for a target the family does not have, a target given twice, or a rank outside [1, the smallest
// adapted dimension]; ("lora.base") an NF4 base of a family with Conv1D weights.
// REQUIRES: options.enabled().
absl::StatusOr<LoraLayout> MakeLoraLayout(const model::ModelDescription& model,
                                          const LoraOptions& options);

// FLOPs per token of one unit with the base frozen (compare model::UnitFlops):
//   forward  = the unit's forward + sum over its adapted modules of 2 r (in + out)
//   backward = input gradients only: 2 x matmul weight elements (one GEMM each) + 2 x attention
//              (unchanged, no weights) + 2 x the adapters' forward; the embedding's is 0.
// Recompute, where the engine does it, is the caller's to add (as for model::UnitFlops).
model::UnitFlopsPerToken LoraUnitFlops(const model::ModelDescription& model, int64_t unit,
                                       int64_t seq_len, const LoraLayout& lora);

// FLOPs per token of a block's MLP output projection in the forward (2 x its elements, + its
// adapter's h B^T, 2 r out, when `lora` adapts it): what our runtime's recompute leaves out
// (model::MlpOutputProjection). 0 for other units; `lora` may be null.
double MlpOutputForwardFlops(const model::ModelDescription& model, int64_t unit,
                             const LoraLayout* lora);

// The adapters' bytes on a unit profile (profile.h) of a frozen base, per layer unit:
//   W (uploaded per pass, resident in the slot) = bf16 base + 4 x adapter parameters
//   G (the backward's gradient buffer and offload) = 4 x adapter parameters
int64_t LoraWeightBytes(int64_t base_parameter_bytes, int64_t adapter_parameters);
int64_t LoraGradientBytes(int64_t adapter_parameters);

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_LORA_H_
