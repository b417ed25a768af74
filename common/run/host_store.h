// HostStore: one job's shared host model store, mapped by the launcher and by every worker of the
// job (layout: store_layout.h). It holds the model (bf16 upload copy, fp32 master, Adam moments,
// gradient accumulators), the activations crossing stage boundaries (host-staged transport) and
// the control words the workers synchronise on.
//
// Synchronisation. Control words are uint32 step counters in shared memory: a producer Publish()es
// `value` (release store + FUTEX_WAKE), a consumer WaitAtLeast()s it (acquire load, FUTEX_WAIT on the
// shared mapping). Every wait also watches the abort word, which the launcher or any failing worker
// sets, so no worker blocks forever on a dead peer: waits return ABORTED once it is set.
//
// Lifetime. The launcher creates the store as an anonymous memory file (CreateAnonymous:
// memfd_create, no name in any file system, so neither /dev/shm's size limit nor another user's
// file can get in the way) and hands its descriptor to the workers (OpenFd); it is freed when the
// last process holding it exits, whatever the way. A store can also be a named file (Create /
// Open, mode 0600, O_EXCL); CleanOrphanStores() removes such files of launchers that are gone.
// Pages are first touched by the worker that owns the stage (NUMA first-touch policy puts them on
// that worker's node).
//
// Thread-safety: all methods may be called from any thread; the data regions are coordinated by the
// protocol above (pipeline_worker.h), not by this class.
#ifndef MOBIUS_COMMON_RUN_HOST_STORE_H_
#define MOBIUS_COMMON_RUN_HOST_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mobius::runtime {

struct StoreLayout;

inline constexpr char kStorePrefix[] = "mobius-store-";

class HostStore {
 public:
  // Creates `path` of `bytes` (sparse until touched) and maps it. ALREADY_EXISTS if present.
  static absl::StatusOr<std::unique_ptr<HostStore>> Create(const std::string& path, uint64_t bytes);
  // An anonymous store (memfd_create(name)); fd() is its descriptor (close-on-exec: a spawner
  // passes it on explicitly). path() is "memfd:<name>".
  static absl::StatusOr<std::unique_ptr<HostStore>> CreateAnonymous(const std::string& name,
                                                                    uint64_t bytes);
  // Maps an existing store; FAILED_PRECONDITION if it is not one (bad magic) or smaller than
  // `expected_bytes`.
  static absl::StatusOr<std::unique_ptr<HostStore>> Open(const std::string& path,
                                                         uint64_t expected_bytes);
  // The same for a descriptor this process inherited (not closed: the caller owns it).
  static absl::StatusOr<std::unique_ptr<HostStore>> OpenFd(int fd, uint64_t expected_bytes);
  ~HostStore();  // unmaps (does not remove a named file); closes an anonymous store's descriptor

  // Unlinks a named file (the mapping stays valid until destruction). OK if already gone, and for
  // an anonymous store (nothing to remove).
  absl::Status Remove();
  int fd() const { return fd_; }  // an anonymous store's descriptor; -1 for a named file

  uint8_t* base() const { return base_; }
  int32_t creator_pid() const;  // the launcher's pid (in the header)
  uint64_t size_bytes() const { return bytes_; }
  const std::string& path() const { return path_; }
  template <typename T>
  T* at(uint64_t offset) const { return reinterpret_cast<T*>(base_ + offset); }

  // Allocates and maps the pages of [offset, offset + bytes) now, in one call
  // (MADV_POPULATE_WRITE), rather than one page fault at a time as they are first written: a
  // worker filling its share of the store calls it first (on its NUMA node). Best effort: a kernel
  // without it (before 5.14) leaves the pages to fault in as usual.
  void Populate(uint64_t offset, uint64_t bytes) const;

  // ---- control words (indices as StoreLayout::*_word) ----
  std::atomic<uint32_t>& word(int64_t index) const;
  uint32_t Load(int64_t index) const;
  void Publish(int64_t index, uint32_t value);  // release store + wake all waiters
  // Blocks until word(index) >= value. ABORTED when the abort word is set (with its reason
  // code), DEADLINE_EXCEEDED after `timeout`.
  absl::Status WaitAtLeast(int64_t index, uint32_t value,
                           absl::Duration timeout = absl::InfiniteDuration()) const;

  // Sets the abort word (first caller's code wins) and wakes every waiter.
  void Abort(uint32_t code);
  uint32_t aborted() const;  // 0: not aborted

  // A reusable barrier over `parties` processes (generation-counted). ABORTED as WaitAtLeast.
  absl::Status Barrier(int parties);

 private:
  HostStore(std::string path, uint8_t* base, uint64_t bytes, int fd)
      : path_(std::move(path)), base_(base), bytes_(bytes), fd_(fd) {}
  static absl::StatusOr<std::unique_ptr<HostStore>> Initialise(int fd, const std::string& path,
                                                               uint64_t bytes, bool keep_fd);
  static absl::StatusOr<std::unique_ptr<HostStore>> Map(int fd, const std::string& path,
                                                        uint64_t expected_bytes);
  std::string path_;
  uint8_t* base_;
  uint64_t bytes_;
  int fd_;  // anonymous stores only
};

// The link words of emulated link `link` (StoreLayout::link_words): 4 uint64 each, [0] and [1] the
// link emulator's "free at" times per direction (worker/runtime/link_emulator.h), [2] and [3] the
// bytes that crossed it host->device and device->host, all ranks. LinkWord(.., 2 + d) is what the
// launcher reports per link at the end of a run.
std::atomic<uint64_t>* LinkWord(const StoreLayout& layout, const HostStore& store, int link,
                                int index);

// Removes `dir`/mobius-store-* files whose creating process no longer exists. Returns how many.
absl::StatusOr<int> CleanOrphanStores(const std::string& dir);

}  // namespace mobius::runtime

#endif  // MOBIUS_COMMON_RUN_HOST_STORE_H_
