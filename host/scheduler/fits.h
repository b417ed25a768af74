// Whether a job could ever run on this node, even with nothing else running: the submit-time
// check (issue 6: a job that can never fit is rejected with FAILED_PRECONDITION and the numbers).
//
// A job never fits when
//  - it needs more GPUs (at least 1 for "all free") than the allow-list holds,
//  - fewer usable GPUs than it needs have per_gpu_bytes of memory (GPUs of unknown memory count
//    as large enough: the topology had no CUDA/NVML information),
//  - host_bytes exceeds the node's host budget, or pinned_bytes its pinned budget.
// Draining and quotas are not reasons: both change at an admin's word.
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_SCHEDULER_FITS_H_
#define MOBIUS_HOST_SCHEDULER_FITS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "host/scheduler/resources.h"

namespace mobius::jobs {

// memory_bytes == 0 (unknown) counts as enough.
bool HasMemoryFor(const GpuResource& gpu, int64_t per_gpu_bytes);

// OK, or FAILED_PRECONDITION "job j-000001 can never run on this node: needs 9 GPUs, the node has
// 8 usable (GPUs 0,1,2,3,4,5,6,7); host memory: needs 2.0 TiB, the node has 1.5 TiB for jobs".
// INVALID_ARGUMENT (with the field path) for a malformed node or request.
absl::Status CheckFits(const NodeResources& node, const JobRequest& request);

// The text after "can never run on this node: ", or nullopt when the job fits an empty node.
// REQUIRES: node and request valid (validate.h).
std::optional<std::string> NeverFitsReason(const NodeResources& node, const JobRequest& request);

}  // namespace mobius::jobs

#endif  // MOBIUS_HOST_SCHEDULER_FITS_H_
