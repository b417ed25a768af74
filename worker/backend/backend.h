// The one compute-device interface of mobius-worker: capped device memory, pinned host memory,
// ordered queues ("streams"), events, chunked async copies and ops (GEMM first). CudaBackend and
// CpuBackend (worker/backend/cpu/) implement it; the runtime is written against this header only.
//
// Memory model. Device memory is only reached through DeviceBuffer handles (RAII: destroying or
// Reset()ing one frees it). Allocation is counted against `capacity_bytes`; a request that would
// exceed it fails with RESOURCE_EXHAUSTED ("device memory cap exceeded: requested X for <tag>, in use
// Y of Z") and changes nothing, so the caller can evict and retry. Addresses handed to ops
// (GemmParams, op_params.h) are device addresses: DeviceBuffer::data() plus an offset.
//
// Execution model (CUDA's). Work enqueued on one Queue runs in enqueue order, one item at a time;
// work on different queues runs concurrently unless ordered with events. Record(q, e) makes `e`
// complete when everything enqueued on `q` before the Record has finished; Wait(q, e) makes work
// enqueued on `q` after the Wait start only after `e`'s most recent Record (as of the Wait call) has
// completed. An event never recorded counts as complete. Enqueue calls return at once; the status
// they return covers only argument validation (INVALID_ARGUMENT, OUT_OF_RANGE, ...).
//
// Errors raised by queued work. The first error on a queue is kept ("first error wins"); the
// queue then skips its remaining work until the error is reported. Synchronize(queue) waits for the
// queue to drain and returns that error once, after which the queue accepts work again. An event
// recorded behind a failed item completes carrying the error: Synchronize(event) returns it, and
// a queue that Waits on it adopts it (annotated "dependency failed"), so errors never get lost in
// a dependency chain.
//
// Lifetimes. Queues, events and buffers are created by a backend and must be destroyed before it;
// passing a queue or event to another backend is a programmer error. A buffer must not be freed
// while queued work still uses it (synchronize first, as with cudaFreeAsync's stream rules).
// Destroying a Queue drains it: pending work runs to completion (see CpuBackend for details).
//
// Thread-safety: all Backend methods may be called from any thread concurrently. A Queue or Event
// object may be used by several threads at once. DeviceBuffer/HostBuffer handles are not
// synchronized (like std::unique_ptr).
#ifndef MOBIUS_WORKER_BACKEND_BACKEND_H_
#define MOBIUS_WORKER_BACKEND_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/backend/buffers.h"
#include "worker/backend/gemm_params.h"
#include "worker/backend/link_model.h"
#include "worker/backend/moe_params.h"
#include "worker/backend/op_params.h"

namespace mobius::backend {

enum class QueueKind { kCompute, kHostToDevice, kDeviceToHost };
absl::string_view QueueKindName(QueueKind kind);

// An ordered queue of work. Created by Backend::CreateQueue; opaque to callers.
class Queue {
 public:
  virtual ~Queue() = default;
  QueueKind kind() const { return kind_; }
  // Higher runs first where the device arbitrates (CUDA stream priority); the CPU backend records it.
  int priority() const { return priority_; }
  // The device's own handle for the queue (CUDA: the cudaStream_t), for libraries that enqueue on
  // it directly (NCCL); nullptr where there is none (the CPU backend).
  virtual void* native_handle() const { return nullptr; }

 protected:
  Queue(QueueKind kind, int priority) : kind_(kind), priority_(priority) {}

 private:
  QueueKind kind_;
  int priority_;
};

// A marker in a queue's work (cudaEvent_t). Created by Backend::CreateEvent; opaque to callers.
class Event {
 public:
  virtual ~Event() = default;
};

struct BackendOptions {
  uint64_t capacity_bytes = 0;                      // device memory cap; 0 = the device's memory
  uint64_t copy_chunk_bytes = uint64_t{64} << 20;   // copies are split into chunks of this size
  LinkModel* link_model = nullptr;                  // not owned; nullptr = no link emulation
};

class Backend {
 public:
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual std::string name() const = 0;  // "cpu", "cuda:0"
  // Whether fp16 GEMMs summing in fp16 (GemmParams::half_accumulate) run faster here than with
  // fp32 sums: GeForce tensor cores (twice the rate); not datacenter GPUs (the same rate) nor the
  // CPU backend (which sums in fp32 anyway). An fp16 run asks for fp16 sums only where this holds.
  virtual bool half_accumulate_faster() const { return false; }

