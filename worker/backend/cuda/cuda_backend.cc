// CudaBackend: memory, queues, events and copies (cuda_backend.h). The ops are in cuda_ops.cc.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/backend/cuda/cuda_backend_impl.h"

namespace mobius::backend {

namespace kc = ::mobius::kernels::cuda;

absl::Status FromKernel(const kc::KernelStatus& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.code()), status.message());
}

absl::Status FromCuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error)));
}

CudaQueue::~CudaQueue() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_);  // destroying a queue drains it (backend.h)
  cudaStreamDestroy(stream_);
  cudaFree(counters_);
}

CudaEvent::~CudaEvent() {
  cudaSetDevice(device_);
  cudaEventDestroy(event_);
}

absl::StatusOr<std::unique_ptr<Backend>> CudaBackend::Create(const CudaBackendOptions& options) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "no usable CUDA device: ", cudaGetErrorName(err), ": ", cudaGetErrorString(err)));
  }
  if (options.device < 0 || options.device >= count) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA device ", options.device, " is not visible: this process sees ", count,
        " device(s) (CUDA_VISIBLE_DEVICES=", visible ? visible : "<unset>", ")"));
  }
  if (absl::Status s = FromCuda(cudaSetDevice(options.device), "cudaSetDevice"); !s.ok()) {
    return absl::FailedPreconditionError(s.message());
  }
  if (absl::Status s = FromCuda(cudaFree(nullptr), "creating the CUDA context"); !s.ok()) {
    return absl::FailedPreconditionError(s.message());
  }
  std::unique_ptr<kc::CublasLtGemm> gemm;
  if (absl::Status s = FromKernel(kc::CublasLtGemm::Create(kc::CublasLtGemm::kDefaultWorkspaceBytes,
                                                           &gemm));
      !s.ok()) {
    return s;
  }
  size_t free_bytes = 0, total_bytes = 0;
  if (absl::Status s = FromCuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
      !s.ok()) {
    return s;
  }
  uint64_t capacity = options.backend.capacity_bytes;
  if (capacity == 0) {
    if (free_bytes <= kCudaReserveBytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cuda:", options.device, ": only ", free_bytes, " bytes free (", kCudaReserveBytes,
          " are kept for the CUDA context, cuBLASLt and NCCL)"));
    }
    capacity = free_bytes - kCudaReserveBytes;
  } else if (capacity > free_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cuda:", options.device, ": device memory cap ", capacity,
                     " bytes exceeds the device's free memory (", free_bytes, " of ",
                     total_bytes, " bytes)"));
  }
  void* base = nullptr;
  if (absl::Status s = FromCuda(cudaMalloc(&base, capacity), "reserving the device arena");
      !s.ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cuda:", options.device, ": ", capacity, " bytes: ", s.message()));
  }
  auto backend = std::unique_ptr<CudaBackend>(new CudaBackend(options, base, capacity, std::move(gemm)));
  // GeForce tensor cores sum fp16 products in fp16 at twice their fp32-accumulate rate (Ampere
  // and Ada whitepapers, Appendix A; host/planner/profile.h); datacenter parts run both alike.
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, options.device) == cudaSuccess) {
    backend->half_accumulate_faster_ = std::string(prop.name).find("GeForce") != std::string::npos;
  } else {
    cudaGetLastError();
  }
  return std::unique_ptr<Backend>(std::move(backend));
}

bool CudaBackend::half_accumulate_faster() const { return half_accumulate_faster_; }

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options) {
  return CudaBackend::Create(options);
}

CudaBackend::CudaBackend(const CudaBackendOptions& options, void* arena_base,
                         uint64_t arena_capacity, std::unique_ptr<kc::CublasLtGemm> gemm)
    : options_(options),
      arena_base_(arena_base),
      arena_capacity_(arena_capacity),
      gemm_(std::move(gemm)),
      arena_(arena_capacity) {}

