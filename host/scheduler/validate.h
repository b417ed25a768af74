// Input checks for the scheduler: every malformed field is INVALID_ARGUMENT naming its path
// ("queued[2].gpus: -1 is negative (job j-000004)", "running[0].gpus: GPU 3 is also held by
// j-000002"), never a crash further in.
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_SCHEDULER_VALIDATE_H_
#define MOBIUS_HOST_SCHEDULER_VALIDATE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "host/scheduler/resources.h"

namespace mobius::jobs {

// `path` prefixes the field names ("queued[2]"); empty for a lone request ("gpus: ...").
absl::Status ValidateJobRequest(const JobRequest& request, absl::string_view path = "");

// gpus[i].index == i, memory not negative, allow-list entries in range and unique, budgets not
// negative.
absl::Status ValidateNode(const NodeResources& node);

// Ids present and unique, GPUs in range and held by one job only, bytes not negative, and no
// queued job id equal to another queued or running one.
// REQUIRES: ValidateNode(node).ok().
absl::Status ValidateJobs(const NodeResources& node, const std::vector<RunningJob>& running,
                          const std::vector<JobRequest>& queued);

absl::Status ValidateQuotas(const Quotas& quotas);

}  // namespace mobius::jobs

#endif  // MOBIUS_HOST_SCHEDULER_VALIDATE_H_
