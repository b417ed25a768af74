// CudaBackend: the Backend (worker/backend/backend.h) on one NVIDIA GPU. Built when the tree is
// built with CUDA and Abseil (the full tree); the kernels it runs (worker/kernels/cuda/) are
// absl-free and tested on their own in the CUDA-only subset.
//
//   device memory   one cudaMalloc of the whole cap at Create (capacity_bytes; 0 = the device's
//                   free memory less kReserveBytes for the CUDA context, cuBLASLt and NCCL), carved
//                   by a DeviceArena (best fit, 256-byte aligned): no cudaMalloc/cudaFree on the
//                   hot path. used/peak count the arena's (rounded) bytes. RESOURCE_EXHAUSTED
//                   names the request, the tag, used/capacity and the largest free block.
//   pinned host     AllocateHost = cudaMallocHost; RegisterHost = cudaHostRegister (portable),
//                   e.g. the job's shared host model store, so stage uploads are true async DMA.
//   queues          one CUDA stream each (non-blocking), priority mapped onto the device's range:
//                   a positive Backend priority is the device's greatest (activations and compute
//                   before bulk weight copies), 0 or less its least.
//   events          cudaEvent_t (timing disabled), carrying the recording queue's pending error.
//   copies          cudaMemcpyAsync per copy_chunk_bytes chunk (the LinkModel is not consulted:
//                   a GPU has real links); ranges checked against the buffers (OUT_OF_RANGE).
//   ops             worker/kernels/cuda/ in bf16 or fp16 as each op's dtype says: cuBLASLt GEMM
//                   (fp32 compute; fp16 compute with half_accumulate), the transformer ops, Cast,
//                   Zero (cudaMemsetAsync), AdamW, SumSquares. GEMM type sets cuBLASLt lacks
//                   (bf16 x fp16, 16-bit inputs into the other 16-bit C) are UNIMPLEMENTED at
//                   enqueue (cuda_ops.cc).
//
// Errors. Argument errors are returned at enqueue (the shared Validate* functions, so CPU and CUDA
// reject the same calls). A failed launch, an asynchronous CUDA error, or a data error (token ids
// or targets out of range, counted on the device by the embedding and cross-entropy kernels into a
// per-queue counter) is the queue's first error: the queue skips later work until Synchronize
// reports it once, as backend.h specifies. An asynchronous CUDA fault (illegal address) leaves the
// CUDA context unusable: every later call reports it; the worker must exit.
//
// Device selection: `device` is an ordinal of the devices this process sees, i.e. after
// CUDA_VISIBLE_DEVICES (the runtime maps a rank's node GPU to it: rank_backend.h
// CudaOrdinalOfRank). Every method binds the calling thread to the device first (cudaSetDevice),
// so any thread may call.
//
// Thread-safety: all methods are thread-safe (the GEMM's plan cache and the arena are guarded).
#ifndef MOBIUS_WORKER_BACKEND_CUDA_CUDA_BACKEND_H_
#define MOBIUS_WORKER_BACKEND_CUDA_CUDA_BACKEND_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"

namespace mobius::backend {

struct CudaBackendOptions {
  BackendOptions backend;  // link_model is ignored
  int device = 0;
};

// Left free on the device when capacity_bytes is 0 (context, cuBLASLt workspace, NCCL buffers).
inline constexpr uint64_t kCudaReserveBytes = uint64_t{768} << 20;

// FAILED_PRECONDITION (with the CUDA runtime's reason) when there is no driver or no such device;
// RESOURCE_EXHAUSTED when the cap does not fit in the device's free memory.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const CudaBackendOptions& options);

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_CUDA_CUDA_BACKEND_H_
