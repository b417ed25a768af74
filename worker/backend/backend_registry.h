// The CUDA backend as an optional plug-in: libraries that may run on a GPU (the pipeline runtime,
// the standalone trainer, the profile verb) ask this registry for one instead of linking
// CudaBackend, and mobius-worker registers the factory at start-up when it is built with CUDA
// (worker/runtime/cuda_rank_backend.h). So CPU-only builds, and every library test, see exactly
// the CPU path, and no library depends on the CUDA toolkit. A seam, not a singleton: a test may
// register its own factory. Callers choose by name through backend_choice.h (ChooseBackend), which
// holds the cpu|cuda|auto rule and its CPU fallback.
//
// Thread-safety: register before any MakeCudaBackend call (start-up); MakeCudaBackend itself is
// thread-safe.
#ifndef MOBIUS_WORKER_BACKEND_BACKEND_REGISTRY_H_
#define MOBIUS_WORKER_BACKEND_BACKEND_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"

namespace mobius::backend {

struct DeviceBackendRequest {
  int device = 0;                 // CUDA ordinal as this process sees devices
  uint64_t capacity_bytes = 0;    // device memory cap; 0: the device's free memory less a reserve
  uint64_t copy_chunk_bytes = uint64_t{64} << 20;
};

using DeviceBackendFactory =
    std::function<absl::StatusOr<std::unique_ptr<Backend>>(const DeviceBackendRequest&)>;

void RegisterCudaBackendFactory(DeviceBackendFactory factory);
bool CudaBackendRegistered();

// FAILED_PRECONDITION "this binary is built without CUDA" when nothing is registered; else the
// factory's result (FAILED_PRECONDITION with the CUDA runtime's reason when there is no usable
// device).
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const DeviceBackendRequest& request);

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_BACKEND_REGISTRY_H_
