#include "client/export_command.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/exit_codes.h"
#include "common/subprocess.h"

namespace mobius::cli {
namespace {

// What `mobius-worker merge-adapter` prints (worker/checkpoint/merge_adapter_command.h; the CLI
// cannot include the worker's headers).
constexpr absl::string_view kWorkerPrefix = "mobius-worker merge-adapter: ";
constexpr absl::string_view kWarningPrefix = "warning: ";
constexpr absl::string_view kMergedPrefix = "@merged ";

std::string WorkerBinary(const ExportOptions& o) {
  if (!o.worker_binary.empty()) return o.worker_binary;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("mobius-worker") : (self.parent_path() / "mobius-worker").string();
}

struct ChildResult {
  int status = 0;                // waitpid's
  std::string out;               // all of stdout
  std::string error;             // the worker's error line, without its prefix
  std::deque<std::string> tail;  // the last lines of stderr, for a worker that died
};

// Runs the worker to the end, relaying its warnings to `err` as they come.
absl::StatusOr<ChildResult> RunWorker(const std::vector<std::string>& argv, std::ostream& err) {
  SpawnOptions so;
  so.die_with_parent = true;
  absl::StatusOr<SpawnedProcess> spawned = SpawnWithPipes(argv, so);
  if (!spawned.ok()) return spawned.status();
  ChildResult r;
  std::string err_buf;
  auto take_line = [&](std::string line) {
    if (line.empty()) return;
    if (absl::StartsWith(line, kWorkerPrefix)) {
      line.erase(0, kWorkerPrefix.size());
      if (absl::StartsWith(line, kWarningPrefix)) {
        err << "mobius export: " << line << "\n";
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
        r.out.append(buf, static_cast<size_t>(got));
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

// "merged ADAPTER into BASE: ..." from the worker's summary line.
std::string Summary(const std::string& adapter, const std::string& out_dir,
                    const std::string& worker_out) {
  const size_t at = worker_out.find(std::string(kMergedPrefix));
  if (at == std::string::npos) return absl::StrCat("merged ", adapter, " -> ", out_dir);
  const size_t start = at + kMergedPrefix.size();
  const nlohmann::json j = nlohmann::json::parse(
      worker_out.substr(start, worker_out.find('\n', start) - start), nullptr, false);
  if (!j.is_object()) return absl::StrCat("merged ", adapter, " -> ", out_dir);
  std::vector<std::string> files;
  for (const auto& f : j.value("files", nlohmann::json::array())) {
    if (f.is_string()) files.push_back(f.get<std::string>());
  }
  return absl::StrCat("merged ", adapter, " into ", j.value("base", std::string("?")), ": ",
                      j.value("merged_modules", 0), " adapted weights (scaling ",
                      j.value("scaling", 0.0), "), ", j.value("tensors", 0), " tensors, dtype ",
                      j.value("dtype", std::string("?")), "\nwrote ", out_dir, ": ",
                      absl::StrJoin(files, ", "));
}

}  // namespace

int RunExport(const ExportOptions& o, std::ostream& out, std::ostream& err) {
  auto usage = [&](const std::string& what) {
    err << "mobius export: " << what << "\nusage: " << kExportUsage << "\n";
    return kExitUsage;
  };
  if (!o.merge) return usage("say what to export: --merge (a LoRA adapter merged into its base)");
  if (o.args.size() != 2) return usage("expected ADAPTER_DIR and OUT");
  if (o.dtype != "bf16" && o.dtype != "fp32" && o.dtype != "auto") {
    return usage(absl::StrCat("--dtype must be bf16, fp32 or auto (got \"", o.dtype, "\")"));
  }
  const std::string& adapter = o.args[0];
  const std::string& out_dir = o.args[1];
  std::vector<std::string> argv = {WorkerBinary(o), "merge-adapter", "--adapter=" + adapter,
                                   "--out=" + out_dir, "--dtype=" + o.dtype};
  if (!o.base_dir.empty()) argv.push_back("--base=" + o.base_dir);

  absl::StatusOr<ChildResult> r = RunWorker(argv, err);
  if (!r.ok()) {
    err << "mobius export: cannot run " << argv[0] << " (" << r.status().message()
        << "); build mobius-worker next to mobius or pass --worker_binary\n";
    return kExitServerError;
  }
  if (WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0) {
    out << Summary(adapter, out_dir, r->out) << "\n";
    return kExitOk;
  }
  const bool bad_input = WIFEXITED(r->status) && WEXITSTATUS(r->status) == 2;
  std::string message = r->error;
  if (message.empty()) {
    message =
        absl::StrCat("the merge process failed (",
                     WIFSIGNALED(r->status) ? absl::StrCat("killed by signal ", WTERMSIG(r->status))
                                            : absl::StrCat("exit code ", WEXITSTATUS(r->status)),
                     ")", r->tail.empty() ? "" : ": ", absl::StrJoin(r->tail, "\n"));
  }
  err << "mobius export: " << message << "\n";
  return bad_input ? kExitUsage : kExitServerError;
}

}  // namespace mobius::cli
