// How much memory this machine can give a job now: the kernel's MemAvailable (/proc/meminfo) and,
// when the process runs in a cgroup (v2) with a memory limit (a container, a Slurm job, a systemd
// unit's MemoryMax), that limit less what the cgroup already uses; the smaller of the two. The
// daemon caps its host budget by it, `mobius run` and the launcher refuse a job that would not fit,
// so an emulated server's topology (which may claim 1.5 TB) never decides alone.
//
// Thread-safety: pure functions of the file system.
#ifndef MOBIUS_COMMON_HOST_MEMORY_H_
#define MOBIUS_COMMON_HOST_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace mobius {

struct HostMemory {
  int64_t mem_total_bytes = 0;
  int64_t mem_available_bytes = 0;
  // The cgroup (v2) whose limit binds: the process's own or the ancestor with the least room
  // (limit - usage); the process's own when none has a limit; "" without cgroup v2.
  std::string cgroup;
  int64_t cgroup_limit_bytes = -1;   // its memory.max; -1: no limit ("max" everywhere) or no cgroup
  int64_t cgroup_usage_bytes = 0;    // its memory.current

  // min(MemAvailable, cgroup limit - usage): what a job can have now.
  int64_t available_bytes() const;
  // min(MemTotal, cgroup limit): what the machine has at all, whatever runs at the moment (a
  // daemon's budget; MemAvailable right after another job's processes died can be far lower
  // while the kernel still frees their memory).
  int64_t capacity_bytes() const;
  // "21.3 GiB available (MemAvailable 21.3 GiB of 23.5 GiB)", or with a limit
  // "3.0 GiB available (MemAvailable 9.8 GiB of 16.0 GiB; cgroup /a limit 4.0 GiB, 1.0 GiB used)".
  std::string Describe() const;
};

// Reads `proc_dir`/meminfo, `proc_dir`/self/cgroup and the cgroup's memory.max and memory.current
// under `cgroup_root`. The directories are parameters so tests can point them at fixtures.
// INTERNAL naming the file when /proc/meminfo cannot be read or has no MemAvailable; a missing or
// unreadable cgroup is no limit.
absl::StatusOr<HostMemory> ReadHostMemory(const std::string& proc_dir = "/proc",
                                          const std::string& cgroup_root = "/sys/fs/cgroup");

}  // namespace mobius

#endif  // MOBIUS_COMMON_HOST_MEMORY_H_