  // ---- device memory ----
  // `tag` names the use in errors and logs ("stage3.weights"). bytes == 0 yields an empty buffer.
  // RESOURCE_EXHAUSTED when used + bytes > capacity (the numbers are in the message).
  virtual absl::StatusOr<DeviceBuffer> Allocate(uint64_t bytes, absl::string_view tag) = 0;
  // Same as buffer.Reset(): returns the bytes to the pool. REQUIRES: no queued work uses it.
  void Free(DeviceBuffer& buffer) { buffer.Reset(); }
  virtual uint64_t used_bytes() const = 0;
  virtual uint64_t peak_bytes() const = 0;      // high-water mark of used_bytes since creation
  virtual uint64_t capacity_bytes() const = 0;

  // ---- pinned host memory ----
  // A new page-locked host allocation (cudaMallocHost; the CPU backend: 64-byte aligned memory).
  virtual absl::StatusOr<HostBuffer> AllocateHost(uint64_t bytes) = 0;
  // Pins existing memory in place (cudaHostRegister), e.g. the shared host model store.
  // ALREADY_EXISTS if [ptr, ptr+bytes) overlaps a registered range; INVALID_ARGUMENT for null/0.
  virtual absl::Status RegisterHost(void* ptr, uint64_t bytes) = 0;
  // NOT_FOUND unless `ptr` is the start of a registered range.
  virtual absl::Status UnregisterHost(void* ptr) = 0;
  virtual uint64_t registered_host_bytes() const = 0;  // RegisterHost'ed, not yet unregistered
  virtual uint64_t pinned_host_bytes() const = 0;      // AllocateHost'ed, not yet freed

  // ---- queues and events ----
  virtual absl::StatusOr<std::unique_ptr<Queue>> CreateQueue(QueueKind kind, int priority = 0) = 0;
  virtual absl::StatusOr<std::unique_ptr<Event>> CreateEvent() = 0;
  virtual absl::Status Record(Queue& queue, Event& event) = 0;
  virtual absl::Status Wait(Queue& queue, Event& event) = 0;
  // Blocks until everything enqueued so far has run; returns the queue's first unreported error.
  virtual absl::Status Synchronize(Queue& queue) = 0;
  // Blocks until the event's last Record completed; returns the error of the work it followed.
  virtual absl::Status Synchronize(Event& event) = 0;

  // ---- async copies (split into copy_chunk_bytes chunks, each passed to the LinkModel) ----
  // Any queue kind may carry any copy; the kinds exist so the runtime can overlap directions.
  // OUT_OF_RANGE if a range exceeds its buffer. Host pointers should be pinned (AllocateHost or
  // RegisterHost) for real overlap on CUDA; they must stay valid until the copy completed.
  virtual absl::Status CopyToDevice(Queue& queue, const void* src_host, const DeviceBuffer& dst,
                                    uint64_t dst_offset, uint64_t bytes) = 0;
  virtual absl::Status CopyToHost(Queue& queue, const DeviceBuffer& src, uint64_t src_offset,
                                  void* dst_host, uint64_t bytes) = 0;
  virtual absl::Status CopyDeviceToDevice(Queue& queue, const DeviceBuffer& src,
                                          uint64_t src_offset, const DeviceBuffer& dst,
                                          uint64_t dst_offset, uint64_t bytes) = 0;

  // ---- ops ----
  // Each op is one virtual method taking a params struct from its own header (validated by a
  // shared function, so every backend rejects the same arguments). New ops are added the same way;
  // the CPU backend implements them by enqueueing a kernel from worker/kernels/cpu/.
  // C = alpha * op(A) * op(B) + beta * C on `queue` (see gemm_params.h).
  virtual absl::Status Gemm(Queue& queue, const GemmParams& params) = 0;

