// CpuBackend: the Backend on host memory and threads. Always built; the embedded default, the
// oracle for CUDA ops, and what runs the swap/prefetch machinery in CI (architecture.md, seams).
//
//   device memory   host memory (64-byte aligned) counted against options.capacity_bytes
//                   (0 = physical RAM); used/peak count the requested bytes
//   pinned host     AllocateHost: 64-byte aligned host memory (counted in pinned_host_bytes);
//                   RegisterHost: bookkeeping of ranges only (nothing to pin on a CPU)
//   queues          one worker thread each (CpuQueue); priority is recorded, not enforced
//   events          mutex/condvar (CpuEventState)
//   copies          memcpy (memmove for device-to-device) per chunk, each chunk first passed to
//                   options.link_model when set
//   ops             kernels enqueued with Enqueue(); GEMM = bf16->fp32 + OpenBLAS sgemm (cpu_gemm.h)
//                   in pieces on the op pool, like every other op
//
// Destroying a queue drains its pending work (cpu_queue.h). REQUIRES: queues, events and buffers
// are destroyed before the backend.
//
// Threads: every op, GEMMs included, runs on the queue's thread plus the backend's op pool
// (op_threads in all), one op at a time across queues. Create() turns OpenBLAS's own threads off
// (openblas_set_num_threads(1), process-wide): GEMMs are cut into pieces on the op pool instead
// (cpu_gemm.h), so results do not depend on the thread count.
//
// Thread-safety: all methods are thread-safe.
#ifndef MOBIUS_WORKER_BACKEND_CPU_CPU_BACKEND_H_
#define MOBIUS_WORKER_BACKEND_CPU_CPU_BACKEND_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/backend/backend.h"
#include "worker/backend/cpu/cpu_queue.h"
#include "worker/backend/host_ranges.h"

namespace mobius::optim {
class ThreadPool;
}  // namespace mobius::optim

namespace mobius::backend {

struct CpuBackendOptions {
  BackendOptions backend;
  // Deprecated, validated (>= 1) and otherwise ignored: GEMMs now run on the op pool with
  // OpenBLAS single-threaded (see above); op_threads sets their parallelism too.
  int blas_threads = 1;
  // Threads (the queue's own included) that run each op, GEMMs included, from one pool owned by
  // the backend. Ops on different queues take turns on the pool (one op at a time).
  int op_threads = 1;
};

class CpuBackend final : public Backend {
 public:
  // INVALID_ARGUMENT for blas_threads < 1 or op_threads < 1; copy_chunk_bytes == 0 becomes the 64 MiB default.
  static absl::StatusOr<std::unique_ptr<CpuBackend>> Create(const CpuBackendOptions& options);
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }

  absl::StatusOr<DeviceBuffer> Allocate(uint64_t bytes, absl::string_view tag) override;
  uint64_t used_bytes() const override;
  uint64_t peak_bytes() const override;
  uint64_t capacity_bytes() const override { return capacity_; }

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
  // The transformer ops (op_params.h), implemented in cpu_ops.cc with worker/kernels/cpu/.
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

  // For CPU op implementations (worker/kernels/cpu): runs `task` on the queue's thread after the
  // work enqueued before it; an error it returns is reported by Synchronize. The task must only
  // touch memory that stays valid until it ran.
  absl::Status Enqueue(Queue& queue, CpuTask task);

  uint64_t copy_chunk_bytes() const { return chunk_bytes_; }

 private:
  // Frees device (or host) memory handed out by this backend and updates the counters.
  class Owner final : public BufferOwner {
   public:
    Owner(CpuBackend* backend, bool device) : backend_(backend), device_(device) {}
    void ReleaseBuffer(void* ptr, uint64_t bytes) override;

   private:
    CpuBackend* backend_;
    bool device_;
  };

  CpuBackend(const CpuBackendOptions& options, uint64_t capacity);
  // Enqueues `op` to run with the op pool held (cpu_ops.cc).
  absl::Status EnqueueOp(Queue& queue, std::function<absl::Status(optim::ThreadPool*)> op);
  absl::Status EnqueueCopy(Queue& queue, CopyDirection direction, const void* src, void* dst,
                           uint64_t bytes);

  const uint64_t capacity_;
  const uint64_t chunk_bytes_;
  LinkModel* const link_model_;  // not owned; may be null
  Owner device_owner_{this, true};
  Owner host_owner_{this, false};

  std::mutex pool_mu_;  // held while an op uses pool_
  std::unique_ptr<optim::ThreadPool> pool_ ABSL_GUARDED_BY(pool_mu_);

  mutable std::mutex mu_;
  uint64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t peak_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pinned_ ABSL_GUARDED_BY(mu_) = 0;
  HostRanges registrations_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_CPU_CPU_BACKEND_H_
