#include "host/scheduler/fits.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "host/scheduler/reason_format.h"
#include "host/scheduler/validate.h"

namespace mobius::jobs {
namespace {

std::string GpuCount(int n) { return absl::StrCat(n, n == 1 ? " GPU" : " GPUs"); }

// The GPU part of the reason, or "" when the allow-list can hold the job.
std::string GpuShortfall(const NodeResources& node, const JobRequest& request) {
  const int need = std::max(request.gpus, 1);
  const std::string needs =
      request.gpus == 0 ? std::string("needs at least 1 GPU") : "needs " + GpuCount(need);
  const int usable = static_cast<int>(node.allowed_gpus.size());
  if (usable == 0) {
    return absl::StrCat(needs, ", the node has no usable GPU",
                        node.gpus.empty() ? "" : " (the GPU allow-list is empty)");
  }
  if (need > usable) {
    std::vector<int> allowed = node.allowed_gpus;
    std::sort(allowed.begin(), allowed.end());
    return absl::StrCat(needs, ", the node has ", usable, " usable (", FormatGpus(allowed), ")");
  }
  int with_memory = 0;
  int64_t largest = 0;
  for (int g : node.allowed_gpus) {
    if (HasMemoryFor(node.gpus[g], request.per_gpu_bytes)) ++with_memory;
    largest = std::max(largest, node.gpus[g].memory_bytes);
  }
  if (with_memory >= need) return "";
  return absl::StrCat(
      "needs ", FormatSize(request.per_gpu_bytes), " of GPU memory on each of ", GpuCount(need),
      ", but only ", with_memory, " of the ", usable, " usable GPUs have that much",
      with_memory == 0 ? absl::StrCat(" (the largest has ", FormatSize(largest), ")") : "");
}

}  // namespace

bool HasMemoryFor(const GpuResource& gpu, int64_t per_gpu_bytes) {
  return gpu.memory_bytes == 0 || gpu.memory_bytes >= per_gpu_bytes;
}

std::optional<std::string> NeverFitsReason(const NodeResources& node, const JobRequest& request) {
  std::vector<std::string> parts;
  if (std::string gpus = GpuShortfall(node, request); !gpus.empty()) parts.push_back(gpus);
  if (request.host_bytes > node.host_bytes) {
    parts.push_back(absl::StrCat("host memory: needs ", FormatSize(request.host_bytes),
                                 ", the node has ", FormatSize(node.host_bytes), " for jobs"));
  }
  if (request.pinned_bytes > node.pinned_bytes) {
    parts.push_back(absl::StrCat("pinned memory: needs ", FormatSize(request.pinned_bytes),
                                 ", the node's budget is ", FormatSize(node.pinned_bytes)));
  }
  if (parts.empty()) return std::nullopt;
  return absl::StrJoin(parts, "; ");
}

absl::Status CheckFits(const NodeResources& node, const JobRequest& request) {
  MOBIUS_RETURN_IF_ERROR(ValidateNode(node));
  MOBIUS_RETURN_IF_ERROR(ValidateJobRequest(request));
  std::optional<std::string> reason = NeverFitsReason(node, request);
  if (!reason.has_value()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("job ", request.job_id, " can never run on this node: ", *reason));
}

}  // namespace mobius::jobs
