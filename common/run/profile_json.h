// JSON form of a MeasuredProfile (common/run/measured_profile.h): what `mobius-worker profile`
// writes and `mobius plan --profile=measured|FILE` reads.
//
//   {"format": "mobius-profile", "version": 1,
//    "model": {"hash": "3f2a...", "model_type": "llama", "units": 34},
//    "shape": {"microbatch": 1, "seq_len": 1024},
//    "backend": "cpu", "device": "cpu", "build_version": "0.1.0",
//    "warmup": 1, "repetitions": 5, "copy_bytes": 67108864,
//    "units": [{"kind": "block", "unit": 1, "forward_seconds": 0.01, "backward_seconds": 0.03,
//               "parameter_bytes": ..., "gradient_bytes": ..., "boundary_bytes": ...,
//               "saved_activation_bytes": ..., "workspace_bytes": ...}, ...],
//    "links": [{"device": 0, "h2d_bytes_per_s": ..., "d2h_bytes_per_s": ...,
//               "duplex_h2d_bytes_per_s": ..., "duplex_d2h_bytes_per_s": ...,
//               "group_size": 4, "group_h2d_bytes_per_s": ..., "group_d2h_bytes_per_s": ...}]}
//
// Errors are INVALID_ARGUMENT naming `source` (the file) and the field: "profile FILE: field
// units[1].forward_seconds: must be a finite number >= 0 seconds (got -1)".
//
// Pure (text in, text out); thread-safe.
#ifndef MOBIUS_COMMON_RUN_PROFILE_JSON_H_
#define MOBIUS_COMMON_RUN_PROFILE_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/run/measured_profile.h"

namespace mobius::planner {

// Pretty-printed JSON (2-space indent), newline-terminated.
std::string MeasuredProfileToJson(const MeasuredProfile& profile);

// Parses and validates (ValidateMeasuredProfile). `source` names the input in errors.
absl::StatusOr<MeasuredProfile> MeasuredProfileFromJson(const std::string& text,
                                                        const std::string& source);

// The version string of this build (the cache key's build part), e.g. "0.1.0".
std::string BuildVersion();

}  // namespace mobius::planner

#endif  // MOBIUS_COMMON_RUN_PROFILE_JSON_H_
