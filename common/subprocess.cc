#include "common/subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errors.h"

extern char** environ;

namespace mobius {

absl::StatusOr<SpawnedProcess> SpawnWithPipes(const std::vector<std::string>& argv_in) {
  if (argv_in.empty()) return absl::InvalidArgumentError("spawn: no program");
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
  std::vector<std::string> args = argv_in;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
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
