// Starting a child process whose stdout and stderr the caller reads through pipes: the shared
// part of the launcher's workers (host/launch/launcher.h), the dataset tokenizer
// (host/launch/dataset_prep.h) and the daemon's checks of a job's files (host/launch/
// user_inspect.h).
//
// A child may run as another user (SpawnOptions::identity): between fork and exec it sets the
// supplementary groups, the gid and the uid (real, effective and saved), so no capability is left
// (the kernel clears them when every uid leaves 0), sets PR_SET_NO_NEW_PRIVS (no setuid binary
// or file capability can raise it again), and only then PR_SET_PDEATHSIG (a credential change
// clears it). The child gets /dev/null as stdin and no descriptor of the parent's but the pipes
// and `inherit`, whatever their close-on-exec flags.
//
// Thread-safety: SpawnWithPipes may be called from any thread: everything is prepared before
// fork, and the child makes only async-signal-safe system calls until exec. Failures in the child
// before exec (a groups, uid or exec error) are reported by the call, not by the exit status.
#ifndef MOBIUS_COMMON_SUBPROCESS_H_
#define MOBIUS_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/os/identity.h"

namespace mobius {

struct SpawnedProcess {
  pid_t pid = -1;
  int out_fd = -1;  // read end of the child's stdout (the caller closes it)
  int err_fd = -1;  // read end of the child's stderr (the caller closes it)
};

// A descriptor of this process (`parent_fd`, close-on-exec or not) that the child gets as
// `child_fd` (>= 3).
struct InheritedFd {
  int parent_fd = -1;
  int child_fd = -1;
};

struct SpawnOptions {
  std::vector<InheritedFd> inherit;
  // Run the child as this user (CheckCanActAs must allow it); unset: as this process. HOME,
  // USER and LOGNAME are then the user's.
  std::optional<Identity> identity;
  // The child's umask (e.g. 077: what it creates is its user's alone); -1: inherited.
  int umask = -1;
  // A descriptor of a cgroup's cgroup.procs file: the child moves itself there before it drops
  // its privileges (so the move is allowed) and before exec (so all it allocates is counted).
  int cgroup_procs_fd = -1;
  // The child gets SIGKILL when the spawning thread's process dies (PR_SET_PDEATHSIG).
  bool die_with_parent = false;
  // Extra environment entries ("NAME=value"), replacing those of the same name.
  std::vector<std::string> env;
};

// Starts argv[0] (a path) with `argv` and this process's environment (plus options.env). Errors
// name the binary: NOT_FOUND when it does not exist, PERMISSION_DENIED when it is not executable
// (for the child's user) or the identity switch is not allowed, INTERNAL for other failures.
absl::StatusOr<SpawnedProcess> SpawnWithPipes(const std::vector<std::string>& argv,
                                              const SpawnOptions& options);
inline absl::StatusOr<SpawnedProcess> SpawnWithPipes(const std::vector<std::string>& argv,
                                                     std::vector<InheritedFd> inherit = {}) {
  SpawnOptions options;
  options.inherit = std::move(inherit);
  return SpawnWithPipes(argv, options);
}

// A sealed anonymous memory file holding `text`, positioned at 0 (close-on-exec; the caller closes
// it): how a request or a run config reaches a child (`fd:N` arguments, ReadArgumentText) without
// a file another user could read or replace.
absl::StatusOr<int> TextDescriptor(const std::string& name, const std::string& text);

// The text an argument names: "fd:N" reads descriptor N from its start to the end (then closes
// it; a seekable one with pread, so processes sharing it do not move each other's offset),
// anything else is a file path. Errors name the argument.
absl::StatusOr<std::string> ReadArgumentText(const std::string& arg);

}  // namespace mobius

#endif  // MOBIUS_COMMON_SUBPROCESS_H_
