#include "worker/checkpoint/tensor_set_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "worker/checkpoint/tensor_files.h"

namespace mobius::checkpoint {
namespace {

absl::Status PWriteAll(int fd, const void* data, uint64_t bytes, uint64_t offset,
                       const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n =
        pwrite(fd, p, std::min<uint64_t>(bytes, uint64_t{1} << 30), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("write ", path));
    p += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TensorSetWriter>> TensorSetWriter::Create(
    const std::string& dir, const std::string& base, const std::vector<Tensor>& tensors,
    int64_t max_shard_bytes) {
  TensorShapes order;
  std::vector<io::DType> dtypes;
  std::map<std::string, const Tensor*> by_name;
  for (const Tensor& t : tensors) {
    for (int64_t d : t.shape) {
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat(t.name, ": negative dimension"));
    }
    order.emplace_back(t.name, t.shape);
    dtypes.push_back(t.dtype);
    by_name[t.name] = &t;
  }
  const TensorSetPlan plan = PlanTensorSet(base, order, dtypes, max_shard_bytes);
  std::unique_ptr<TensorSetWriter> w(new TensorSetWriter());
  w->dir_ = dir;
  w->index_file_ = plan.index_file;
  w->index_json_ = plan.index_json;
  for (const TensorSetShard& shard : plan.shards) {
    std::vector<io::TensorToWrite> entries;
    for (const auto& [name, shape] : shard.tensors) {
      const Tensor& t = *by_name.at(name);
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      entries.push_back(
          {name, t.dtype, shape, nullptr, static_cast<size_t>(n) * io::DTypeSize(t.dtype)});
    }
    const std::string path = dir + "/" + shard.file;
    MOBIUS_ASSIGN_OR_RETURN(io::SafetensorsLayout layout,
                            io::PlanSafetensors(entries, {{"format", "pt"}}));
    const int file = static_cast<int>(w->files_.size());
    for (const io::TensorToWrite& e : entries) {
      if (w->places_.contains(e.name)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": tensor ", e.name, " given twice"));
      }
      w->places_[e.name] = {file, layout.offsets.at(e.name), e.nbytes, 0};
    }
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("create ", path));
    w->files_.push_back(shard.file);
    w->fds_.push_back(fd);
    MOBIUS_RETURN_IF_ERROR(PWriteAll(fd, layout.header.data(), layout.header.size(), 0, path));
    if (ftruncate(fd, static_cast<off_t>(layout.file_bytes)) != 0) {
      return MOBIUS_ERRNO_ERROR(absl::StrCat("size ", path, " to ", layout.file_bytes, " bytes"));
    }
  }
  return w;
}

TensorSetWriter::~TensorSetWriter() {
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

absl::Status TensorSetWriter::Write(const std::string& name, uint64_t offset, const void* data,
                                    uint64_t bytes) {
  auto it = places_.find(name);
  if (it == places_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor set in ", dir_, ": no tensor ", name));
  }
  Place& p = it->second;
  if (offset > p.bytes || bytes > p.bytes - offset) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, ": bytes [", offset, ", ",
                                                   offset + bytes, ") past its end (", p.bytes,
                                                   " bytes)"));
  }
  if (fds_[p.file] < 0) {
    return absl::FailedPreconditionError(absl::StrCat("tensor ", name, ": set already finished"));
  }
  MOBIUS_RETURN_IF_ERROR(
      PWriteAll(fds_[p.file], data, bytes, p.offset + offset, dir_ + "/" + files_[p.file]));
  p.written += bytes;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> TensorSetWriter::Finish() {
  for (const auto& [name, p] : places_) {
    if (p.written != p.bytes) {
      return absl::FailedPreconditionError(
          absl::StrCat("tensor ", name, ": ", p.written, " of ", p.bytes, " bytes written"));
    }
  }
  for (size_t i = 0; i < fds_.size(); ++i) {
    const std::string path = dir_ + "/" + files_[i];
    const int rc = fsync(fds_[i]);
    const int saved = errno;
    close(fds_[i]);
    fds_[i] = -1;
    if (rc != 0) return ErrnoError(saved, absl::StrCat("fsync ", path), __FILE__, __LINE__);
  }
  std::vector<std::string> files = files_;
  if (!index_file_.empty()) {
    MOBIUS_RETURN_IF_ERROR(WriteFileAtomically(dir_ + "/" + index_file_, index_json_));
    files.push_back(index_file_);
  }
  return files;
}

}  // namespace mobius::checkpoint
