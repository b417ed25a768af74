// Starting a child process whose stdout and stderr the caller reads through pipes: the shared
// part of the launcher's workers (server/launch/launcher.h) and the dataset tokenizer
// (server/launch/dataset_prep.h).
//
// Thread-safety: SpawnWithPipes may be called from any thread (posix_spawn; the pipes are
// close-on-exec in the parent, so concurrent spawns do not leak each other's ends).
#ifndef MOBIUS_COMMON_SUBPROCESS_H_
#define MOBIUS_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

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

// posix_spawn of argv[0] (a path) with `argv` and this process's environment; besides stdin and
// the two pipes the child inherits only `inherit` (and descriptors of the caller's that are not
// close-on-exec). Errors name the binary: NOT_FOUND when it does not exist, PERMISSION_DENIED
// when it is not executable.
absl::StatusOr<SpawnedProcess> SpawnWithPipes(const std::vector<std::string>& argv,
                                              const std::vector<InheritedFd>& inherit = {});

}  // namespace mobius

#endif  // MOBIUS_COMMON_SUBPROCESS_H_
