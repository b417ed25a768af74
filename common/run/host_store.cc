#include "common/run/host_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/run/store_layout.h"

namespace mobius::runtime {
namespace {

constexpr uint64_t kMagic = 0x65726f7453424d4dULL;  // "MMBStore"

struct Header {
  uint64_t magic;
  uint64_t bytes;
  int32_t creator_pid;
  uint32_t version;
};

// Control word indices below StoreLayout::kFirstStageWord.
constexpr int64_t kAbortWord = 0, kBarrierCount = 1, kBarrierGeneration = 2;

long Futex(std::atomic<uint32_t>* addr, int op, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: the word lives in a mapping shared between processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, value, timeout, nullptr, 0);
}

}  // namespace

// Sizes and maps a freshly created store file (`fd` is closed unless `keep_fd`); the header
// makes it a store.
absl::StatusOr<std::unique_ptr<HostStore>> HostStore::Initialise(int fd, const std::string& path,
                                                                 uint64_t bytes, bool keep_fd) {
  auto fail = [&](absl::Status s) {
    close(fd);
    if (!keep_fd) unlink(path.c_str());
    return s;
  };
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    return fail(MOBIUS_ERRNO_ERROR(absl::StrCat("size store ", path, " to ", bytes, " bytes")));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return fail(MOBIUS_ERRNO_ERROR(absl::StrCat("map store ", path)));
  if (!keep_fd) close(fd);
  auto* h = static_cast<Header*>(p);
  h->bytes = bytes;
  h->creator_pid = getpid();
  h->version = 1;
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
  return std::unique_ptr<HostStore>(
      new HostStore(path, static_cast<uint8_t*>(p), bytes, keep_fd ? fd : -1));
}

absl::StatusOr<std::unique_ptr<HostStore>> HostStore::Create(const std::string& path,
                                                             uint64_t bytes) {
  if (bytes < StoreLayout::kControlOffset + 4096) bytes = StoreLayout::kControlOffset + 4096;
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return absl::AlreadyExistsError(absl::StrCat("store ", path, " exists"));
    return MOBIUS_ERRNO_ERROR(absl::StrCat("create store ", path));
  }
  return Initialise(fd, path, bytes, /*keep_fd=*/false);
}

absl::StatusOr<std::unique_ptr<HostStore>> HostStore::CreateAnonymous(const std::string& name,
                                                                      uint64_t bytes) {
  if (bytes < StoreLayout::kControlOffset + 4096) bytes = StoreLayout::kControlOffset + 4096;
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("memfd_create for store ", name));
  return Initialise(fd, absl::StrCat("memfd:", name), bytes, /*keep_fd=*/true);
}

absl::StatusOr<std::unique_ptr<HostStore>> HostStore::Open(const std::string& path,
                                                           uint64_t expected_bytes) {
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("store ", path, " does not exist"));
    return MOBIUS_ERRNO_ERROR(absl::StrCat("open store ", path));
  }
  absl::StatusOr<std::unique_ptr<HostStore>> store = Map(fd, path, expected_bytes);
  close(fd);
  return store;
}

absl::StatusOr<std::unique_ptr<HostStore>> HostStore::OpenFd(int fd, uint64_t expected_bytes) {
  return Map(fd, absl::StrCat("inherited fd ", fd), expected_bytes);
}

