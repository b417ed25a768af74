// Plugs CudaBackend (worker/backend/cuda/cuda_backend.h) into worker/backend/backend_registry.h
// (used by the pipeline runtime's rank_backend.h, the standalone trainer and the profile verb),
// and, when NCCL was found, the NCCL gradient transport into peer_transport.h. Exists only in builds with CUDA; mobius-worker calls it at start-up, so
// `backend: auto` picks the GPU where there is one and falls back to the CPU (logged) where not.
#ifndef MOBIUS_WORKER_RUNTIME_CUDA_RANK_BACKEND_H_
#define MOBIUS_WORKER_RUNTIME_CUDA_RANK_BACKEND_H_

namespace mobius::runtime {

void RegisterCudaBackendForRanks();

}  // namespace mobius::runtime

#endif  // MOBIUS_WORKER_RUNTIME_CUDA_RANK_BACKEND_H_
