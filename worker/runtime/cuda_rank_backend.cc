#include "worker/runtime/cuda_rank_backend.h"

#include <cstdlib>

#include "worker/backend/backend_registry.h"
#include "worker/backend/cuda/cuda_backend.h"
#ifdef MOBIUS_HAVE_NCCL
#include "worker/runtime/nccl_transport.h"
#include "worker/runtime/peer_transport.h"
#endif

namespace mobius::runtime {

void RegisterCudaBackendForRanks() {
  // Ordinals in PCI bus order, as the topology (and CUDA_VISIBLE_DEVICES indices) number GPUs;
  // CUDA's default is "fastest first". Before the first CUDA call of the process.
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", /*overwrite=*/1);
  backend::RegisterCudaBackendFactory([](const backend::DeviceBackendRequest& request) {
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
