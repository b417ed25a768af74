// SafetensorsFile: a read-only private mapping of the whole file, validated by ParseSafetensors
// before any view escapes.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "worker/io/safetensors.h"
#include "worker/io/safetensors_internal.h"

namespace mobius::io {
namespace {

class Mapping {
 public:
  Mapping(void* base, size_t size) : base_(base), size_(size) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (base_ != nullptr) munmap(base_, size_);
  }
  const uint8_t* data() const { return static_cast<const uint8_t*>(base_); }
  size_t size() const { return size_; }

 private:
  void* base_;
  size_t size_;
};

class MappedSafetensorsFile final : public SafetensorsFile {
 public:
  MappedSafetensorsFile(std::unique_ptr<Mapping> mapping, internal::ParsedSafetensors parsed)
      : mapping_(std::move(mapping)), parsed_(std::move(parsed)) {
    for (size_t i = 0; i < parsed_.tensors.size(); ++i) by_name_[parsed_.tensors[i].name] = i;
  }
  const std::vector<TensorView>& tensors() const override { return parsed_.tensors; }
  const TensorView* Find(const std::string& name) const override {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &parsed_.tensors[it->second];
  }
  const std::map<std::string, std::string>& metadata() const override { return parsed_.metadata; }

 private:
  std::unique_ptr<Mapping> mapping_;  // the views in parsed_ point into it
  internal::ParsedSafetensors parsed_;
  std::unordered_map<std::string, size_t> by_name_;
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// The whole pages covering a tensor's bytes (views may start anywhere in a page).
void AdvisePages(const TensorView& tensor, int advice) {
  if (tensor.data == nullptr || tensor.nbytes == 0) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(tensor.data) & ~(page - 1);
  const uintptr_t end =
      (reinterpret_cast<uintptr_t>(tensor.data) + tensor.nbytes + page - 1) & ~(page - 1);
  // Advice only: a failure (e.g. a view that is not file-backed) changes nothing the caller reads.
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

}  // namespace

// The mapping is private and read-only, so dropping its page-table entries loses nothing: a later
// read faults the page in again from the page cache.
void WillNeed(const TensorView& tensor) { AdvisePages(tensor, MADV_WILLNEED); }
void Release(const TensorView& tensor) { AdvisePages(tensor, MADV_DONTNEED); }

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  const std::string source = absl::StrCat("safetensors file ", path);
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return MOBIUS_ERRNO_ERROR(source);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return MOBIUS_ERRNO_ERROR(source);
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(source + ": not a regular file");
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    // Parse reports it; mmap of 0 bytes would fail with a less helpful EINVAL.
    const uint8_t empty[8] = {};
    return internal::ParseSafetensors(empty, size, source).status();
  }
  void* base = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (base == MAP_FAILED) return MOBIUS_ERRNO_ERROR(absl::StrCat(source, ": mmap"));
  auto mapping = std::make_unique<Mapping>(base, size);
  MOBIUS_ASSIGN_OR_RETURN(internal::ParsedSafetensors parsed,
                          internal::ParseSafetensors(mapping->data(), mapping->size(), source));
  return std::unique_ptr<SafetensorsFile>(
      new MappedSafetensorsFile(std::move(mapping), std::move(parsed)));
}

}  // namespace mobius::io
