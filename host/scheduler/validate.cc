#include "host/scheduler/validate.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace mobius::jobs {
namespace {

absl::Status FieldError(absl::string_view path, absl::string_view field, absl::string_view what,
                        absl::string_view job_id = "") {
  return absl::InvalidArgumentError(
      absl::StrCat(path, path.empty() ? "" : ".", field, ": ", what,
                   path.empty() || job_id.empty() ? "" : absl::StrCat(" (job ", job_id, ")")));
}

absl::Status NotNegative(absl::string_view path, absl::string_view field, int64_t value,
                         absl::string_view job_id = "") {
  if (value >= 0) return absl::OkStatus();
  return FieldError(path, field, absl::StrCat(value, " is negative"), job_id);
}

}  // namespace

absl::Status ValidateJobRequest(const JobRequest& r, absl::string_view path) {
  if (r.job_id.empty()) return FieldError(path, "job_id", "empty");
  MOBIUS_RETURN_IF_ERROR(NotNegative(path, "gpus", r.gpus, r.job_id));
  MOBIUS_RETURN_IF_ERROR(NotNegative(path, "host_bytes", r.host_bytes, r.job_id));
  MOBIUS_RETURN_IF_ERROR(NotNegative(path, "pinned_bytes", r.pinned_bytes, r.job_id));
  MOBIUS_RETURN_IF_ERROR(NotNegative(path, "per_gpu_bytes", r.per_gpu_bytes, r.job_id));
  if (!std::isfinite(r.order_score)) {
    return FieldError(path, "order_score", absl::StrCat(r.order_score, " is not finite"), r.job_id);
  }
  if (r.placement != Placement::kSpread && r.placement != Placement::kPack) {
    return FieldError(path, "placement",
                      absl::StrCat("unknown value ", static_cast<int>(r.placement)), r.job_id);
  }
  return absl::OkStatus();
}

absl::Status ValidateNode(const NodeResources& node) {
  const int n = static_cast<int>(node.gpus.size());
  for (int i = 0; i < n; ++i) {
    const std::string path = absl::StrCat("node.gpus[", i, "]");
    if (node.gpus[i].index != i) {
      return FieldError(path, "index", absl::StrCat(node.gpus[i].index, ", expected ", i));
    }
    MOBIUS_RETURN_IF_ERROR(NotNegative(path, "memory_bytes", node.gpus[i].memory_bytes));
  }
  std::vector<bool> seen(n, false);
  for (size_t i = 0; i < node.allowed_gpus.size(); ++i) {
    const int g = node.allowed_gpus[i];
    const std::string field = absl::StrCat("allowed_gpus[", i, "]");
    if (g < 0 || g >= n) {
      return FieldError("node", field,
                        absl::StrCat(g, " is not a GPU of this node (", n, " GPUs)"));
    }
    if (seen[g]) return FieldError("node", field, absl::StrCat("GPU ", g, " is listed twice"));
    seen[g] = true;
  }
  MOBIUS_RETURN_IF_ERROR(NotNegative("node", "host_bytes", node.host_bytes));
  MOBIUS_RETURN_IF_ERROR(NotNegative("node", "pinned_bytes", node.pinned_bytes));
  return absl::OkStatus();
}

absl::Status ValidateJobs(const NodeResources& node, const std::vector<RunningJob>& running,
                          const std::vector<JobRequest>& queued) {
  const int n = static_cast<int>(node.gpus.size());
  std::map<std::string, std::string> ids;  // job id -> where it was seen
  std::vector<std::string> holder(n);
  for (size_t i = 0; i < running.size(); ++i) {
    const RunningJob& r = running[i];
    const std::string path = absl::StrCat("running[", i, "]");
    if (r.job_id.empty()) return FieldError(path, "job_id", "empty");
    if (auto [it, inserted] = ids.emplace(r.job_id, path); !inserted) {
      return FieldError(path, "job_id", absl::StrCat(r.job_id, " is also ", it->second));
    }
    for (int g : r.gpus) {
      if (g < 0 || g >= n) {
        return FieldError(path, "gpus",
                          absl::StrCat(g, " is not a GPU of this node (", n, " GPUs)"), r.job_id);
      }
      if (!holder[g].empty()) {
        return FieldError(path, "gpus", absl::StrCat("GPU ", g, " is also held by ", holder[g]),
                          r.job_id);
      }
      holder[g] = r.job_id;
    }
    MOBIUS_RETURN_IF_ERROR(NotNegative(path, "host_bytes", r.host_bytes, r.job_id));
    MOBIUS_RETURN_IF_ERROR(NotNegative(path, "pinned_bytes", r.pinned_bytes, r.job_id));
  }
  for (size_t i = 0; i < queued.size(); ++i) {
    const std::string path = absl::StrCat("queued[", i, "]");
    MOBIUS_RETURN_IF_ERROR(ValidateJobRequest(queued[i], path));
    if (auto [it, inserted] = ids.emplace(queued[i].job_id, path); !inserted) {
      return FieldError(path, "job_id", absl::StrCat(queued[i].job_id, " is also ", it->second));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateQuotas(const Quotas& quotas) {
  auto check = [](const std::string& path, const UserQuota& q) -> absl::Status {
    MOBIUS_RETURN_IF_ERROR(NotNegative(path, "max_gpus", q.max_gpus));
    MOBIUS_RETURN_IF_ERROR(NotNegative(path, "max_host_bytes", q.max_host_bytes));
    MOBIUS_RETURN_IF_ERROR(NotNegative(path, "max_queued_jobs", q.max_queued_jobs));
    return NotNegative(path, "max_running_jobs", q.max_running_jobs);
  };
  MOBIUS_RETURN_IF_ERROR(check("quotas.defaults", quotas.defaults));
  for (const auto& [uid, q] : quotas.per_uid) {
    MOBIUS_RETURN_IF_ERROR(check(absl::StrCat("quotas.per_uid[", uid, "]"), q));
  }
  return absl::OkStatus();
}

}  // namespace mobius::jobs
