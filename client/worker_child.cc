#include "client/worker_child.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/exit_codes.h"
#include "common/subprocess.h"

namespace mobius::cli {

std::string WorkerBinaryNextToSelf(const std::string& given) {
  if (!given.empty()) return given;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("mobius-worker") : (self.parent_path() / "mobius-worker").string();
}

absl::StatusOr<WorkerChildResult> RunWorkerChild(
    const std::vector<std::string>& argv, absl::string_view prefix,
    const std::function<void(absl::string_view)>& on_stdout,
    const std::function<void(const std::string&)>& on_warning) {
  constexpr absl::string_view kWarningPrefix = "warning: ";
  SpawnOptions so;
  so.die_with_parent = true;
  absl::StatusOr<SpawnedProcess> spawned = SpawnWithPipes(argv, so);
  if (!spawned.ok()) return spawned.status();
  WorkerChildResult r;
  std::string err_buf;
  auto take_line = [&](std::string line) {
    if (line.empty()) return;
    if (absl::StartsWith(line, prefix)) {
      line.erase(0, prefix.size());
      if (absl::StartsWith(line, kWarningPrefix)) {
        on_warning(line);
      } else {
        r.error = line;
      }
      return;
    }
    r.tail.push_back(line);
    if (r.tail.size() > 5) r.tail.pop_front();
  };
  struct pollfd fds[2] = {{spawned->out_fd, POLLIN, 0}, {spawned->err_fd, POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[4096];
      const ssize_t got = read(fds[i].fd, buf, sizeof(buf));
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      if (i == 0) {
        on_stdout(absl::string_view(buf, static_cast<size_t>(got)));
        continue;
      }
      err_buf.append(buf, static_cast<size_t>(got));
      for (size_t eol; (eol = err_buf.find('\n')) != std::string::npos;) {
        take_line(err_buf.substr(0, eol));
        err_buf.erase(0, eol + 1);
      }
    }
  }
  for (const struct pollfd& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  take_line(err_buf);
  while (waitpid(spawned->pid, &r.status, 0) < 0 && errno == EINTR) {
  }
  return r;
}

int FinishWorkerChild(const WorkerChildResult& r, absl::string_view verb, absl::string_view what,
                      std::ostream& err) {
  if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) return kExitOk;
  const bool bad_input = WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2;
  std::string message = r.error;
  if (message.empty()) {
    message = absl::StrCat(what, " failed (",
                           WIFSIGNALED(r.status) ? absl::StrCat("killed by signal ", WTERMSIG(r.status))
                                                 : absl::StrCat("exit code ", WEXITSTATUS(r.status)),
                           ")", r.tail.empty() ? "" : ": ", absl::StrJoin(r.tail, "\n"));
  }
  err << "mobius " << verb << ": " << message << "\n";
  return bad_input ? kExitUsage : kExitServerError;
}

}  // namespace mobius::cli
