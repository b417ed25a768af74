// SafetensorsModel: one model.safetensors, or the shards named by model.safetensors.index.json.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "worker/io/safetensors.h"
#include "worker/io/safetensors_internal.h"

namespace mobius::io {
namespace {

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

class ShardedModel final : public SafetensorsModel {
 public:
  const TensorView* Find(const std::string& name) const override {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    out.reserve(by_name.size());
    for (const auto& [name, view] : by_name) out.push_back(name);
    return out;
  }

  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, const TensorView*> by_name;  // views owned by `files`
};

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, uint64_t limit) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MOBIUS_ERRNO_ERROR(path);
  std::string out;
  absl::Status status;
  char buffer[1 << 16];
  while (status.ok()) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = MOBIUS_ERRNO_ERROR(path);
    } else if (n == 0) {
      break;
    } else if (out.size() + static_cast<size_t>(n) > limit) {
      status = absl::InvalidArgumentError(
          absl::StrFormat("%s: larger than the limit of %d bytes", path, limit));
    } else {
      out.append(buffer, static_cast<size_t>(n));
    }
  }
  close(fd);
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<std::unique_ptr<SafetensorsModel>> OpenSingle(const std::string& path) {
  auto model = std::make_unique<ShardedModel>();
  MOBIUS_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(path));
  for (const TensorView& t : file->tensors()) model->by_name[t.name] = &t;
  model->files.push_back(std::move(file));
  return std::unique_ptr<SafetensorsModel>(std::move(model));
}

absl::StatusOr<std::unique_ptr<SafetensorsModel>> OpenSharded(const std::string& directory,
                                                              const std::string& index_path) {
  const std::string source = absl::StrCat("safetensors index ", index_path);
  MOBIUS_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(index_path, internal::kMaxIndexBytes));
  MOBIUS_ASSIGN_OR_RETURN(auto weight_map, internal::ParseShardIndex(text, source));
  auto model = std::make_unique<ShardedModel>();
  std::map<std::string, const SafetensorsFile*> shards;
  for (const auto& [name, shard] : weight_map) {
    auto it = shards.find(shard);
    if (it == shards.end()) {
      const std::string shard_path = absl::StrCat(directory, "/", shard);
      if (!Exists(shard_path) && errno == ENOENT) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": tensor \"", name, "\" is in shard \"", shard, "\", which does not exist"));
      }
      MOBIUS_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(shard_path));
      it = shards.emplace(shard, file.get()).first;
      model->files.push_back(std::move(file));
    }
    const TensorView* view = it->second->Find(name);
    if (view == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": tensor \"", name, "\" is not in its shard \"", shard, "\""));
    }
    model->by_name[name] = view;
  }
  return std::unique_ptr<SafetensorsModel>(std::move(model));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsModel>> SafetensorsModel::Open(
    const std::string& directory) {
  struct stat st;
  if (stat(directory.c_str(), &st) != 0) {
    return MOBIUS_ERRNO_ERROR(absl::StrCat("model directory ", directory));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model directory ", directory, ": not a directory"));
  }
  const std::string single = absl::StrCat(directory, "/", kSingleFile);
  if (Exists(single)) return OpenSingle(single);
  const std::string index = absl::StrCat(directory, "/", kIndexFile);
  if (Exists(index)) return OpenSharded(directory, index);
  return absl::NotFoundError(absl::StrCat("model directory ", directory, " has neither ",
                                          kSingleFile, " nor ", kIndexFile));
}

}  // namespace mobius::io
