#include "common/inspect/dataset_descriptor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace mobius::inspect {
namespace {

using json = nlohmann::json;

constexpr int kCacheVersion = 1;

// The identity of a file for the cache key; NOT_FOUND naming `what` when it does not exist.
absl::StatusOr<json> FileIdentity(const std::string& path, const std::string& what) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return MOBIUS_ERRNO_ERROR(absl::StrCat(what, " ", path));
  }
  return json{
      {"path", path},
      {"dev", static_cast<uint64_t>(st.st_dev)},
      {"ino", static_cast<uint64_t>(st.st_ino)},
      {"size", static_cast<int64_t>(st.st_size)},
      {"mtime_ns", static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec}};
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

// A small regular file's text, not following a final symlink; "" when it cannot be read.
std::string ReadSmall(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return "";
  std::string text(1 << 20, '\0');
  size_t got = 0;
  for (ssize_t n; got < text.size() && (n = read(fd, text.data() + got, text.size() - got)) > 0;) {
    got += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(got);
  return text;
}

}  // namespace

absl::StatusOr<std::string> DatasetDescriptor(const jobspec::JobSpec& spec) {
  const jobspec::DatasetSpec& ds = spec.dataset;
  json inputs = json::array();
  for (const std::string& path : DatasetFiles(ds)) {
    MOBIUS_ASSIGN_OR_RETURN(json id, FileIdentity(path, "dataset file"));
    inputs.push_back(std::move(id));
  }
  const std::string tokenizer = jobspec::TokenizerPath(spec);
  json tokenizer_files = json::array();
  if (IsDirectory(tokenizer)) {
    for (const char* name : {"/tokenizer.json", "/tokenizer.model", "/tokenizer_config.json",
                             "/chat_template.jinja"}) {
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
  // A chat dataset may take the model directory's template (when the tokenizer is elsewhere).
  json chat_files = json::array();
  if (ds.format == "chat" && tokenizer != spec.model_dir) {
    for (const char* name : {"/tokenizer_config.json", "/chat_template.jinja"}) {
      if (!IsFile(spec.model_dir + name)) continue;
      MOBIUS_ASSIGN_OR_RETURN(json id, FileIdentity(spec.model_dir + name, "chat template file"));
      chat_files.push_back(std::move(id));
    }
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
            {"chat_template_kwargs", ds.chat_template_kwargs},
            {"chat_template_files", chat_files},
            {"skip_bad_lines", ds.skip_bad_lines}};
  return d.dump();
}

std::string DatasetCacheBase(const std::string& cache_dir, const std::string& descriptor) {
  return absl::StrCat(cache_dir, "/", Fnv1a64Hex(descriptor));
}

std::string LookUpDatasetCache(const std::string& cache_dir, const std::string& descriptor) {
  const std::string base = DatasetCacheBase(cache_dir, descriptor);
  if (ReadSmall(base + ".json") != descriptor || !IsFile(base + ".tok")) return "";
  return base + ".tok";
}

}  // namespace mobius::inspect