absl::StatusOr<std::unique_ptr<HostStore>> HostStore::Map(int fd, const std::string& path,
                                                          uint64_t expected_bytes) {
  struct stat st;
  if (fstat(fd, &st) != 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("stat store ", path));
  const uint64_t bytes = static_cast<uint64_t>(st.st_size);
  if (bytes < expected_bytes || bytes < sizeof(Header)) {
    return absl::FailedPreconditionError(absl::StrCat("store ", path, " has ", bytes,
                                                      " bytes, the layout needs ", expected_bytes));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return MOBIUS_ERRNO_ERROR(absl::StrCat("map store ", path));
  if (static_cast<Header*>(p)->magic != kMagic) {
    munmap(p, bytes);
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a Mobius host store"));
  }
  return std::unique_ptr<HostStore>(new HostStore(path, static_cast<uint8_t*>(p), bytes, -1));
}

HostStore::~HostStore() {
  munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
}

absl::Status HostStore::Remove() {
  if (fd_ >= 0) return absl::OkStatus();  // anonymous: gone with its last descriptor and mapping
  if (unlink(path_.c_str()) != 0 && errno != ENOENT) {
    return MOBIUS_ERRNO_ERROR(absl::StrCat("remove store ", path_));
  }
  return absl::OkStatus();
}

void HostStore::Populate(uint64_t offset, uint64_t bytes) const {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14; older glibc headers lack the name
#endif
  if (bytes == 0 || offset >= bytes_) return;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t begin = offset & ~(page - 1);
  const uint64_t end = std::min(bytes_, (offset + bytes + page - 1) & ~(page - 1));
  (void)madvise(base_ + begin, end - begin, MADV_POPULATE_WRITE);  // best effort, see the header
}

std::atomic<uint32_t>& HostStore::word(int64_t index) const {
  return *reinterpret_cast<std::atomic<uint32_t>*>(base_ + StoreLayout::kControlOffset +
                                                   4 * static_cast<uint64_t>(index));
}

uint32_t HostStore::Load(int64_t index) const {
  return word(index).load(std::memory_order_acquire);
}

void HostStore::Publish(int64_t index, uint32_t value) {
  word(index).store(value, std::memory_order_release);
  Futex(&word(index), FUTEX_WAKE, INT32_MAX, nullptr);
}

absl::Status HostStore::WaitAtLeast(int64_t index, uint32_t value, absl::Duration timeout) const {
  const absl::Time deadline = timeout == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                                                  : absl::Now() + timeout;
  std::atomic<uint32_t>& w = word(index);
  for (int spin = 0;; ++spin) {
    const uint32_t now = w.load(std::memory_order_acquire);
    if (now >= value) return absl::OkStatus();
    if (const uint32_t code = aborted(); code != 0) {
      return absl::AbortedError(absl::StrCat("the job was aborted (code ", code, ")"));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("control word ", index, " stayed at ", now,
                                                      ", waited for ", value));
    }
    if (spin < 64) continue;
    // Sleep until a Publish wakes us, with a short timeout so the abort word is polled too.
    const timespec ts{0, 20 * 1000 * 1000};
    Futex(&w, FUTEX_WAIT, now, &ts);
  }
}

void HostStore::Abort(uint32_t code) {
  uint32_t expected = 0;
  word(kAbortWord).compare_exchange_strong(expected, code == 0 ? 1 : code);
  Futex(&word(kAbortWord), FUTEX_WAKE, INT32_MAX, nullptr);
}

uint32_t HostStore::aborted() const { return Load(kAbortWord); }

int32_t HostStore::creator_pid() const { return reinterpret_cast<const Header*>(base_)->creator_pid; }

absl::Status HostStore::Barrier(int parties) {
  std::atomic<uint32_t>& count = word(kBarrierCount);
  const uint32_t generation = Load(kBarrierGeneration);
  if (count.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(parties)) {
    count.store(0, std::memory_order_relaxed);
    Publish(kBarrierGeneration, generation + 1);
    return absl::OkStatus();
  }
  return WaitAtLeast(kBarrierGeneration, generation + 1);
}

absl::StatusOr<int> CleanOrphanStores(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return 0;
    return MOBIUS_ERRNO_ERROR(absl::StrCat("list ", dir));
  }
  int removed = 0;
  while (dirent* e = readdir(d)) {
    if (!absl::StartsWith(e->d_name, kStorePrefix)) continue;
    const std::string path = absl::StrCat(dir, "/", e->d_name);
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    Header h{};
    const bool read_ok = pread(fd, &h, sizeof(h), 0) == static_cast<ssize_t>(sizeof(h));
    close(fd);
    // A creator that is gone (ESRCH) leaves an orphan; a half-written header is one too.
    const bool orphan = !read_ok || h.magic != kMagic ||
                        (kill(h.creator_pid, 0) != 0 && errno == ESRCH);
    if (orphan && unlink(path.c_str()) == 0) ++removed;
  }
  closedir(d);
  return removed;
}

std::atomic<uint64_t>* LinkWord(const StoreLayout& layout, const HostStore& store, int link,
                                int index) {
  return store.at<std::atomic<uint64_t>>(layout.link_words + 32 * static_cast<uint64_t>(link) +
                                         8 * static_cast<uint64_t>(index));
}

}  // namespace mobius::runtime
