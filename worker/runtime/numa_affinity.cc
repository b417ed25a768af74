#include "worker/runtime/numa_affinity.h"

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/errors.h"

namespace mobius::runtime {

std::vector<int> UsableCpus(const std::vector<int>& node_cpus, const std::vector<int>& allowed) {
  const std::set<int> ok(allowed.begin(), allowed.end());
  std::set<int> out;
  for (int c : node_cpus) {
    if (ok.count(c) > 0) out.insert(c);
  }
  return {out.begin(), out.end()};
}

absl::StatusOr<std::vector<int>> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return MOBIUS_ERRNO_ERROR("sched_getaffinity");
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

absl::Status PinAllThreads(const std::vector<int>& cpus) {
  if (cpus.empty()) return absl::InvalidArgumentError("pinning to an empty CPU set");
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(absl::StrCat("CPU ", c, " is out of range"));
    }
    CPU_SET(c, &set);
  }
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return MOBIUS_ERRNO_ERROR("/proc/self/task");
  absl::Status status;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
    if (sched_setaffinity(tid, sizeof(set), &set) != 0 && errno != ESRCH && status.ok()) {
      status = MOBIUS_ERRNO_ERROR(absl::StrCat("sched_setaffinity(thread ", tid, ")"));
    }
  }
  closedir(dir);
  return status;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    absl::StrAppend(&out, out.empty() ? "" : ",", cpus[i]);
    if (j > i) absl::StrAppend(&out, "-", cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace mobius::runtime