CudaBackend::~CudaBackend() {
  cudaSetDevice(options_.device);
  cudaDeviceSynchronize();
  gemm_.reset();
  {
    std::lock_guard<std::mutex> lock(mu_);
    registrations_.ForEach([](void* ptr, uint64_t) { cudaHostUnregister(ptr); });
  }
  cudaFree(arena_base_);
}

std::string CudaBackend::name() const { return absl::StrCat("cuda:", options_.device); }

absl::Status CudaBackend::Bind() const {
  return FromCuda(cudaSetDevice(options_.device), "cudaSetDevice");
}

// ---- memory ----

absl::StatusOr<DeviceBuffer> CudaBackend::Allocate(uint64_t bytes, absl::string_view tag) {
  if (bytes == 0) return DeviceBuffer();
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t offset = 0;
  if (!arena_.Allocate(bytes, &offset)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device memory cap exceeded: requested ", bytes, " for ", tag, ", in use ",
        arena_.used(), " of ", arena_.capacity(), " (largest free block ",
        arena_.largest_free(), ")"));
  }
  return DeviceBuffer(this, static_cast<char*>(arena_base_) + offset, bytes, std::string(tag));
}

void CudaBackend::ReleaseBuffer(void* ptr, uint64_t /*bytes*/) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  const auto base = reinterpret_cast<uintptr_t>(arena_base_);
  std::lock_guard<std::mutex> lock(mu_);
  if (p >= base && p < base + arena_capacity_) {
    arena_.Free(p - base);
    return;
  }
  auto it = host_allocations_.find(p);
  if (it != host_allocations_.end()) {
    pinned_ -= it->second;
    host_allocations_.erase(it);
    cudaFreeHost(ptr);
  }
}

uint64_t CudaBackend::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return arena_.used();
}

uint64_t CudaBackend::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return arena_.peak();
}

absl::StatusOr<HostBuffer> CudaBackend::AllocateHost(uint64_t bytes) {
  if (bytes == 0) return HostBuffer();
  if (absl::Status s = Bind(); !s.ok()) return s;
  void* ptr = nullptr;
  if (cudaError_t e = cudaMallocHost(&ptr, bytes); e != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat("cudaMallocHost(", bytes, "): ",
                                                     cudaGetErrorName(e), ": ",
                                                     cudaGetErrorString(e)));
  }
  std::lock_guard<std::mutex> lock(mu_);
  host_allocations_[reinterpret_cast<uintptr_t>(ptr)] = bytes;
  pinned_ += bytes;
  return HostBuffer(this, ptr, bytes, "pinned");
}

absl::Status CudaBackend::RegisterHost(void* ptr, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = registrations_.Check(ptr, bytes); !s.ok()) return s;
  if (absl::Status s = Bind(); !s.ok()) return s;
  // Portable: every device (and NCCL's proxy) sees the range as pinned.
  if (cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable); e != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat(
        "cudaHostRegister of ", bytes, " bytes: ", cudaGetErrorName(e), ": ",
        cudaGetErrorString(e), " (is the memlock limit, ulimit -l, large enough?)"));
  }
  registrations_.Add(ptr, bytes);
  return absl::OkStatus();
}

absl::Status CudaBackend::UnregisterHost(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = registrations_.Remove(ptr).status(); !s.ok()) return s;
  if (absl::Status s = Bind(); !s.ok()) return s;
  return FromCuda(cudaHostUnregister(ptr), "cudaHostUnregister");
}

uint64_t CudaBackend::registered_host_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_.total_bytes();
}

uint64_t CudaBackend::pinned_host_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pinned_;
}

// ---- queues and events ----

