// The measurements behind `mobius-worker profile`: per layer-unit kind, forward and backward (with
// recompute) time at a microbatch shape, parameter / gradient / boundary / saved-activation /
// workspace bytes; per device, copy bandwidth host->device and device->host alone, both directions
// at once, and with every device of a contention group copying at once. Written against the
// Backend interface only (worker/backend/backend.h): the CPU backend today, the CUDA backend when
// it exists, through a BackendFactory.
//
// Method. Each unit kind (embedding, first decoder block, head: all blocks share their shapes) runs
// on a FRESH backend from the factory, so the allocator's peak_bytes() is this unit's alone.
// Weights/inputs are seeded random bf16 values, token ids and targets uniform in [0, V). Each
// timing is enqueue + Synchronize on one compute queue, wall clock (steady_clock); `warmup`
// untimed runs, then the median of `repetitions`. Bytes:
//   parameter_bytes         sum of the unit's tensor elements (owned + shared) x 2 (bf16)
//   gradient_bytes          the same elements x 4 (the backend's fp32 gradient buffer)
//   boundary_bytes          the input buffer (int32 token ids or bf16 [B, T, C])
//   saved_activation_bytes  64-byte lines of the workspace a forward writes (the workspace is
//                           filled with a pattern first, read back after the forward): the
//                           internals a backward without recompute would need
//   workspace_bytes         peak_bytes() over forward + backward minus weights, gradients,
//                           input, targets and the saved bytes
// Links: `copy_bytes` between a pinned host buffer (AllocateHost) and a device buffer, on
// H2D/D2H queues; both-directions and group runs start the copies from one thread each and time
// each copy to its own completion.
//
// Not thread-safe (one profile at a time); creates backends, queues and threads.
#ifndef MOBIUS_WORKER_PROFILE_UNIT_PROFILER_H_
#define MOBIUS_WORKER_PROFILE_UNIT_PROFILER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/layer_units.h"
#include "common/run/measured_profile.h"
#include "worker/backend/backend.h"

namespace mobius::profile {

// A new backend for device `device` (0-based). The CPU backend: a CpuBackend with the job's cap;
// CUDA: a CudaBackend on that ordinal.
using BackendFactory = std::function<absl::StatusOr<std::unique_ptr<backend::Backend>>(int device)>;

struct ProfilerOptions {
  int warmup = 1;
  int repetitions = 5;
  uint64_t copy_bytes = uint64_t{64} << 20;  // per timed copy
  int num_devices = 1;                       // devices measured; they form one contention group
  bool measure_links = true;
  uint64_t seed = 1;
  // The units' 16-bit format (the job's training.precision): bf16, or fp16 with the fp16 backward
  // and head (worker/model/linear.h); MeasuredProfile::precision says which.
  backend::DType precision = backend::DType::kBf16;
};

// One unit (its kind's representative). INVALID_ARGUMENT for a bad unit or shape;
// RESOURCE_EXHAUSTED when it does not fit the backend's memory cap.
absl::StatusOr<planner::UnitKindMeasurement> MeasureUnit(const model::ModelDescription& model,
                                                         int64_t unit,
                                                         const planner::MicrobatchShape& shape,
                                                         const BackendFactory& factory,
                                                         const ProfilerOptions& options);

// Copy rates of every device (options.num_devices, one contention group).
absl::StatusOr<std::vector<planner::LinkMeasurement>> MeasureLinks(const BackendFactory& factory,
                                                                   const ProfilerOptions& options);

// The whole profile: one MeasureUnit per kind, MeasureLinks, and the identifying fields (model
// hash, shape, backend name, device name, build version from the arguments).
absl::StatusOr<planner::MeasuredProfile> MeasureProfile(
    const model::ModelDescription& model, const planner::MicrobatchShape& shape,
    const BackendFactory& factory, const std::string& backend_name, const std::string& device_name,
    const std::string& build_version, const ProfilerOptions& options);

}  // namespace mobius::profile

#endif  // MOBIUS_WORKER_PROFILE_UNIT_PROFILER_H_
