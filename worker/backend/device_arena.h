// DeviceArena: the bookkeeping of one device-memory region allocated once (CudaBackend reserves
// its whole cap with a single cudaMalloc at creation, so the hot path never calls cudaMalloc or
// cudaFree). Pure offset arithmetic over [0, capacity): no CUDA, no Abseil, so it is unit-tested
// on any machine and part of the CUDA-only subset.
//
// Allocation is best fit over the free blocks (smallest block that fits; lowest offset among
// equals), every block aligned to `alignment` bytes (256: cuBLASLt's and the vector kernels'
// requirement); Free coalesces with both neighbours, so after every allocation is freed the arena
// is one free block again. A request that does not fit returns false and changes nothing; the
// caller reports RESOURCE_EXHAUSTED with used/capacity and the largest free block (fragmentation is
// visible in the message).
//
// Thread-compatible: the owner serialises calls.
#ifndef MOBIUS_WORKER_BACKEND_DEVICE_ARENA_H_
#define MOBIUS_WORKER_BACKEND_DEVICE_ARENA_H_

#include <cstdint>
#include <map>

namespace mobius::backend {

class DeviceArena {
 public:
  // REQUIRES: alignment is a power of two.
  explicit DeviceArena(uint64_t capacity, uint64_t alignment = 256);

  // On success sets *offset (a multiple of alignment) and returns true. bytes == 0 is not
  // allocated (returns false; callers hand out empty buffers for it).
  bool Allocate(uint64_t bytes, uint64_t* offset);
  // REQUIRES: `offset` was returned by Allocate and not freed since. Returns false (and changes
  // nothing) for an offset that is not a live allocation.
  bool Free(uint64_t offset);

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_; }       // bytes of live allocations (rounded up)
  uint64_t peak() const { return peak_; }
  uint64_t largest_free() const;
  int live_allocations() const { return static_cast<int>(live_.size()); }
  int free_blocks() const { return static_cast<int>(free_.size()); }

 private:
  uint64_t capacity_, alignment_;
  uint64_t used_ = 0, peak_ = 0;
  std::map<uint64_t, uint64_t> free_;  // offset -> size
  std::map<uint64_t, uint64_t> live_;  // offset -> size (rounded up)
};

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_DEVICE_ARENA_H_
