// Internal to CudaBackend (cuda_backend.h): the class, shared by cuda_backend.cc (memory, queues,
// events, copies) and cuda_ops.cc (the ops). Includes the CUDA runtime header: include it only
// from those two files.
#ifndef MOBIUS_WORKER_BACKEND_CUDA_CUDA_BACKEND_IMPL_H_
#define MOBIUS_WORKER_BACKEND_CUDA_CUDA_BACKEND_IMPL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/device_arena.h"
#include "worker/backend/host_ranges.h"
#include "worker/kernels/cuda/gemm.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::backend {

// KernelStatus -> absl::Status (the codes are numbered alike).
absl::Status FromKernel(const kernels::cuda::KernelStatus& status);
// A CUDA runtime error as INTERNAL ("what: cudaErrorX: text"); OK for cudaSuccess.
absl::Status FromCuda(cudaError_t error, const char* what);

// Per-queue device counters of data errors found by kernels.
enum DataErrorSlot { kBadTokenIds = 0, kBadTargets = 1, kDataErrorSlots = 2 };

class CudaQueue final : public Queue {
 public:
  CudaQueue(QueueKind kind, int priority, int device, cudaStream_t stream, int32_t* counters)
      : Queue(kind, priority), device_(device), stream_(stream), counters_(counters) {}
  ~CudaQueue() override;

  cudaStream_t stream() const { return stream_; }
  void* native_handle() const override { return stream_; }
  int32_t* counter(DataErrorSlot slot) const { return counters_ + slot; }

  std::mutex mu;
  absl::Status first_error;  // guarded by mu

 private:
  int device_;
  cudaStream_t stream_;
  int32_t* counters_;  // [kDataErrorSlots] device int32, zeroed after each report
};

class CudaEvent final : public Event {
 public:
  CudaEvent(int device, cudaEvent_t event) : device_(device), event_(event) {}
  ~CudaEvent() override;
  cudaEvent_t event() const { return event_; }

  std::mutex mu;
  absl::Status carried;  // guarded by mu: the recording queue's error as of the Record

 private:
  int device_;
  cudaEvent_t event_;
};

class CudaBackend final : public Backend, private BufferOwner {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create(const CudaBackendOptions& options);
  ~CudaBackend() override;

  std::string name() const override;
  bool half_accumulate_faster() const override;  // a GeForce device

  absl::StatusOr<DeviceBuffer> Allocate(uint64_t bytes, absl::string_view tag) override;
  uint64_t used_bytes() const override;
  uint64_t peak_bytes() const override;
  uint64_t capacity_bytes() const override { return arena_capacity_; }

  absl::StatusOr<HostBuffer> AllocateHost(uint64_t bytes) override;
  absl::Status RegisterHost(void* ptr, uint64_t bytes) override;
  absl::Status UnregisterHost(void* ptr) override;
  uint64_t registered_host_bytes() const override;
  uint64_t pinned_host_bytes() const override;

  absl::StatusOr<std::unique_ptr<Queue>> CreateQueue(QueueKind kind, int priority) override;
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override;
  absl::Status Record(Queue& queue, Event& event) override;
  absl::Status Wait(Queue& queue, Event& event) override;
  absl::Status Synchronize(Queue& queue) override;
  absl::Status Synchronize(Event& event) override;

  absl::Status CopyToDevice(Queue& queue, const void* src_host, const DeviceBuffer& dst,
                            uint64_t dst_offset, uint64_t bytes) override;
  absl::Status CopyToHost(Queue& queue, const DeviceBuffer& src, uint64_t src_offset,
                          void* dst_host, uint64_t bytes) override;
  absl::Status CopyDeviceToDevice(Queue& queue, const DeviceBuffer& src, uint64_t src_offset,
                                  const DeviceBuffer& dst, uint64_t dst_offset,
                                  uint64_t bytes) override;

