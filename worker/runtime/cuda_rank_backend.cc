#include "worker/runtime/cuda_rank_backend.h"

#include "worker/backend/cuda/cuda_backend.h"
#include "worker/runtime/rank_backend.h"
#ifdef MOBIUS_HAVE_NCCL
#include "worker/runtime/nccl_transport.h"
#include "worker/runtime/peer_transport.h"
#endif

namespace mobius::runtime {

void RegisterCudaBackendForRanks() {
  RegisterCudaRankBackend([](const RankBackendRequest& request) {
    backend::CudaBackendOptions options;
    options.device = request.device;
    options.backend.capacity_bytes = request.capacity_bytes;
    options.backend.copy_chunk_bytes = request.copy_chunk_bytes;
    return backend::CreateCudaBackend(options);
  });
#ifdef MOBIUS_HAVE_NCCL
  RegisterNcclTransport({.can_access_peer = CudaCanAccessPeer, .create = MakeNcclPeerTransport});
#endif
}

}  // namespace mobius::runtime
