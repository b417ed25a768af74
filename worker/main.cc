// mobius-worker: the per-GPU worker process. Today it knows one verb:
//   mobius-worker devices   lists the compute devices and the backend it would use.
// Exit codes: 0 ok, 2 usage.
#include <iostream>
#include <string>
#include <vector>

#include "common/init.h"
#include "glog/logging.h"
#include "worker/backend/device_probe.h"

int main(int argc, char** argv) {
  std::vector<std::string> args = mobius::InitProcess(
      argc, argv, "mobius-worker: runs one GPU's part of a Mobius job.\n"
                  "Usage: mobius-worker devices");
  if (args.size() != 2 || args[1] != "devices") {
    std::cerr << "usage: mobius-worker devices\n";
    return 2;
  }
  mobius::DeviceProbe probe = mobius::ProbeDevices();
  LOG(INFO) << mobius::DescribeBackendChoice(probe);
  std::cout << "cuda_built: " << (probe.cuda_built ? "yes" : "no") << "\n";
  std::cout << "cuda_devices: " << probe.cuda_devices.size() << "\n";
  for (const auto& d : probe.cuda_devices) {
    std::cout << "  " << d.ordinal << ": " << d.name << " " << d.pci_bus_id << " sm_"
              << d.compute_capability << " " << (d.memory_bytes >> 20) << " MiB\n";
  }
  std::cout << "backend: " << (probe.cuda_devices.empty() ? "cpu" : "cuda") << "\n";
  if (probe.cuda_devices.empty()) std::cout << "reason: " << probe.cuda_error << "\n";
  return 0;
}
