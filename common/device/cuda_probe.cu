// CUDA half of device_probe.h: enumerates devices through the CUDA runtime. Without a driver,
// cudaGetDeviceCount returns cudaErrorInsufficientDriver (or cudaErrorNoDevice) and we report it.
#include <cuda_runtime.h>

#include <string>

#include "common/device/device_probe.h"

namespace mobius {

DeviceProbe ProbeDevices() {
  DeviceProbe p;
  p.cuda_built = true;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    p.cuda_error = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error so later calls are not confused by it
    return p;
  }
  if (count == 0) {
    p.cuda_error = "the CUDA runtime reports 0 devices";
    return p;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    CudaDeviceInfo d;
    d.ordinal = i;
    d.name = prop.name;
    char bus[32] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), i) == cudaSuccess) d.pci_bus_id = bus;
    d.memory_bytes = prop.totalGlobalMem;
    d.compute_capability = prop.major * 10 + prop.minor;
    p.cuda_devices.push_back(d);
  }
  return p;
}

}  // namespace mobius
