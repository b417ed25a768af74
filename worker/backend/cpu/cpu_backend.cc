#include "worker/backend/cpu/cpu_backend.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/backend/cpu/cpu_gemm.h"
#include "worker/optim/thread_pool.h"

namespace mobius::backend {
namespace {

constexpr uint64_t kAlignment = 64;
constexpr uint64_t kDefaultChunkBytes = uint64_t{64} << 20;

uint64_t PhysicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

void* AlignedAlloc(uint64_t bytes) {
  // aligned_alloc wants a multiple of the alignment.
  return std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
}

// Queues and events reach us as the interface types; anything not made by a CpuBackend is a
// caller bug that we report instead of crashing on.
absl::StatusOr<CpuQueue*> AsCpu(Queue& queue) {
  auto* cpu = dynamic_cast<CpuQueue*>(&queue);
  if (cpu == nullptr) return absl::InvalidArgumentError("queue was not created by a CpuBackend");
  return cpu;
}
absl::StatusOr<CpuEvent*> AsCpu(Event& event) {
  auto* cpu = dynamic_cast<CpuEvent*>(&event);
  if (cpu == nullptr) return absl::InvalidArgumentError("event was not created by a CpuBackend");
  return cpu;
}

absl::Status CheckRange(const DeviceBuffer& buffer, uint64_t offset, uint64_t bytes,
                        absl::string_view what) {
  if (bytes == 0) return absl::OkStatus();
  if (buffer.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty buffer"));
  if (offset > buffer.size_bytes() || bytes > buffer.size_bytes() - offset) {
    return absl::OutOfRangeError(absl::StrCat(what, ": bytes [", offset, ", ", offset + bytes,
                                              ") outside buffer '", buffer.tag(), "' of ",
                                              buffer.size_bytes(), " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::Create(const CpuBackendOptions& options) {
  if (options.blas_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu backend: blas_threads = ", options.blas_threads, ", want >= 1"));
  }
  if (options.op_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu backend: op_threads = ", options.op_threads, ", want >= 1"));
  }
  uint64_t capacity = options.backend.capacity_bytes;
  if (capacity == 0) capacity = PhysicalMemoryBytes();
  SetBlasThreads(1);  // GEMMs run on the op pool (cpu_gemm.h)
  return std::unique_ptr<CpuBackend>(new CpuBackend(options, capacity));
}

CpuBackend::CpuBackend(const CpuBackendOptions& options, uint64_t capacity)
    : capacity_(capacity),
      chunk_bytes_(options.backend.copy_chunk_bytes == 0 ? kDefaultChunkBytes
                                                         : options.backend.copy_chunk_bytes),
      link_model_(options.backend.link_model),
      pool_(std::make_unique<optim::ThreadPool>(options.op_threads)) {}

CpuBackend::~CpuBackend() = default;

// ---- memory ----

absl::StatusOr<DeviceBuffer> CpuBackend::Allocate(uint64_t bytes, absl::string_view tag) {
  if (bytes == 0) return DeviceBuffer();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes > capacity_ - used_) {  // used_ <= capacity_ always holds
      return absl::ResourceExhaustedError(
          absl::StrCat("device memory cap exceeded: requested ", bytes, " bytes for ", tag,
                       ", in use ", used_, " of ", capacity_, " bytes"));
    }
    used_ += bytes;  // reserve before allocating, so concurrent callers cannot overshoot
    peak_ = std::max(peak_, used_);
  }
  void* ptr = AlignedAlloc(bytes);
  if (ptr == nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    used_ -= bytes;
    return absl::ResourceExhaustedError(
        absl::StrCat("cpu backend: host allocation of ", bytes, " bytes for ", tag, " failed"));
  }
  return DeviceBuffer(&device_owner_, ptr, bytes, std::string(tag));
}

void CpuBackend::Owner::ReleaseBuffer(void* ptr, uint64_t bytes) {
  std::free(ptr);
  std::lock_guard<std::mutex> lock(backend_->mu_);
  (device_ ? backend_->used_ : backend_->pinned_) -= bytes;
}

uint64_t CpuBackend::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

uint64_t CpuBackend::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

absl::StatusOr<HostBuffer> CpuBackend::AllocateHost(uint64_t bytes) {
  if (bytes == 0) return HostBuffer();
  void* ptr = AlignedAlloc(bytes);
  if (ptr == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cpu backend: pinned host allocation of ", bytes, " bytes failed"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  pinned_ += bytes;
  return HostBuffer(&host_owner_, ptr, bytes, "host");
}

absl::Status CpuBackend::RegisterHost(void* ptr, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = registrations_.Check(ptr, bytes); !s.ok()) return s;
  registrations_.Add(ptr, bytes);  // nothing to pin on a CPU
  return absl::OkStatus();
}

absl::Status CpuBackend::UnregisterHost(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_.Remove(ptr).status();
}

uint64_t CpuBackend::registered_host_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_.total_bytes();
}

uint64_t CpuBackend::pinned_host_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pinned_;
}

// ---- queues and events ----

absl::StatusOr<std::unique_ptr<Queue>> CpuBackend::CreateQueue(QueueKind kind, int priority) {
  return std::unique_ptr<Queue>(new CpuQueue(kind, priority));
}

absl::StatusOr<std::unique_ptr<Event>> CpuBackend::CreateEvent() {
  return std::unique_ptr<Event>(new CpuEvent());
}

absl::Status CpuBackend::Record(Queue& queue, Event& event) {
  auto q = AsCpu(queue);
  if (!q.ok()) return q.status();
  auto e = AsCpu(event);
  if (!e.ok()) return e.status();
  const std::shared_ptr<CpuEventState>& state = (*e)->state();
  (*q)->EnqueueRecord(state, state->NextGeneration());
  return absl::OkStatus();
}

absl::Status CpuBackend::Wait(Queue& queue, Event& event) {
  auto q = AsCpu(queue);
  if (!q.ok()) return q.status();
  auto e = AsCpu(event);
  if (!e.ok()) return e.status();
  const std::shared_ptr<CpuEventState>& state = (*e)->state();
  const uint64_t generation = state->recorded();
  if (generation != 0) (*q)->EnqueueWait(state, generation);  // never recorded: complete
  return absl::OkStatus();
}

absl::Status CpuBackend::Synchronize(Queue& queue) {
  auto q = AsCpu(queue);
  if (!q.ok()) return q.status();
  return (*q)->Synchronize();
}

absl::Status CpuBackend::Synchronize(Event& event) {
  auto e = AsCpu(event);
  if (!e.ok()) return e.status();
  const std::shared_ptr<CpuEventState>& state = (*e)->state();
  return state->Await(state->recorded());
}

absl::Status CpuBackend::Enqueue(Queue& queue, CpuTask task) {
  auto q = AsCpu(queue);
  if (!q.ok()) return q.status();
  (*q)->Enqueue(std::move(task));
  return absl::OkStatus();
}

// ---- copies ----

absl::Status CpuBackend::EnqueueCopy(Queue& queue, CopyDirection direction, const void* src,
                                     void* dst, uint64_t bytes) {
  return Enqueue(queue, [this, direction, src, dst, bytes]() {
    for (uint64_t done = 0; done < bytes;) {
      const uint64_t chunk = std::min(chunk_bytes_, bytes - done);
      if (link_model_ != nullptr) link_model_->OnChunk(direction, chunk);
      // memmove: a device-to-device copy may move data within one buffer.
      std::memmove(static_cast<char*>(dst) + done, static_cast<const char*>(src) + done, chunk);
      done += chunk;
    }
    return absl::OkStatus();
  });
}

absl::Status CpuBackend::CopyToDevice(Queue& queue, const void* src_host, const DeviceBuffer& dst,
                                      uint64_t dst_offset, uint64_t bytes) {
  if (absl::Status s = CheckRange(dst, dst_offset, bytes, "CopyToDevice dst"); !s.ok()) return s;
  if (bytes != 0 && src_host == nullptr) return absl::InvalidArgumentError("CopyToDevice: null src");
  return EnqueueCopy(queue, CopyDirection::kHostToDevice, src_host, dst.at(dst_offset), bytes);
}

absl::Status CpuBackend::CopyToHost(Queue& queue, const DeviceBuffer& src, uint64_t src_offset,
                                    void* dst_host, uint64_t bytes) {
  if (absl::Status s = CheckRange(src, src_offset, bytes, "CopyToHost src"); !s.ok()) return s;
  if (bytes != 0 && dst_host == nullptr) return absl::InvalidArgumentError("CopyToHost: null dst");
  return EnqueueCopy(queue, CopyDirection::kDeviceToHost, src.at(src_offset), dst_host, bytes);
}

absl::Status CpuBackend::CopyDeviceToDevice(Queue& queue, const DeviceBuffer& src,
                                            uint64_t src_offset, const DeviceBuffer& dst,
                                            uint64_t dst_offset, uint64_t bytes) {
  if (absl::Status s = CheckRange(src, src_offset, bytes, "CopyDeviceToDevice src"); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckRange(dst, dst_offset, bytes, "CopyDeviceToDevice dst"); !s.ok()) {
    return s;
  }
  return EnqueueCopy(queue, CopyDirection::kDeviceToDevice, src.at(src_offset),
                     dst.at(dst_offset), bytes);
}

// ---- ops ----

absl::Status CpuBackend::Gemm(Queue& queue, const GemmParams& params) {
  if (absl::Status s = ValidateGemm(params); !s.ok()) return s;
  return EnqueueOp(queue, [params](optim::ThreadPool* pool) { return RunCpuGemm(params, pool); });
}

}  // namespace mobius::backend
