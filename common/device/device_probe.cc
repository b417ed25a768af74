#include "common/device/device_probe.h"

#include <sstream>

namespace mobius {

#ifndef MOBIUS_HAVE_CUDA
DeviceProbe ProbeDevices() {
  DeviceProbe p;
  p.cuda_error = "this build has no CUDA support (configured with MOBIUS_CUDA=OFF or without nvcc)";
  return p;
}
#endif

std::string DescribeBackendChoice(const DeviceProbe& probe) {
  std::ostringstream out;
  if (probe.cuda_devices.empty()) {
    out << "no usable CUDA device (" << probe.cuda_error << "); falling back to the CPU backend";
    return out.str();
  }
  out << "CUDA backend: " << probe.cuda_devices.size() << " device(s):";
  for (const CudaDeviceInfo& d : probe.cuda_devices) {
    out << " [" << d.ordinal << "] " << d.name << " " << d.pci_bus_id << " sm_"
        << d.compute_capability << " " << (d.memory_bytes >> 20) << " MiB;";
  }
  return out.str();
}

}  // namespace mobius
