// The MEASURED profile source: a MeasuredProfile (common/run/measured_profile.h, what
// `mobius-worker profile` measured) converted into the planner's Profile. MeasuredToProfile expands
// the measured kinds to every unit of the model.
//
// Pure; thread-safe.
#ifndef MOBIUS_SERVER_PLANNER_MEASURED_PROFILE_H_
#define MOBIUS_SERVER_PLANNER_MEASURED_PROFILE_H_

#include "absl/status/statusor.h"
#include "common/model/layer_units.h"
#include "common/run/measured_profile.h"
#include "server/planner/profile.h"

namespace mobius::planner {

// The planner Profile (source "measured") for `model`: unit u gets its kind's numbers. The
// analytic profile's conventions hold, so the cost model treats both alike. INVALID_ARGUMENT when
// the profile was measured for another model (hash or unit count differ, with both values) or
// lacks a kind the model has. Gradient bytes per parameter = gradient_bytes / (parameter_bytes /
// 2).
absl::StatusOr<Profile> MeasuredToProfile(const MeasuredProfile& measured,
                                          const model::ModelDescription& model);

}  // namespace mobius::planner

#endif  // MOBIUS_SERVER_PLANNER_MEASURED_PROFILE_H_
