#include "worker/backend/device_arena.h"

#include <algorithm>
#include <iterator>

namespace mobius::backend {

DeviceArena::DeviceArena(uint64_t capacity, uint64_t alignment)
    : capacity_(capacity & ~(alignment - 1)), alignment_(alignment) {
  if (capacity_ > 0) free_[0] = capacity_;
}

bool DeviceArena::Allocate(uint64_t bytes, uint64_t* offset) {
  if (bytes == 0 || bytes > capacity_) return false;
  const uint64_t size = (bytes + alignment_ - 1) & ~(alignment_ - 1);
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second >= size && (best == free_.end() || it->second < best->second)) best = it;
  }
  if (best == free_.end()) return false;
  const uint64_t at = best->first, have = best->second;
  free_.erase(best);
  if (have > size) free_[at + size] = have - size;
  live_[at] = size;
  used_ += size;
  peak_ = std::max(peak_, used_);
  *offset = at;
  return true;
}

bool DeviceArena::Free(uint64_t offset) {
  auto live = live_.find(offset);
  if (live == live_.end()) return false;
  uint64_t at = offset, size = live->second;
  live_.erase(live);
  used_ -= size;
  auto next = free_.lower_bound(at);
  if (next != free_.end() && next->first == at + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == at) {
      at = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[at] = size;
  return true;
}

uint64_t DeviceArena::largest_free() const {
  uint64_t best = 0;
  for (const auto& [at, size] : free_) best = std::max(best, size);
  return best;
}

}  // namespace mobius::backend
