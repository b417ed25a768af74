// WriteSafetensors: header layout as the reference writer's, written to a temp file in the same
// directory and renamed into place, so readers see the old file or the complete new one.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "worker/io/safetensors.h"

namespace mobius::io {
namespace {

using OrderedJson = nlohmann::ordered_json;

absl::Status CheckTensor(const TensorToWrite& t) {
  const std::string label = absl::StrCat("WriteSafetensors: tensor \"", t.name, "\"");
  if (t.name == "__metadata__") {
    return absl::InvalidArgumentError(absl::StrCat(label, ": the name is reserved"));
  }
  uint64_t nbytes = DTypeSize(t.dtype);
  bool overflow = false;
  for (int64_t d : t.shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat(label, ": negative dimension"));
    overflow = overflow || __builtin_mul_overflow(nbytes, static_cast<uint64_t>(d), &nbytes);
  }
  if (overflow || nbytes != t.nbytes) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: nbytes %d != shape [%s] x %d bytes",
                                                      label, t.nbytes, absl::StrJoin(t.shape, ", "),
                                                      DTypeSize(t.dtype)));
  }
  if (t.nbytes > 0 && t.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": data is null"));
  }
  return absl::OkStatus();
}

// The 8-byte length and the header, padded with spaces to a multiple of 8 bytes so that the data
// section starts aligned. `sorted` is in name order and gets contiguous data_offsets.
absl::StatusOr<std::string> BuildHeader(const std::vector<const TensorToWrite*>& sorted,
                                        const std::map<std::string, std::string>& metadata) {
  OrderedJson header = OrderedJson::object();
  if (!metadata.empty()) {
    OrderedJson meta = OrderedJson::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const TensorToWrite* t : sorted) {
    OrderedJson entry = OrderedJson::object();
    entry["dtype"] = DTypeName(t->dtype);
    entry["shape"] = t->shape;
    entry["data_offsets"] = {offset, offset + t->nbytes};
    offset += t->nbytes;
    header[t->name] = std::move(entry);
  }
  std::string text;
  try {  // dump() throws on strings that are not UTF-8; keep exceptions inside this module
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("WriteSafetensors: tensor names and metadata must be UTF-8: ", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

absl::Status WriteAll(int fd, const void* data, size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, p, std::min<size_t>(size, size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("writing ", path));
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("opening directory ", dir));
  absl::Status status;
  if (fsync(fd) != 0) status = MOBIUS_ERRNO_ERROR(absl::StrCat("fsync of directory ", dir));
  close(fd);
  return status;
}

// Writes everything to `tmp` and makes it durable; the caller removes `tmp` on failure.
absl::Status WriteTemp(const std::string& tmp, const std::string& header,
                       const std::vector<const TensorToWrite*>& sorted) {
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("creating ", tmp));
  absl::Status status = WriteAll(fd, header.data(), header.size(), tmp);
  for (size_t i = 0; status.ok() && i < sorted.size(); ++i) {
    status = WriteAll(fd, sorted[i]->data, sorted[i]->nbytes, tmp);
  }
  if (status.ok() && fsync(fd) != 0) status = MOBIUS_ERRNO_ERROR(absl::StrCat("fsync of ", tmp));
  if (close(fd) != 0 && status.ok()) status = MOBIUS_ERRNO_ERROR(absl::StrCat("closing ", tmp));
  return status;
}

// The tensors checked and in name order (the file's data order), duplicates refused.
absl::StatusOr<std::vector<const TensorToWrite*>> SortedTensors(
    const std::vector<TensorToWrite>& tensors, bool require_data) {
  std::vector<const TensorToWrite*> sorted;
  sorted.reserve(tensors.size());
  for (const TensorToWrite& t : tensors) {
    if (require_data || t.data != nullptr) {
      MOBIUS_RETURN_IF_ERROR(CheckTensor(t));
    } else {
      TensorToWrite probe = t;
      probe.data = "";  // only the data pointer may be absent when planning
      MOBIUS_RETURN_IF_ERROR(CheckTensor(probe));
    }
    sorted.push_back(&t);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorToWrite* a, const TensorToWrite* b) { return a->name < b->name; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i]->name == sorted[i - 1]->name) {
      return absl::InvalidArgumentError(
          absl::StrCat("WriteSafetensors: duplicate tensor name \"", sorted[i]->name, "\""));
    }
  }
  return sorted;
}

}  // namespace

absl::StatusOr<SafetensorsLayout> PlanSafetensors(
    const std::vector<TensorToWrite>& tensors, const std::map<std::string, std::string>& metadata) {
  MOBIUS_ASSIGN_OR_RETURN(std::vector<const TensorToWrite*> sorted,
                          SortedTensors(tensors, /*require_data=*/false));
  SafetensorsLayout layout;
  MOBIUS_ASSIGN_OR_RETURN(layout.header, BuildHeader(sorted, metadata));
  layout.file_bytes = layout.header.size();
  for (const TensorToWrite* t : sorted) {
    layout.offsets[t->name] = layout.file_bytes;
    layout.file_bytes += t->nbytes;
  }
  return layout;
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  MOBIUS_ASSIGN_OR_RETURN(std::vector<const TensorToWrite*> sorted,
                          SortedTensors(tensors, /*require_data=*/true));
  MOBIUS_ASSIGN_OR_RETURN(std::string header, BuildHeader(sorted, metadata));

  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  absl::Status status = WriteTemp(tmp, header, sorted);
  if (status.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    status = MOBIUS_ERRNO_ERROR(absl::StrCat("renaming ", tmp, " to ", path));
  }
  if (!status.ok()) {
    unlink(tmp.c_str());  // may not exist (creation failed); nothing else to do on error here
    return status;
  }
  return SyncDirectory(DirectoryOf(path));
}

}  // namespace mobius::io
