#include "host/launch/dataset_prep.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/data/chat_template.h"
#include "common/errors.h"
#include "common/inspect/dataset_descriptor.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"

namespace mobius::launch {
namespace {

using json = nlohmann::json;

constexpr int kCacheVersion = 1;

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> DatasetFiles(const jobspec::DatasetSpec& ds) {
  if (!ds.paths.empty()) return ds.paths;
  return {ds.path};
}

data::TokenizeRequest RequestFor(const jobspec::JobSpec& spec, const std::string& output,
                                 int threads) {
  const jobspec::DatasetSpec& ds = spec.dataset;
  data::TokenizeRequest r;
  r.inputs = DatasetFiles(ds);
  r.output = output;
  r.tokenizer = jobspec::TokenizerPath(spec);
  r.eos_source = spec.model_dir;
  r.threads = threads;
  absl::StatusOr<data::DatasetFormat> format = data::ParseDatasetFormat(ds.format);
  r.dataset.format = format.ok() ? *format : data::DatasetFormat::kJsonlText;
  r.dataset.text_field = ds.text_field;
  r.dataset.prompt_field = ds.prompt_field;
  r.dataset.completion_field = ds.completion_field;
  r.dataset.messages_field = ds.messages_field;
  r.dataset.chat_template = ds.chat_template;
  r.dataset.chat_template_kwargs = data::ChatTemplateKwargsJson(ds.chat_template_kwargs);
  r.dataset.skip_bad_lines = ds.skip_bad_lines;
  return r;
}

// Runs `mobius-worker tokenize REQUEST` and returns its summary.
absl::StatusOr<data::TokenizeSummary> RunTokenizer(const DatasetPrepOptions& options,
                                                   const std::string& request_json) {
  MOBIUS_ASSIGN_OR_RETURN(int request_fd, TextDescriptor("mobius-tokenize-request", request_json));
  SpawnOptions so;
  so.inherit = {{request_fd, 3}};
  so.identity = options.identity;
  so.umask = options.umask;
  so.die_with_parent = true;
  absl::StatusOr<SpawnedProcess> spawned =
      SpawnWithPipes({options.worker_binary, "tokenize", "fd:3"}, so);
  close(request_fd);
  if (!spawned.ok()) return spawned.status();
  SpawnedProcess child = *spawned;
  const pid_t pid = child.pid;
  // Read both pipes line by line until they close, polling `interrupted` in between.
  std::string out_text, err_buf, last_error;
  absl::Status interrupted;
  struct pollfd fds[2] = {{child.out_fd, POLLIN, 0}, {child.err_fd, POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (options.interrupted && interrupted.ok()) {
      interrupted = options.interrupted();
      if (!interrupted.ok()) kill(pid, SIGKILL);
    }
    const int n = poll(fds, 2, 100);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[4096];
      const ssize_t got = read(fds[i].fd, buf, sizeof(buf));
      if (got <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      if (i == 0) {
        out_text.append(buf, static_cast<size_t>(got));
        continue;
      }
      err_buf.append(buf, static_cast<size_t>(got));
      size_t eol;
      while ((eol = err_buf.find('\n')) != std::string::npos) {
        std::string line = err_buf.substr(0, eol);
        err_buf.erase(0, eol + 1);
        if (line.empty()) continue;
        if (options.on_log) options.on_log(line);
        last_error = line;
      }
    }
  }
  for (const struct pollfd& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  if (!err_buf.empty()) {
    if (options.on_log) options.on_log(err_buf);
    last_error = err_buf;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!interrupted.ok()) return interrupted;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    const size_t at = out_text.find(data::kTokenizedPrefix);
    if (at == std::string::npos) {
      return absl::InternalError("tokenizer: exited 0 without a summary line");
    }
    const size_t start = at + std::string(data::kTokenizedPrefix).size();
    const size_t end = out_text.find('\n', start);
    return data::TokenizeSummaryFromJson(out_text.substr(start, end - start));
  }
  // The verb's errors start with "mobius-worker tokenize: "; keep the message.
  constexpr absl::string_view kPrefix = "mobius-worker tokenize: ";
  if (absl::StartsWith(last_error, kPrefix)) last_error.erase(0, kPrefix.size());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
    return absl::InvalidArgumentError(last_error);
  }
  const std::string how = WIFSIGNALED(status)
                              ? absl::StrCat("killed by signal ", WTERMSIG(status))
                              : absl::StrCat("exit code ", WEXITSTATUS(status));
  return absl::InternalError(absl::StrCat("dataset: the tokenizer process failed (", how, ")",
                                          last_error.empty() ? "" : ": ", last_error));
}

}  // namespace

absl::StatusOr<data::TokenizeSummary> RunTokenizeProcess(const data::TokenizeRequest& request,
                                                         const DatasetPrepOptions& options) {
  return RunTokenizer(options, data::TokenizeRequestToJson(request));
}

absl::StatusOr<PreparedDataset> PrepareDataset(const jobspec::JobSpec& spec,
                                               const DatasetPrepOptions& options) {
  PreparedDataset out;
  if (!jobspec::IsTextFormat(spec.dataset.format)) {
    out.token_file = spec.dataset.path;
    out.reused = true;
    return out;
  }
  const bool inspected = !options.descriptor.empty();
  std::string descriptor = options.descriptor;
  if (!inspected) {
    MOBIUS_ASSIGN_OR_RETURN(descriptor, inspect::DatasetDescriptor(spec));
  }
  if (!options.identity.has_value()) {  // this process is the user: the cache is its to make
    std::error_code ec;
    std::filesystem::create_directories(options.cache_dir, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("dataset cache ", options.cache_dir, ": ", ec.message()));
    }
    chmod(options.cache_dir.c_str(), 0700);
  }
  const std::string base = inspect::DatasetCacheBase(options.cache_dir, descriptor);
  out.token_file = base + ".tok";
  const std::string cached = inspected ? options.cached_token_file
                                       : inspect::LookUpDatasetCache(options.cache_dir, descriptor);
  if (!cached.empty()) {
    out.token_file = cached;
    out.reused = true;
    return out;
  }
  data::TokenizeRequest request = RequestFor(spec, out.token_file, options.threads);
  request.descriptor = descriptor;
  request.descriptor_file = base + ".json";
  absl::StatusOr<data::TokenizeSummary> summary = RunTokenizeProcess(request, options);
  if (!summary.ok()) return summary.status();
  out.summary = *summary;
  return out;
}

jobspec::JobSpec WithTokenFile(jobspec::JobSpec spec, const std::string& token_file) {
  const double eval_fraction = spec.dataset.eval_fraction;
  spec.dataset = jobspec::DatasetSpec{};
  spec.dataset.path = token_file;
  spec.dataset.eval_fraction = eval_fraction;
  return spec;
}

}  // namespace mobius::launch
