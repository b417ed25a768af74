// The operating-system seam of job_cgroup.h: the handful of file, directory and process calls it
// makes on cgroupfs, behind an interface so tests can stand a fake cgroup tree (a temp directory
// whose "kernel" is the fake) in for the real one. RealCgroupFs makes the system calls.
//
// cgroupfs is not a regular file system, and the contract is the kernel's:
//   - MakeDir creates a cgroup: the kernel fills the directory with its interface files
//     (cgroup.procs, memory.max, ... for the controllers the parent enables);
//   - WriteFile is one write(2) of the whole text to an existing file (no O_CREAT, no O_TRUNC):
//     each write is one command ("+memory", "1", a pid), and its errno is the kernel's answer;
//   - RemoveDir removes an empty cgroup (EBUSY while it has processes or child cgroups).
// All paths are absolute. Errors are errno statuses naming the path (common/errors.h, through
// CgroupFsError), with one change to absl's table: EBUSY, which absl makes FAILED_PRECONDITION,
// is UNAVAILABLE here. It is the one errno callers act on (a cgroup still busy: retry the rmdir;
// a process in the way of cgroup.subtree_control: move it and retry), and a retryable condition.
//
// Thread-safety: RealCgroupFs is stateless and thread-safe; fakes say what they offer.
#ifndef MOBIUS_HOST_LAUNCH_CGROUP_FS_H_
#define MOBIUS_HOST_LAUNCH_CGROUP_FS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "host/launch/cgroup_device_filter.h"

namespace mobius::launch {

// ErrnoError(error_number, what, file, line), EBUSY as UNAVAILABLE (see above). For CgroupFs
// implementations, fakes included.
absl::Status CgroupFsError(int error_number, absl::string_view what, const char* file, int line);
#define MOBIUS_CGROUP_FS_ERROR(what) \
  ::mobius::launch::CgroupFsError(errno, (what), __FILE__, __LINE__)

class CgroupFs {
 public:
  virtual ~CgroupFs() = default;

  // The whole file (interface files are small; /proc/self/mountinfo too).
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;
  virtual absl::Status WriteFile(const std::string& path, absl::string_view text) = 0;
  // open(path, O_WRONLY | O_CLOEXEC); the caller owns (and closes) the descriptor.
  virtual absl::StatusOr<int> OpenForWrite(const std::string& path) = 0;
  // access(path, W_OK): EACCES for another owner's file, EROFS on a read-only mount.
  virtual absl::Status CheckWritable(const std::string& path) = 0;
  virtual bool Exists(const std::string& path) = 0;
  virtual absl::Status MakeDir(const std::string& path) = 0;
  virtual absl::Status RemoveDir(const std::string& path) = 0;
  // The names of `path`'s subdirectories (its child cgroups), in no particular order.
  virtual absl::StatusOr<std::vector<std::string>> ListDirs(const std::string& path) = 0;
  // kill(pid, signal); NOT_FOUND (ESRCH) when the process is gone.
  virtual absl::Status Kill(pid_t pid, int signal) = 0;
  // cgroup_device_filter.h's ProbeDeviceFilter, and AttachDeviceFilter to the cgroup at `path`.
  virtual absl::Status ProbeDeviceFilter() = 0;
  virtual absl::Status AttachDeviceFilter(const std::string& path, const DeviceDenyRule& rule) = 0;
};

class RealCgroupFs : public CgroupFs {
 public:
  absl::StatusOr<std::string> ReadFile(const std::string& path) override;
  absl::Status WriteFile(const std::string& path, absl::string_view text) override;
  absl::StatusOr<int> OpenForWrite(const std::string& path) override;
  absl::Status CheckWritable(const std::string& path) override;
  bool Exists(const std::string& path) override;
  absl::Status MakeDir(const std::string& path) override;
  absl::Status RemoveDir(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> ListDirs(const std::string& path) override;
  absl::Status Kill(pid_t pid, int signal) override;
  absl::Status ProbeDeviceFilter() override;
  absl::Status AttachDeviceFilter(const std::string& path, const DeviceDenyRule& rule) override;
};

}  // namespace mobius::launch

#endif  // MOBIUS_HOST_LAUNCH_CGROUP_FS_H_