  // The transformer ops (op_params.h): one method per kernel and direction, enqueued on `queue`,
  // returning the Validate* result (the op's own errors, e.g. a token id out of range, are
  // reported by Synchronize). A backend that lacks an op returns UNIMPLEMENTED (the defaults), so
  // a new backend can grow op by op.
  virtual absl::Status Zero(Queue& queue, const ZeroParams& params);
  virtual absl::Status Cast(Queue& queue, const CastParams& params);
  virtual absl::Status EmbeddingForward(Queue& queue, const EmbeddingParams& params);
  virtual absl::Status EmbeddingBackward(Queue& queue, const EmbeddingBackwardParams& params);
  virtual absl::Status NormForward(Queue& queue, const NormParams& params);
  virtual absl::Status NormBackward(Queue& queue, const NormBackwardParams& params);
  virtual absl::Status GeluForward(Queue& queue, const GeluParams& params);
  virtual absl::Status GeluBackward(Queue& queue, const GeluBackwardParams& params);
  virtual absl::Status SwiGluForward(Queue& queue, const SwiGluParams& params);
  virtual absl::Status SwiGluBackward(Queue& queue, const SwiGluBackwardParams& params);
  virtual absl::Status ClampedSwiGluForward(Queue& queue, const ClampedSwiGluParams& params);
  virtual absl::Status ClampedSwiGluBackward(Queue& queue,
                                             const ClampedSwiGluBackwardParams& params);
  virtual absl::Status AttentionSinkForward(Queue& queue, const AttentionSinkParams& params);
  virtual absl::Status AttentionSinkBackward(Queue& queue,
                                             const AttentionSinkBackwardParams& params);
  virtual absl::Status RopeTables(Queue& queue, const RopeTablesParams& params);
  virtual absl::Status RopeForward(Queue& queue, const RopeParams& params);
  virtual absl::Status RopeBackward(Queue& queue, const RopeBackwardParams& params);
  virtual absl::Status AttentionForward(Queue& queue, const AttentionParams& params);
  virtual absl::Status AttentionBackward(Queue& queue, const AttentionBackwardParams& params);
  // Attention over a KV cache (incremental decoding, CachedAttentionParams).
  virtual absl::Status CachedAttentionForward(Queue& queue, const CachedAttentionParams& params);
  virtual absl::Status CrossEntropyForward(Queue& queue, const CrossEntropyParams& params);
  virtual absl::Status CrossEntropyBackward(Queue& queue, const CrossEntropyBackwardParams& params);
  virtual absl::Status ResidualAdd(Queue& queue, const ResidualParams& params);
  virtual absl::Status BiasAdd(Queue& queue, const BiasAddParams& params);
  virtual absl::Status BiasBackward(Queue& queue, const BiasBackwardParams& params);
  virtual absl::Status AdamW(Queue& queue, const AdamWParams& params);
  virtual absl::Status SumSquares(Queue& queue, const SumSquaresParams& params);
  virtual absl::Status Dropout(Queue& queue, const DropoutParams& params);
  // A QLoRA base weight's NF4 blob into 16-bit values (op_params.h).
  virtual absl::Status DequantizeNf4(Queue& queue, const DequantizeNf4Params& params);
  // Mixture-of-experts routing (moe_params.h).
  virtual absl::Status MoeRoute(Queue& queue, const MoeRouteParams& params);
  virtual absl::Status MoeRouteBackward(Queue& queue, const MoeRouteBackwardParams& params);
  virtual absl::Status MoeGather(Queue& queue, const MoeGatherParams& params);
  virtual absl::Status MoeCombine(Queue& queue, const MoeCombineParams& params);
  virtual absl::Status MoeCombineBackward(Queue& queue, const MoeCombineBackwardParams& params);
  virtual absl::Status MoeScatterAdd(Queue& queue, const MoeScatterAddParams& params);

 protected:
  Backend() = default;
};

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_BACKEND_H_
