// Internal to the hwloc sources: builds a Topology from a loaded hwloc topology, and augments a live
// topology with PCIe generation/width infos read from sysfs. Only hwloc_source.cc includes this.
#ifndef MOBIUS_HOST_TOPOLOGY_HWLOC_CONVERT_H_
#define MOBIUS_HOST_TOPOLOGY_HWLOC_CONVERT_H_

#include <hwloc.h>

#include <string>

#include "absl/status/statusor.h"
#include "host/topology/topology.h"

namespace mobius::topology::internal {

// REQUIRES: `topo` is loaded with I/O objects kept (HWLOC_TYPE_FILTER_KEEP_ALL).
absl::StatusOr<Topology> ConvertHwloc(hwloc_topology_t topo, const std::string& source);

// Adds "PCIeLinkGen"/"PCIeLinkWidth" infos to every PCI object that lacks them, reading
// <sysfs_pci_root>/<bus id>/current_link_{speed,width}. Objects whose files are missing are left
// alone (their generation/width will be inferred from hwloc's link speed).
void AddSysfsLinkInfos(hwloc_topology_t topo, const std::string& sysfs_pci_root);

}  // namespace mobius::topology::internal

#endif  // MOBIUS_HOST_TOPOLOGY_HWLOC_CONVERT_H_
