// Owning handles for backend memory: DeviceBuffer (device memory counted against the cap) and
// HostBuffer (pinned host memory). Both are move-only RAII handles, like std::unique_ptr: the
// destructor (or Reset()) hands the memory back to the backend that made it.
//
// Only backends create non-empty handles (through the BufferOwner they implement); everybody else
// gets them from Backend::Allocate / Backend::AllocateHost. A handle must not outlive its backend.
//
// Thread-safety: a handle is not synchronized; the owner's ReleaseBuffer must be thread-safe.
#ifndef MOBIUS_WORKER_BACKEND_BUFFERS_H_
#define MOBIUS_WORKER_BACKEND_BUFFERS_H_

#include <cstdint>
#include <string>
#include <utility>

namespace mobius::backend {

// Implemented by backends: takes memory back. Called once per non-empty handle.
class BufferOwner {
 public:
  virtual void ReleaseBuffer(void* ptr, uint64_t bytes) = 0;

 protected:
  ~BufferOwner() = default;
};

// A span of memory owned through a BufferOwner. Base of DeviceBuffer and HostBuffer.
class OwnedBuffer {
 public:
  OwnedBuffer() = default;
  OwnedBuffer(BufferOwner* owner, void* ptr, uint64_t bytes, std::string tag)
      : owner_(owner), ptr_(ptr), bytes_(bytes), tag_(std::move(tag)) {}
  OwnedBuffer(OwnedBuffer&& other) noexcept { *this = std::move(other); }
  OwnedBuffer& operator=(OwnedBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      owner_ = std::exchange(other.owner_, nullptr);
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
      tag_ = std::move(other.tag_);
    }
    return *this;
  }
  OwnedBuffer(const OwnedBuffer&) = delete;
  OwnedBuffer& operator=(const OwnedBuffer&) = delete;
  ~OwnedBuffer() { Reset(); }

  // Frees the memory now; the handle becomes empty. REQUIRES: no queued work still uses it.
  void Reset() {
    if (owner_ != nullptr) owner_->ReleaseBuffer(ptr_, bytes_);
    owner_ = nullptr;
    ptr_ = nullptr;
    bytes_ = 0;
  }

  void* data() const { return ptr_; }
  uint64_t size_bytes() const { return bytes_; }
  const std::string& tag() const { return tag_; }
  bool empty() const { return ptr_ == nullptr; }
  // The address `offset` bytes in (for op arguments). REQUIRES: offset <= size_bytes().
  void* at(uint64_t offset) const { return static_cast<char*>(ptr_) + offset; }

 private:
  BufferOwner* owner_ = nullptr;
  void* ptr_ = nullptr;
  uint64_t bytes_ = 0;
  std::string tag_;
};

// Device memory. data() is a device address: dereference it on the host only on the CPU backend.
class DeviceBuffer : public OwnedBuffer {
  using OwnedBuffer::OwnedBuffer;
};

// A non-owning DeviceBuffer over [offset, offset + bytes) of `parent` (a unit's weights inside a
// stage slot): Reset() on it frees nothing. REQUIRES: the range lies inside `parent`, which must
// outlive the view.
inline DeviceBuffer DeviceView(const DeviceBuffer& parent, uint64_t offset, uint64_t bytes) {
  return DeviceBuffer(nullptr, parent.at(offset), bytes, parent.tag() + ".view");
}

// Page-locked host memory (the "pinned host buffer type" paired with each device).
class HostBuffer : public OwnedBuffer {
  using OwnedBuffer::OwnedBuffer;
};

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_BUFFERS_H_
