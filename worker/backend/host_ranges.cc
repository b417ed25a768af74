#include "worker/backend/host_ranges.h"

#include <iterator>

#include "absl/strings/str_cat.h"

namespace mobius::backend {

absl::Status HostRanges::Check(const void* ptr, uint64_t bytes) const {
  if (ptr == nullptr || bytes == 0) {
    return absl::InvalidArgumentError("RegisterHost: null pointer or zero bytes");
  }
  const auto start = reinterpret_cast<uintptr_t>(ptr);
  auto next = ranges_.lower_bound(start);
  bool overlaps = next != ranges_.end() && next->first < start + bytes;
  if (next != ranges_.begin()) {
    auto prev = std::prev(next);
    overlaps = overlaps || prev->first + prev->second > start;
  }
  if (overlaps) {
    return absl::AlreadyExistsError(absl::StrCat("RegisterHost: [", absl::Hex(start), ", +", bytes,
                                                 ") overlaps a registered range"));
  }
  return absl::OkStatus();
}

void HostRanges::Add(const void* ptr, uint64_t bytes) {
  ranges_.emplace(reinterpret_cast<uintptr_t>(ptr), bytes);
  total_ += bytes;
}

absl::StatusOr<uint64_t> HostRanges::Remove(const void* ptr) {
  auto it = ranges_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == ranges_.end()) {
    return absl::NotFoundError(absl::StrCat("UnregisterHost: ", absl::Hex(ptr),
                                            " is not the start of a registered range"));
  }
  const uint64_t bytes = it->second;
  total_ -= bytes;
  ranges_.erase(it);
  return bytes;
}

}  // namespace mobius::backend