absl::StatusOr<std::unique_ptr<Queue>> CudaBackend::CreateQueue(QueueKind kind, int priority) {
  if (absl::Status s = Bind(); !s.ok()) return s;
  int least = 0, greatest = 0;  // CUDA: numerically lower is higher priority
  if (absl::Status s = FromCuda(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                                "cudaDeviceGetStreamPriorityRange");
      !s.ok()) {
    return s;
  }
  cudaStream_t stream = nullptr;
  if (absl::Status s = FromCuda(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking,
                                                             priority > 0 ? greatest : least),
                                "cudaStreamCreateWithPriority");
      !s.ok()) {
    return s;
  }
  int32_t* counters = nullptr;
  absl::Status s = FromCuda(
      cudaMalloc(reinterpret_cast<void**>(&counters), sizeof(int32_t) * kDataErrorSlots),
      "allocating the queue's error counters");
  if (s.ok()) s = FromCuda(cudaMemset(counters, 0, sizeof(int32_t) * kDataErrorSlots), "cudaMemset");
  if (!s.ok()) {
    cudaStreamDestroy(stream);
    if (counters != nullptr) cudaFree(counters);
    return s;
  }
  return std::unique_ptr<Queue>(new CudaQueue(kind, priority, options_.device, stream, counters));
}

absl::StatusOr<std::unique_ptr<Event>> CudaBackend::CreateEvent() {
  if (absl::Status s = Bind(); !s.ok()) return s;
  cudaEvent_t event = nullptr;
  if (absl::Status s = FromCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                                "cudaEventCreateWithFlags");
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<Event>(new CudaEvent(options_.device, event));
}

