#include "client/generate_command.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/exit_codes.h"
#include "common/subprocess.h"

namespace mobius::cli {
namespace {

// What `mobius-worker generate` prints before its error line (worker/generate/
// generate_command.h; the CLI cannot include the worker's headers).
constexpr absl::string_view kWorkerPrefix = "mobius-worker generate: ";

std::string WorkerBinary(const GenerateOptions& o) {
  if (!o.worker_binary.empty()) return o.worker_binary;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("mobius-worker") : (self.parent_path() / "mobius-worker").string();
}

struct ChildResult {
  int status = 0;                // waitpid's
  std::string error;             // the worker's error line, without its prefix
  std::deque<std::string> tail;  // the last lines of stderr, for a worker that died
};

// Runs the worker to the end, copying its stdout to `out` as it comes.
absl::StatusOr<ChildResult> RunWorker(const std::vector<std::string>& argv, std::ostream& out) {
  SpawnOptions so;
  so.die_with_parent = true;
  absl::StatusOr<SpawnedProcess> spawned = SpawnWithPipes(argv, so);
  if (!spawned.ok()) return spawned.status();
  ChildResult r;
  std::string err_buf;
  auto take_line = [&](std::string line) {
    if (line.empty()) return;
    if (absl::StartsWith(line, kWorkerPrefix)) {
      r.error = line.substr(kWorkerPrefix.size());
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
        out.write(buf, got);
        out.flush();
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

}  // namespace

int RunGenerate(const GenerateOptions& o, std::ostream& out, std::ostream& err) {
  auto usage = [&](const std::string& what) {
    err << "mobius generate: " << what << "\nusage: " << kGenerateUsage << "\n";
    return kExitUsage;
  };
  if (o.args.size() != 1) return usage("expected one MODEL_DIR");
  if (o.prompt.empty() == o.prompt_ids.empty()) {
    return usage("give exactly one of --prompt TEXT and --prompt_ids 1,2,3");
  }
  if (o.max_new_tokens < 1) {
    return usage(absl::StrCat("--max_new_tokens must be >= 1 (got ", o.max_new_tokens, ")"));
  }
  std::vector<std::string> argv = {WorkerBinary(o),
                                   "generate",
                                   o.args[0],
                                   "--max_new_tokens=" + std::to_string(o.max_new_tokens),
                                   absl::StrCat("--temperature=", o.temperature),
                                   absl::StrCat("--top_p=", o.top_p),
                                   absl::StrCat("--seed=", o.seed),
                                   "--backend=" + o.backend,
                                   absl::StrCat("--threads=", o.threads)};
  argv.push_back(o.prompt.empty() ? "--prompt_ids=" + o.prompt_ids : "--prompt=" + o.prompt);
  if (!o.adapter_dir.empty()) argv.push_back("--adapter=" + o.adapter_dir);

  absl::StatusOr<ChildResult> r = RunWorker(argv, out);
  if (!r.ok()) {
    err << "mobius generate: cannot run " << argv[0] << " (" << r.status().message()
        << "); build mobius-worker next to mobius or pass --worker_binary\n";
    return kExitServerError;
  }
  if (WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0) return kExitOk;
  const bool bad_input = WIFEXITED(r->status) && WEXITSTATUS(r->status) == 2;
  std::string message = r->error;
  if (message.empty()) {
    message =
        absl::StrCat("the generate process failed (",
                     WIFSIGNALED(r->status) ? absl::StrCat("killed by signal ", WTERMSIG(r->status))
                                            : absl::StrCat("exit code ", WEXITSTATUS(r->status)),
                     ")", r->tail.empty() ? "" : ": ", absl::StrJoin(r->tail, "\n"));
  }
  err << "mobius generate: " << message << "\n";
  return bad_input ? kExitUsage : kExitServerError;
}

}  // namespace mobius::cli
