#include "common/run/profile_runner.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/run/profile_cache.h"

extern char** environ;

namespace mobius::planner {

absl::StatusOr<MeasuredProfile> RunWorkerProfile(const WorkerProfileRequest& request) {
  if (::access(request.worker.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("mobius-worker not found (or not executable) at ", request.worker));
  }
  char tmpl[] = "/tmp/mobius-profile-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) return absl::InternalError("cannot create a temporary file in /tmp");
  ::close(fd);
  const std::string out = tmpl;
  std::vector<std::string> args = {request.worker,
                                   "profile",
                                   "--model",
                                   request.model,
                                   absl::StrCat("--microbatch=", request.microbatch),
                                   absl::StrCat("--seq=", request.seq),
                                   "--backend=" + request.backend,
                                   "--out",
                                   out};
  if (!request.cache_dir.empty()) args.push_back("--cache_dir=" + request.cache_dir);
  if (request.precision != "bf16") args.push_back("--precision=" + request.precision);
  args.insert(args.end(), request.extra_args.begin(), request.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  pid_t pid = 0;
  const int rc =
      ::posix_spawn(&pid, request.worker.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    ::unlink(out.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("cannot start ", request.worker, ": ", std::strerror(rc)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    ::unlink(out.c_str());
    return absl::FailedPreconditionError(absl::StrCat(
        request.worker, " profile --backend=", request.backend, " failed (",
        WIFEXITED(status) ? absl::StrCat("exit ", WEXITSTATUS(status)) : "killed by a signal",
        "); its message is above"));
  }
  absl::StatusOr<MeasuredProfile> m = ReadProfileFile(out);
  ::unlink(out.c_str());
  return m;
}

}  // namespace mobius::planner