absl::Status CudaBackend::Record(Queue& queue, Event& event) {
  auto& q = static_cast<CudaQueue&>(queue);
  auto& e = static_cast<CudaEvent&>(event);
  if (absl::Status s = Bind(); !s.ok()) return s;
  std::scoped_lock lock(q.mu, e.mu);
  e.carried = q.first_error;
  if (cudaError_t err = cudaEventRecord(e.event(), q.stream()); err != cudaSuccess) {
    if (q.first_error.ok()) q.first_error = FromCuda(err, "cudaEventRecord");
    e.carried = q.first_error;
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Wait(Queue& queue, Event& event) {
  auto& q = static_cast<CudaQueue&>(queue);
  auto& e = static_cast<CudaEvent&>(event);
  if (absl::Status s = Bind(); !s.ok()) return s;
  std::scoped_lock lock(q.mu, e.mu);
  if (!e.carried.ok() && q.first_error.ok()) {
    q.first_error = absl::Status(e.carried.code(),
                                 absl::StrCat("dependency failed: ", e.carried.message()));
  }
  if (cudaError_t err = cudaStreamWaitEvent(q.stream(), e.event(), 0); err != cudaSuccess) {
    if (q.first_error.ok()) q.first_error = FromCuda(err, "cudaStreamWaitEvent");
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Synchronize(Queue& queue) {
  auto& q = static_cast<CudaQueue&>(queue);
  if (absl::Status s = Bind(); !s.ok()) return s;
  const cudaError_t err = cudaStreamSynchronize(q.stream());
  int32_t counts[kDataErrorSlots] = {0, 0};
  cudaError_t read = cudaSuccess;
  if (err == cudaSuccess) {
    read = cudaMemcpy(counts, q.counter(kBadTokenIds), sizeof(counts), cudaMemcpyDeviceToHost);
    if (read == cudaSuccess && (counts[0] != 0 || counts[1] != 0)) {
      read = cudaMemset(q.counter(kBadTokenIds), 0, sizeof(counts));
    }
  }
  std::lock_guard<std::mutex> lock(q.mu);
  if (q.first_error.ok()) {
    if (err != cudaSuccess) {
      q.first_error = FromCuda(err, "queued work");
    } else if (read != cudaSuccess) {
      q.first_error = FromCuda(read, "reading the queue's error counters");
    } else if (counts[kBadTokenIds] != 0) {
      q.first_error = absl::InvalidArgumentError(absl::StrCat(
          "embedding: ", counts[kBadTokenIds], " token id(s) outside [0, vocab)"));
    } else if (counts[kBadTargets] != 0) {
      q.first_error = absl::InvalidArgumentError(absl::StrCat(
          "cross_entropy: ", counts[kBadTargets], " target(s) outside [0, vocab) and not ",
          kIgnoreIndex));
    }
  }
  return std::exchange(q.first_error, absl::OkStatus());
}

absl::Status CudaBackend::Synchronize(Event& event) {
  auto& e = static_cast<CudaEvent&>(event);
  if (absl::Status s = Bind(); !s.ok()) return s;
  const cudaError_t err = cudaEventSynchronize(e.event());
  std::lock_guard<std::mutex> lock(e.mu);
  if (!e.carried.ok()) return e.carried;
  return FromCuda(err, "queued work");
}

// ---- copies ----

absl::Status CudaBackend::Launch(Queue& queue,
                                 const std::function<kc::KernelStatus(CudaQueue&)>& launch) {
  auto& q = static_cast<CudaQueue&>(queue);
  if (absl::Status s = Bind(); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(q.mu);
  if (!q.first_error.ok()) return absl::OkStatus();  // skipped until the error is reported
  kc::KernelStatus st = launch(q);
  if (!st.ok()) q.first_error = FromKernel(st);
  return absl::OkStatus();
}

absl::Status CudaBackend::Copy(Queue& queue, void* dst, const void* src, uint64_t bytes,
                               cudaMemcpyKind kind) {
  if (bytes == 0) return absl::OkStatus();
  const uint64_t chunk = options_.backend.copy_chunk_bytes > 0 ? options_.backend.copy_chunk_bytes
                                                                : uint64_t{64} << 20;
  return Launch(queue, [&](CudaQueue& q) -> kc::KernelStatus {
    for (uint64_t off = 0; off < bytes; off += chunk) {
      const uint64_t n = bytes - off < chunk ? bytes - off : chunk;
      const cudaError_t e = cudaMemcpyAsync(static_cast<char*>(dst) + off,
                                            static_cast<const char*>(src) + off, n, kind,
                                            q.stream());
      if (e != cudaSuccess) {
        cudaGetLastError();
        return kc::FromCudaError(e, "cudaMemcpyAsync", __FILE__, __LINE__);
      }
    }
    return kc::OkStatus();
  });
}

namespace {

absl::Status CheckRange(const char* what, const DeviceBuffer& buffer, uint64_t offset,
                        uint64_t bytes) {
  if (offset > buffer.size_bytes() || bytes > buffer.size_bytes() - offset) {
    return absl::OutOfRangeError(absl::StrCat(what, ": [", offset, ", +", bytes, ") exceeds ",
                                              buffer.tag(), " of ", buffer.size_bytes(),
                                              " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CudaBackend::CopyToDevice(Queue& queue, const void* src_host, const DeviceBuffer& dst,
                                       uint64_t dst_offset, uint64_t bytes) {
  if (absl::Status s = CheckRange("CopyToDevice", dst, dst_offset, bytes); !s.ok()) return s;
  if (bytes > 0 && src_host == nullptr) {
    return absl::InvalidArgumentError("CopyToDevice: null source");
  }
  return Copy(queue, dst.at(dst_offset), src_host, bytes, cudaMemcpyHostToDevice);
}

absl::Status CudaBackend::CopyToHost(Queue& queue, const DeviceBuffer& src, uint64_t src_offset,
                                     void* dst_host, uint64_t bytes) {
  if (absl::Status s = CheckRange("CopyToHost", src, src_offset, bytes); !s.ok()) return s;
  if (bytes > 0 && dst_host == nullptr) {
    return absl::InvalidArgumentError("CopyToHost: null destination");
  }
  return Copy(queue, dst_host, src.at(src_offset), bytes, cudaMemcpyDeviceToHost);
}

absl::Status CudaBackend::CopyDeviceToDevice(Queue& queue, const DeviceBuffer& src,
                                             uint64_t src_offset, const DeviceBuffer& dst,
                                             uint64_t dst_offset, uint64_t bytes) {
  if (absl::Status s = CheckRange("CopyDeviceToDevice (source)", src, src_offset, bytes);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckRange("CopyDeviceToDevice (destination)", dst, dst_offset, bytes);
      !s.ok()) {
    return s;
  }
  return Copy(queue, dst.at(dst_offset), src.at(src_offset), bytes, cudaMemcpyDeviceToDevice);
}

}  // namespace mobius::backend
