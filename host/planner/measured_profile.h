// The MEASURED profile source: a MeasuredProfile (common/run/measured_profile.h, what
// `mobius-worker profile` measured) converted into the planner's Profile. MeasuredToProfile expands
// the measured kinds to every unit of the model.
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_PLANNER_MEASURED_PROFILE_H_
#define MOBIUS_HOST_PLANNER_MEASURED_PROFILE_H_

#include "absl/status/statusor.h"
#include "common/model/layer_units.h"
#include "common/run/measured_profile.h"
#include "host/planner/profile.h"

namespace mobius::planner {

// The planner Profile (source "measured") for `model`: unit u gets its kind's numbers. The
// analytic profile's conventions hold, so the cost model treats both alike. INVALID_ARGUMENT when
// the profile was measured for another model (hash or unit count differ, with both values) or
// lacks a kind the model has. Gradient bytes per parameter = gradient_bytes / (parameter_bytes /
// 2).
absl::StatusOr<Profile> MeasuredToProfile(const MeasuredProfile& measured,
                                          const model::ModelDescription& model);

// A measured profile (full fine-tuning: the worker measures units with trainable weights) in LoRA
// mode (lora.h): the bytes as AnalyticProfile's with lora (W = the measured bf16 weights + 4 x
// adapter parameters, G = 4 x adapter parameters), Profile::lora set, and each unit's times scaled
// by its FLOPs with the base frozen over its FLOPs in full fine-tuning (LoraUnitFlops /
// model::UnitFlops; the backward's ratio counts the recompute forward on both sides). A unit
// without FLOPs (the embedding's lookup) keeps its forward, and its backward becomes that forward
// (the recompute; a frozen embedding has no scatter-add). REQUIRES: `full` was made for `model`
// (MeasuredToProfile) and has no lora.
Profile LoraFromMeasuredProfile(Profile full, const model::ModelDescription& model,
                                const LoraLayout& lora);

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_MEASURED_PROFILE_H_
