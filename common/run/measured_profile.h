// What `mobius-worker profile` (worker/profile/) measured on a real backend for one model at one
// microbatch shape: the contract between the worker that measures and the planner that reads
// (host/planner/measured_profile.h converts it into the planner's Profile). The worker measures
// one unit of each layer-unit KIND (embedding, decoder block, head; all blocks of a model have the
// same shapes) and the copy bandwidth of each device. JSON and the on-disk cache: profile_json.h,
// profile_cache.h.
//
// Units: seconds and bytes per ONE microbatch of `shape`, medians over `repetitions` after
// `warmup` untimed runs; bandwidths in bytes per second.
//
// Pure; thread-safe.
#ifndef MOBIUS_COMMON_RUN_MEASURED_PROFILE_H_
#define MOBIUS_COMMON_RUN_MEASURED_PROFILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/layer_units.h"

namespace mobius::planner {

inline constexpr int kMeasuredProfileVersion = 1;

// The shape of one microbatch: what a profile is measured at and the planner plans for.
struct MicrobatchShape {
  int64_t microbatch_size = 1;  // sequences per microbatch (B)
  int64_t seq_len = 1;          // tokens per sequence (T)

  int64_t tokens() const { return microbatch_size * seq_len; }
};

// One layer-unit kind, measured on the unit `unit_index` at the profile's shape.
struct UnitKindMeasurement {
  std::string kind;        // model::UnitKindName: "embedding", "block", "head"
  int64_t unit_index = 0;  // the unit that was run
  double forward_seconds = 0;
  double backward_seconds = 0;  // recompute of the forward internals included
  int64_t parameter_bytes = 0;  // bf16 elements read (owned + shared) x 2, padding excluded
  int64_t gradient_bytes = 0;   // the backend's gradient buffer elements x its bytes (fp32: x 4)
  int64_t boundary_bytes = 0;   // the unit's input (token ids int32, or hidden [B, T, C] bf16)
  // Bytes of the workspace the forward writes (the internals a backward without recompute would
  // need; measured by filling the workspace with a pattern and counting changed 64-byte lines).
  int64_t saved_activation_bytes = 0;
  // Peak device bytes (the backend allocator's high-water mark) over forward + backward, minus
  // weights, gradients, input/targets and the saved bytes: output, output/input gradients and
  // scratch, transient while the unit runs.
  int64_t workspace_bytes = 0;
};

// Copy bandwidth of one device, pinned host memory <-> device memory.
struct LinkMeasurement {
  int device = 0;
  double h2d_bytes_per_s = 0;         // host -> device alone
  double d2h_bytes_per_s = 0;         // device -> host alone
  double duplex_h2d_bytes_per_s = 0;  // both directions at once, each direction's rate
  double duplex_d2h_bytes_per_s = 0;
  int group_size = 1;                // devices of its contention group copying at once
  double group_h2d_bytes_per_s = 0;  // this device's rate while all of them copy H2D
  double group_d2h_bytes_per_s = 0;
};

struct MeasuredProfile {
  int version = kMeasuredProfileVersion;
  std::string model_hash;  // ModelConfigHash of the model it was measured for
  std::string model_type;
  int64_t num_units = 0;
  MicrobatchShape shape;
  std::string backend;        // "cpu", "cuda"
  std::string device;         // "cpu", "NVIDIA GeForce RTX 4090"
  std::string build_version;  // mobius version that measured it
  // The units' 16-bit format (training.precision): "bf16" or "fp16" (the fp16 backward and head,
  // worker/model/linear.h). A profile file without the field was measured in bf16.
  std::string precision = "bf16";
  int warmup = 0;
  int repetitions = 0;
  int64_t copy_bytes = 0;  // bytes per timed copy
  std::vector<UnitKindMeasurement> kinds;
  std::vector<LinkMeasurement> links;

  const UnitKindMeasurement* Find(const std::string& kind) const;
};

// A stable 16-hex-digit hash (FNV-1a 64) of everything in the config that changes a unit's shapes
// or work: family, sizes, norm/MLP/position kinds, biases, tying, qk-norm, sliding window, RoPE
// scaling. Not the token ids or norm epsilon.
std::string ModelConfigHash(const model::ModelConfig& config);

// The cache key: model hash, microbatch shape, backend, device, build version and (fp16 only, so
// bf16 keys stay as they were) precision, made safe as a file name, e.g.
// "3f2a...-b1-t1024-cpu-cpu-v0.1.0" or "...-v0.1.0-fp16".
std::string ProfileCacheKey(const std::string& model_hash, const MicrobatchShape& shape,
                            const std::string& backend, const std::string& device,
                            const std::string& build_version,
                            const std::string& precision = "bf16");

// INVALID_ARGUMENT naming the field: negative or non-finite times or bytes, zero repetitions, a
// kind other than embedding/block/head, duplicate kinds, non-positive shape, a precision other
// than bf16 or fp16.
absl::Status ValidateMeasuredProfile(const MeasuredProfile& profile);

}  // namespace mobius::planner

#endif  // MOBIUS_COMMON_RUN_MEASURED_PROFILE_H_
