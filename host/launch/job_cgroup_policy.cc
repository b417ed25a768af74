// The parts of job_cgroup.h that decide rather than touch cgroupfs: the memory limit policy, the
// per-job limits, cgroup names, OOM descriptions, the startup log line and the daemon's setup.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "host/launch/job_cgroup.h"

namespace mobius::launch {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr size_t kMaxIdChars = 64;

std::string GiB(int64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / static_cast<double>(kGiB));
}

bool CgroupNameChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == '-' || c == '.'; }

uint32_t Fnv1a(absl::string_view text) {
  uint32_t h = 2166136261u;
  for (unsigned char c : text) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

}  // namespace

int64_t JobMemoryLimit(int64_t host_estimate_bytes) {
  if (host_estimate_bytes <= 0) return 0;
  const int64_t margin = std::max(host_estimate_bytes / 4, kGiB);
  if (host_estimate_bytes > std::numeric_limits<int64_t>::max() - margin) return 0;  // no limit
  return host_estimate_bytes + margin;
}

JobLimits JobLimitsFor(const CgroupSupport& support, int64_t host_estimate_bytes, int workers,
                       std::optional<std::vector<uint32_t>> gpu_minors) {
  JobLimits limits;
  limits.memory_max_bytes = JobMemoryLimit(host_estimate_bytes);
  if (support.cpu) limits.cpu_weight = 100 * std::clamp(workers, 1, 100);
  if (support.devices) limits.gpu_minors = std::move(gpu_minors);
  return limits;
}

std::string JobCgroupName(absl::string_view job_id) {
  std::string clean(job_id);
  bool changed = false;
  for (char& c : clean) {
    if (!CgroupNameChar(c)) {
      c = '_';
      changed = true;
    }
  }
  if (!changed && clean.size() <= kMaxIdChars) return absl::StrCat("job-", clean);
  clean.resize(std::min(clean.size(), kMaxIdChars));
  return absl::StrCat("job-", clean, "-", absl::Hex(Fnv1a(job_id), absl::kZeroPad8));
}

std::string DescribeOomKill(const JobCgroupStats& stats) {
  if (!stats.oom_killed()) return "";
  std::string numbers =
      absl::StrCat("memory.max ", stats.memory_max_bytes < 0 ? "max" : GiB(stats.memory_max_bytes));
  if (stats.memory_peak_bytes >= 0) {
    absl::StrAppend(&numbers, ", peak ", GiB(stats.memory_peak_bytes));
  }
  if (stats.oom > 0) {
    return absl::StrCat("the job was killed by its cgroup's memory limit (", numbers,
                        "): it needed more host memory than its estimate plus the margin");
  }
  return absl::StrCat("the job was killed by the kernel's OOM killer, not at its own limit (",
                      numbers, "): the machine, or mobiusd's own cgroup, ran out of memory");
}

std::string CgroupSupport::Describe() const {
  std::vector<std::string> features = {"memory"};
  if (cpu) features.push_back("cpu");
  if (swap) features.push_back("swap limit");
  if (kill) features.push_back("cgroup.kill");
  if (peak) features.push_back("memory.peak");
  std::string out = absl::StrCat("root ", root, " (daemon in ", daemon_leaf, ", ", moved_processes,
                                 moved_processes == 1 ? " process" : " processes", " moved); ",
                                 absl::StrJoin(features, ", "));
  if (!cpu) absl::StrAppend(&out, "; cpu.weight: off (", cpu_off, ")");
  absl::StrAppend(
      &out, "; GPU device filter: ", devices ? "on" : absl::StrCat("off (", devices_off, ")"));
  return out;
}

absl::StatusOr<JobCgroupMode> ParseJobCgroupMode(absl::string_view value) {
  if (value == "auto") return JobCgroupMode::kAuto;
  if (value == "off") return JobCgroupMode::kOff;
  if (value == "required") return JobCgroupMode::kRequired;
  return absl::InvalidArgumentError(
      absl::StrCat("--job_cgroups must be auto, off or required, got \"", value, "\""));
}

absl::StatusOr<std::unique_ptr<JobCgroupRoot>> SetUpJobCgroups(JobCgroupMode mode,
                                                               JobCgroupOptions options) {
  if (mode == JobCgroupMode::kOff) {
    LOG(INFO) << "cgroup v2 isolation off (--job_cgroups=off)";
    return std::unique_ptr<JobCgroupRoot>();
  }
  absl::StatusOr<std::unique_ptr<JobCgroupRoot>> root = JobCgroupRoot::Detect(std::move(options));
  if (!root.ok()) {
    if (mode == JobCgroupMode::kRequired) {
      return absl::Status(root.status().code(),
                          absl::StrCat("--job_cgroups=required: ", root.status().message()));
    }
    LOG(WARNING) << "cgroup v2 isolation off: " << root.status().message()
                 << "; jobs run without memory.max";
    return std::unique_ptr<JobCgroupRoot>();
  }
  absl::StatusOr<int> leftovers = (*root)->RemoveLeftovers();
  if (!leftovers.ok()) {
    LOG(WARNING) << "job cgroups left by an earlier daemon: " << leftovers.status();
  } else if (*leftovers > 0) {
    LOG(INFO) << "removed " << *leftovers << " job cgroup(s) left by an earlier daemon";
  }
  LOG(INFO) << "cgroup v2 isolation on: " << (*root)->support().Describe();
  return root;
}

}  // namespace mobius::launch
