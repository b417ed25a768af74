#include "worker/backend/backend_registry.h"

#include <utility>

namespace mobius::backend {
namespace {

DeviceBackendFactory& Factory() {
  static DeviceBackendFactory* factory = new DeviceBackendFactory();
  return *factory;
}

}  // namespace

void RegisterCudaBackendFactory(DeviceBackendFactory factory) { Factory() = std::move(factory); }

bool CudaBackendRegistered() { return static_cast<bool>(Factory()); }

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const DeviceBackendRequest& request) {
  if (!Factory()) {
    return absl::FailedPreconditionError("this binary is built without CUDA");
  }
  return Factory()(request);
}

}  // namespace mobius::backend
