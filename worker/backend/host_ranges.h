// HostRanges: the bookkeeping behind Backend::RegisterHost / UnregisterHost that every backend
// shares: registered host ranges by start address, overlaps refused, the total counted. The CPU
// backend keeps only this; CudaBackend pins (cudaHostRegister) after Check and records with Add.
//
// Thread-compatible: the owning backend serialises calls under its own mutex.
#ifndef MOBIUS_WORKER_BACKEND_HOST_RANGES_H_
#define MOBIUS_WORKER_BACKEND_HOST_RANGES_H_

#include <cstdint>
#include <map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mobius::backend {

class HostRanges {
 public:
  // INVALID_ARGUMENT for null/0, ALREADY_EXISTS if [ptr, ptr + bytes) overlaps a range (the
  // messages are backend.h's RegisterHost errors). Changes nothing.
  absl::Status Check(const void* ptr, uint64_t bytes) const;
  // Records a range that passed Check.
  void Add(const void* ptr, uint64_t bytes);
  // Removes the range starting at `ptr` and returns its size; NOT_FOUND if none starts there.
  absl::StatusOr<uint64_t> Remove(const void* ptr);
  uint64_t total_bytes() const { return total_; }
  // Calls f(ptr, bytes) for every range (a backend's destructor unpins them).
  template <typename F>
  void ForEach(F f) const {
    for (const auto& [start, bytes] : ranges_) f(reinterpret_cast<void*>(start), bytes);
  }

 private:
  std::map<uintptr_t, uint64_t> ranges_;  // start -> bytes
  uint64_t total_ = 0;
};

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_HOST_RANGES_H_
