// TopologySource implementations backed by hwloc (2.x): live discovery with all I/O objects kept
// (host bridges, PCI bridges, PCI devices, OS devices), and loading an hwloc XML file.
//
// Conventions beyond stock hwloc (see test/data/topology/README.md):
//  - PCI objects may carry infos "PCIeLinkGen" and "PCIeLinkWidth". Live discovery adds them from
//    Linux sysfs (current_link_speed / current_link_width) before exporting XML; when a file lacks
//    them they are inferred from hwloc's pci_link_speed (pcie.h).
//  - GPU memory and model names come from CUDA/NVML/OpenCL OS devices when hwloc has them
//    (CUDAGlobalMemorySize, NVIDIAUUID, GPUModel); otherwise from the PCI names.
//  - NVLink comes from hwloc's "NVLinkBandwidth" distances matrix (MB/s).
//  - A GPU is an NVIDIA display/3D controller (PCI class 0x03xx, vendor 0x10de): the devices Mobius
//    can drive. Other display controllers (server BMC VGA, integrated graphics) are kept as plain
//    devices.
#ifndef MOBIUS_HOST_TOPOLOGY_HWLOC_SOURCE_H_
#define MOBIUS_HOST_TOPOLOGY_HWLOC_SOURCE_H_

#include <memory>
#include <string>

#include "host/topology/topology_source.h"

namespace mobius::topology {

// Discovers this machine.
std::unique_ptr<TopologySource> MakeHwlocLiveSource();

// Loads an hwloc XML file (as written by `lstopo --of xml` or `mobius topo --xml`).
std::unique_ptr<TopologySource> MakeHwlocXmlFileSource(std::string path);

// Parses hwloc XML held in memory; `origin` names it in errors and in Topology::source.
absl::StatusOr<LoadedTopology> LoadHwlocXml(const std::string& xml, const std::string& origin);

}  // namespace mobius::topology

#endif  // MOBIUS_HOST_TOPOLOGY_HWLOC_SOURCE_H_
