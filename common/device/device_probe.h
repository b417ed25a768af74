// Which compute devices this process can use, and the backend choice that follows.
//
// Built with CUDA, ProbeDevices() asks the CUDA runtime; on a machine without a GPU or without a
// driver the runtime reports an error instead of crashing, and the caller falls back to the CPU
// backend. Built without CUDA it says so. Depends on the C++ standard library only, so it is part
// of the CUDA-only subset of the tree (MOBIUS_SERVICE=OFF).
//
// Thread-safe.
#ifndef MOBIUS_COMMON_DEVICE_DEVICE_PROBE_H_
#define MOBIUS_COMMON_DEVICE_DEVICE_PROBE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace mobius {

struct CudaDeviceInfo {
  int ordinal = -1;
  std::string name;
  std::string pci_bus_id;   // "0000:3b:00.0"
  uint64_t memory_bytes = 0;
  int compute_capability = 0;  // 89 for sm_89
};

struct DeviceProbe {
  bool cuda_built = false;           // compiled with CUDA support
  std::vector<CudaDeviceInfo> cuda_devices;
  std::string cuda_error;            // why no CUDA device is usable, when none is
};

DeviceProbe ProbeDevices();

// One line for logs: "CUDA backend: 2 device(s): ..." or
// "no usable CUDA device (cudaErrorInsufficientDriver: ...); falling back to the CPU backend".
std::string DescribeBackendChoice(const DeviceProbe& probe);

}  // namespace mobius

#endif  // MOBIUS_COMMON_DEVICE_DEVICE_PROBE_H_
