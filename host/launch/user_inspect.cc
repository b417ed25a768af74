#include "host/launch/user_inspect.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace mobius::launch {

absl::StatusOr<inspect::InspectResult> InspectAsUser(const inspect::InspectRequest& request,
                                                     const UserInspectOptions& options) {
  MOBIUS_ASSIGN_OR_RETURN(int request_fd, TextDescriptor("mobius-inspect-request",
                                                         inspect::InspectRequestToJson(request)));
  SpawnOptions so;
  so.inherit = {{request_fd, 3}};
  so.identity = options.identity;
  so.umask = 077;
  so.die_with_parent = true;
  absl::StatusOr<SpawnedProcess> child = SpawnWithPipes({options.binary, "fd:3"}, so);
  close(request_fd);
  if (!child.ok()) {
    return absl::InternalError(
        absl::StrCat("checking the job's files: ", child.status().message()));
  }
  std::string out, err;
  pollfd fds[2] = {{child->out_fd, POLLIN, 0}, {child->err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&out, &err};
  const absl::Time deadline = absl::Now() + options.timeout;
  int open_fds = 2;
  bool timed_out = false;
  while (open_fds > 0) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) {
      timed_out = true;
      kill(child->pid, SIGKILL);
      break;
    }
    const int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(left_ms, 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[16384];
      const ssize_t got = read(fds[i].fd, buf, sizeof(buf));
      if (got > 0 && sinks[i]->size() < (8u << 20)) sinks[i]->append(buf, static_cast<size_t>(got));
      if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int status = 0;
  while (waitpid(child->pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(
        "checking the job's files took more than ", absl::FormatDuration(options.timeout),
        " (a file system that does not answer?); the check was stopped"));
  }
  absl::StatusOr<inspect::InspectResult> result = inspect::InspectResultFromJson(out);
  if (!result.ok()) {
    while (!err.empty() && err.back() == '\n') err.pop_back();
    const size_t last = err.rfind('\n');
    return absl::InternalError(
        absl::StrCat("checking the job's files: the check process (", options.binary, ") ",
                     WIFSIGNALED(status) ? absl::StrCat("was killed by signal ", WTERMSIG(status))
                                         : absl::StrCat("exited with code ", WEXITSTATUS(status)),
                     " without a result", err.empty() ? "" : ": ",
                     last == std::string::npos ? err : err.substr(last + 1)));
  }
  return result;
}

}  // namespace mobius::launch
