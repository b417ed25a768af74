#include "common/host_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace mobius {
namespace {

std::string GiB(int64_t bytes) { return absl::StrFormat("%.1f GiB", bytes / double(1 << 30)); }

// The first line of a small file, whitespace-trimmed; "" if unreadable.
std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return std::string(absl::StripAsciiWhitespace(line));
}

}  // namespace

int64_t HostMemory::available_bytes() const {
  int64_t available = mem_available_bytes;
  if (cgroup_limit_bytes >= 0) {
    available = std::min(available, std::max<int64_t>(cgroup_limit_bytes - cgroup_usage_bytes, 0));
  }
  return available;
}

int64_t HostMemory::capacity_bytes() const {
  return cgroup_limit_bytes >= 0 ? std::min(mem_total_bytes, cgroup_limit_bytes) : mem_total_bytes;
}

std::string HostMemory::Describe() const {
  std::string s = absl::StrCat(GiB(available_bytes()), " available (MemAvailable ",
                               GiB(mem_available_bytes),
                               " of ", GiB(mem_total_bytes));
  if (cgroup_limit_bytes >= 0) {
    absl::StrAppend(&s, "; cgroup ", cgroup, " limit ", GiB(cgroup_limit_bytes), ", ",
                    GiB(cgroup_usage_bytes), " used");
  }
  return s + ")";
}

absl::StatusOr<HostMemory> ReadHostMemory(const std::string& proc_dir,
                                          const std::string& cgroup_root) {
  HostMemory m;
  const std::string meminfo = proc_dir + "/meminfo";
  std::ifstream in(meminfo);
  if (!in) return absl::InternalError(absl::StrCat("cannot read ", meminfo));
  bool have_available = false;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    int64_t kb = 0;
    if (!(fields >> key >> kb)) continue;
    if (key == "MemTotal:") m.mem_total_bytes = kb * 1024;
    if (key == "MemAvailable:") {
      m.mem_available_bytes = kb * 1024;
      have_available = true;
    }
  }
  if (!have_available) return absl::InternalError(absl::StrCat(meminfo, " has no MemAvailable"));
  // cgroup v2: a single "0::/path" line.
  std::ifstream cg(proc_dir + "/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string own = line.substr(3);
    // The limit that binds may sit on an ancestor (a Slurm job's cgroup above its step's): the
    // tightest room among the cgroup and its ancestors (the root has no memory.max).
    for (std::string dir = own; !dir.empty() && dir != "/"; dir = dir.substr(0, dir.rfind('/'))) {
      const std::string max = FirstLine(cgroup_root + dir + "/memory.max");
      int64_t limit = 0, usage = 0;
      if (max.empty() || max == "max" || !absl::SimpleAtoi(max, &limit) ||
          !absl::SimpleAtoi(FirstLine(cgroup_root + dir + "/memory.current"), &usage)) {
        continue;
      }
      if (m.cgroup_limit_bytes < 0 || limit - usage < m.cgroup_limit_bytes - m.cgroup_usage_bytes) {
        m.cgroup = dir;
        m.cgroup_limit_bytes = limit;
        m.cgroup_usage_bytes = usage;
      }
    }
    if (m.cgroup.empty()) m.cgroup = own;
  }
  return m;
}

}  // namespace mobius
