#include "common/subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errors.h"

extern char** environ;

namespace mobius {

absl::StatusOr<SpawnedProcess> SpawnWithPipes(const std::vector<std::string>& argv_in,
                                              const std::vector<InheritedFd>& inherit) {
  if (argv_in.empty()) return absl::InvalidArgumentError("spawn: no program");
  for (const InheritedFd& f : inherit) {
    if (f.parent_fd < 0 || f.child_fd < 3) {
      return absl::InvalidArgumentError(absl::StrCat("spawn: cannot pass descriptor ",
                                                     f.parent_fd, " as ", f.child_fd));
    }
  }
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return MOBIUS_ERRNO_ERROR("pipe");
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return MOBIUS_ERRNO_ERROR("pipe");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  // The dup2s run in order in the child, so a source that is some entry's target (itself
  // included: dup2 onto itself would keep close-on-exec) or one of 0-2 (replaced by the pipes
  // first) could be overwritten before it is read: such a descriptor goes through a copy first.
  auto is_target = [&](int fd) {
    for (const InheritedFd& f : inherit) {
      if (f.child_fd == fd) return true;
    }
    return fd <= 2;
  };
  std::vector<int> copies;
  for (const InheritedFd& f : inherit) {
    int from = f.parent_fd;
    if (is_target(from)) {
      from = fcntl(f.parent_fd, F_DUPFD_CLOEXEC, 64);
      if (from < 0) {
        for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
        for (int fd : copies) close(fd);
        posix_spawn_file_actions_destroy(&actions);
        return MOBIUS_ERRNO_ERROR(absl::StrCat("spawn: duplicate descriptor ", f.parent_fd));
      }
      copies.push_back(from);
    }
    posix_spawn_file_actions_adddup2(&actions, from, f.child_fd);
  }
  std::vector<std::string> args = argv_in;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  for (int fd : copies) close(fd);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    close(out[0]);
    close(err[0]);
    errno = rc;
    return MOBIUS_ERRNO_ERROR(absl::StrCat("spawn ", args[0]));
  }
  return SpawnedProcess{pid, out[0], err[0]};
}

}  // namespace mobius
