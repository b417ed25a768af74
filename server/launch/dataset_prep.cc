#include "server/launch/dataset_prep.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"

namespace mobius::launch {
namespace {

using json = nlohmann::json;

constexpr int kCacheVersion = 1;

// The identity of a file for the cache key; NOT_FOUND naming `what` when it does not exist.
absl::StatusOr<json> FileIdentity(const std::string& path, const std::string& what) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return MOBIUS_ERRNO_ERROR(absl::StrCat(what, " ", path));
  }
  return json{{"path", path},
              {"dev", static_cast<uint64_t>(st.st_dev)},
              {"ino", static_cast<uint64_t>(st.st_ino)},
              {"size", static_cast<int64_t>(st.st_size)},
              {"mtime_ns", static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 +
                               st.st_mtim.tv_nsec}};
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> DatasetFiles(const jobspec::DatasetSpec& ds) {
  if (!ds.paths.empty()) return ds.paths;
  return {ds.path};
}

std::string Fnv1a64Hex(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrFormat("%016x", h);
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) return absl::NotFoundError(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes `text` to `path` atomically (temp file + rename).
absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  static std::atomic<int> counter{0};
  const std::string tmp = absl::StrCat(path, ".tmp-", getpid(), "-", counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out.good()) return MOBIUS_ERRNO_ERROR(absl::StrCat("writing ", tmp));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const absl::Status s = MOBIUS_ERRNO_ERROR(absl::StrCat("renaming ", tmp));
    unlink(tmp.c_str());
    return s;
  }
  return absl::OkStatus();
}

data::TokenizeRequest RequestFor(const jobspec::JobSpec& spec, const std::string& output,
                                 int threads) {
  const jobspec::DatasetSpec& ds = spec.dataset;
  data::TokenizeRequest r;
  r.inputs = DatasetFiles(ds);
  r.output = output;
  r.tokenizer = ds.tokenizer.empty() ? spec.model_dir : ds.tokenizer;
  r.eos_source = spec.model_dir;
  r.threads = threads;
  absl::StatusOr<data::DatasetFormat> format = data::ParseDatasetFormat(ds.format);
  r.dataset.format = format.ok() ? *format : data::DatasetFormat::kJsonlText;
  r.dataset.text_field = ds.text_field;
  r.dataset.prompt_field = ds.prompt_field;
  r.dataset.completion_field = ds.completion_field;
  r.dataset.messages_field = ds.messages_field;
  r.dataset.chat_template = ds.chat_template;
  r.dataset.skip_bad_lines = ds.skip_bad_lines;
  return r;
}

// Runs `mobius-worker tokenize REQUEST` and returns its summary.
absl::StatusOr<data::TokenizeSummary> RunTokenizer(const DatasetPrepOptions& options,
                                                   const std::string& request_path) {
  MOBIUS_ASSIGN_OR_RETURN(
      SpawnedProcess child, SpawnWithPipes({options.worker_binary, "tokenize", request_path}));
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

absl::StatusOr<std::string> DatasetDescriptor(const jobspec::JobSpec& spec) {
  const jobspec::DatasetSpec& ds = spec.dataset;
  json inputs = json::array();
  for (const std::string& path : DatasetFiles(ds)) {
    MOBIUS_ASSIGN_OR_RETURN(json id, FileIdentity(path, "dataset file"));
    inputs.push_back(std::move(id));
  }
  const std::string tokenizer = ds.tokenizer.empty() ? spec.model_dir : ds.tokenizer;
  json tokenizer_files = json::array();
  if (IsDirectory(tokenizer)) {
    for (const char* name : {"/tokenizer.json", "/tokenizer.model", "/tokenizer_config.json"}) {
      if (!IsFile(tokenizer + name)) continue;
      MOBIUS_ASSIGN_OR_RETURN(json id, FileIdentity(tokenizer + name, "tokenizer file"));
      tokenizer_files.push_back(std::move(id));
    }
  } else {
    MOBIUS_ASSIGN_OR_RETURN(json id, FileIdentity(tokenizer, "tokenizer file"));
    tokenizer_files.push_back(std::move(id));
  }
  json model_config = nullptr;
  if (IsFile(spec.model_dir + "/config.json")) {
    MOBIUS_ASSIGN_OR_RETURN(model_config,
                            FileIdentity(spec.model_dir + "/config.json", "model config"));
  }
  json d = {{"version", kCacheVersion},
            {"inputs", inputs},
            {"tokenizer", tokenizer_files},
            {"model_config", model_config},
            {"format", ds.format},
            {"text_field", ds.text_field},
            {"prompt_field", ds.prompt_field},
            {"completion_field", ds.completion_field},
            {"messages_field", ds.messages_field},
            {"chat_template", ds.chat_template},
            {"skip_bad_lines", ds.skip_bad_lines}};
  return d.dump();
}

absl::StatusOr<data::TokenizeSummary> RunTokenizeProcess(const data::TokenizeRequest& request,
                                                         const DatasetPrepOptions& options) {
  static std::atomic<int> counter{0};
  const std::string request_path =
      absl::StrCat(request.output, ".request-", getpid(), "-", counter++, ".json");
  MOBIUS_RETURN_IF_ERROR(
      WriteFileAtomically(request_path, data::TokenizeRequestToJson(request)));
  absl::StatusOr<data::TokenizeSummary> summary = RunTokenizer(options, request_path);
  unlink(request_path.c_str());
  return summary;
}

absl::StatusOr<PreparedDataset> PrepareDataset(const jobspec::JobSpec& spec,
                                               const DatasetPrepOptions& options) {
  PreparedDataset out;
  if (!jobspec::IsTextFormat(spec.dataset.format)) {
    out.token_file = spec.dataset.path;
    out.reused = true;
    return out;
  }
  MOBIUS_ASSIGN_OR_RETURN(std::string descriptor, DatasetDescriptor(spec));
  std::error_code ec;
  std::filesystem::create_directories(options.cache_dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("dataset cache ", options.cache_dir, ": ", ec.message()));
  }
  chmod(options.cache_dir.c_str(), 0700);
  const std::string base = absl::StrCat(options.cache_dir, "/", Fnv1a64Hex(descriptor));
  out.token_file = base + ".tok";
  absl::StatusOr<std::string> cached = ReadSmallFile(base + ".json");
  if (cached.ok() && *cached == descriptor && IsFile(out.token_file)) {
    out.reused = true;
    return out;
  }
  absl::StatusOr<data::TokenizeSummary> summary =
      RunTokenizeProcess(RequestFor(spec, out.token_file, options.threads), options);
  if (!summary.ok()) return summary.status();
  out.summary = *summary;
  MOBIUS_RETURN_IF_ERROR(WriteFileAtomically(base + ".json", descriptor));
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