  absl::Status Gemm(Queue& queue, const GemmParams& params) override;
  absl::Status Zero(Queue& queue, const ZeroParams& params) override;
  absl::Status Cast(Queue& queue, const CastParams& params) override;
  absl::Status EmbeddingForward(Queue& queue, const EmbeddingParams& params) override;
  absl::Status EmbeddingBackward(Queue& queue, const EmbeddingBackwardParams& params) override;
  absl::Status NormForward(Queue& queue, const NormParams& params) override;
  absl::Status NormBackward(Queue& queue, const NormBackwardParams& params) override;
  absl::Status GeluForward(Queue& queue, const GeluParams& params) override;
  absl::Status GeluBackward(Queue& queue, const GeluBackwardParams& params) override;
  absl::Status SwiGluForward(Queue& queue, const SwiGluParams& params) override;
  absl::Status SwiGluBackward(Queue& queue, const SwiGluBackwardParams& params) override;
  absl::Status ClampedSwiGluForward(Queue& queue, const ClampedSwiGluParams& params) override;
  absl::Status ClampedSwiGluBackward(Queue& queue,
                                     const ClampedSwiGluBackwardParams& params) override;
  absl::Status AttentionSinkForward(Queue& queue, const AttentionSinkParams& params) override;
  absl::Status AttentionSinkBackward(Queue& queue,
                                     const AttentionSinkBackwardParams& params) override;
  absl::Status RopeTables(Queue& queue, const RopeTablesParams& params) override;
  absl::Status RopeForward(Queue& queue, const RopeParams& params) override;
  absl::Status RopeBackward(Queue& queue, const RopeBackwardParams& params) override;
  absl::Status AttentionForward(Queue& queue, const AttentionParams& params) override;
  absl::Status AttentionBackward(Queue& queue, const AttentionBackwardParams& params) override;
  absl::Status CachedAttentionForward(Queue& queue,
                                      const CachedAttentionParams& params) override;
  absl::Status CrossEntropyForward(Queue& queue, const CrossEntropyParams& params) override;
  absl::Status CrossEntropyBackward(Queue& queue, const CrossEntropyBackwardParams& params) override;
  absl::Status ResidualAdd(Queue& queue, const ResidualParams& params) override;
  absl::Status BiasAdd(Queue& queue, const BiasAddParams& params) override;
  absl::Status BiasBackward(Queue& queue, const BiasBackwardParams& params) override;
  absl::Status AdamW(Queue& queue, const AdamWParams& params) override;
  absl::Status SumSquares(Queue& queue, const SumSquaresParams& params) override;
  absl::Status Dropout(Queue& queue, const DropoutParams& params) override;
  absl::Status DequantizeNf4(Queue& queue, const DequantizeNf4Params& params) override;
  absl::Status MoeRoute(Queue& queue, const MoeRouteParams& params) override;
  absl::Status MoeRouteBackward(Queue& queue, const MoeRouteBackwardParams& params) override;
  absl::Status MoeGather(Queue& queue, const MoeGatherParams& params) override;
  absl::Status MoeCombine(Queue& queue, const MoeCombineParams& params) override;
  absl::Status MoeCombineBackward(Queue& queue, const MoeCombineBackwardParams& params) override;
  absl::Status MoeScatterAdd(Queue& queue, const MoeScatterAddParams& params) override;

 private:
  CudaBackend(const CudaBackendOptions& options, void* arena_base, uint64_t arena_capacity,
              std::unique_ptr<kernels::cuda::CublasLtGemm> gemm);

  void ReleaseBuffer(void* ptr, uint64_t bytes) override;
  absl::Status Bind() const;  // cudaSetDevice(device_) on the calling thread
  // Runs `launch` (which enqueues on the queue's stream) unless the queue holds an error; a
  // failed launch becomes the queue's first error. Returns OK either way (errors surface at
  // Synchronize), except a failure to bind the device.
  absl::Status Launch(Queue& queue,
                      const std::function<kernels::cuda::KernelStatus(CudaQueue&)>& launch);
  absl::Status Copy(Queue& queue, void* dst, const void* src, uint64_t bytes, cudaMemcpyKind kind);

  const CudaBackendOptions options_;
  void* const arena_base_;
  const uint64_t arena_capacity_;
  bool half_accumulate_faster_ = false;
  std::unique_ptr<kernels::cuda::CublasLtGemm> gemm_;

  mutable std::mutex mu_;
  DeviceArena arena_;                               // guarded by mu_
  HostRanges registrations_;                        // guarded by mu_
  uint64_t pinned_ = 0;                             // guarded by mu_
  std::map<uintptr_t, uint64_t> host_allocations_;  // guarded by mu_: cudaMallocHost'ed
  std::mutex gemm_mu_;                              // the GEMM plan cache
};

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_CUDA_CUDA_BACKEND_IMPL_H_
