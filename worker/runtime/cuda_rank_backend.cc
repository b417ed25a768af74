#include "worker/runtime/cuda_rank_backend.h"

#include "worker/backend/cuda/cuda_backend.h"
#include "worker/runtime/rank_backend.h"

namespace mobius::runtime {

void RegisterCudaBackendForRanks() {
  RegisterCudaRankBackend([](const RankBackendRequest& request) {
    backend::CudaBackendOptions options;
    options.device = request.device;
    options.backend.capacity_bytes = request.capacity_bytes;
    options.backend.copy_chunk_bytes = request.copy_chunk_bytes;
    return backend::CreateCudaBackend(options);
  });
}

}  // namespace mobius::runtime
