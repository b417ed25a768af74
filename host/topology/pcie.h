// PCIe link arithmetic: theoretical bandwidth per generation and width, and recovering the
// generation/width of a link from the single GB/s figure hwloc reports.
//
// Numbers (per lane, per direction): Gen1 2.5 GT/s and Gen2 5 GT/s with 8b/10b encoding, Gen3 8,
// Gen4 16, Gen5 32 GT/s with 128b/130b encoding (PCI-SIG base specifications); x16 gives 4.0, 8.0,
// 15.75, 31.5 and 63.0 GB/s. Pure functions, thread-safe.
#ifndef MOBIUS_HOST_TOPOLOGY_PCIE_H_
#define MOBIUS_HOST_TOPOLOGY_PCIE_H_

#include <string>

#include "host/topology/topology.h"

namespace mobius::topology {

// GB/s (1e9 bytes/s) per direction of one lane of the given generation; 0 for unknown generations.
double PcieLaneGBytesPerSecond(int generation);

// Theoretical GB/s per direction of a link: lane rate x width when both are known, else the
// reported figure.
double LinkGBytesPerSecond(const PcieLink& link);

// Fills generation/width from reported_gbytes_per_s when they are unknown. Ambiguous figures
// (Gen4 x8 and Gen3 x16 are both 15.75 GB/s) resolve to the widest link, the common case for GPUs.
// Leaves the link unchanged when no combination matches within 2%.
PcieLink InferGenerationAndWidth(PcieLink link);

// "PCIe 3.0 x16 (15.8 GB/s)", "PCIe ? (7.9 GB/s)" or "PCIe link unknown".
std::string DescribeLink(const PcieLink& link);

}  // namespace mobius::topology

#endif  // MOBIUS_HOST_TOPOLOGY_PCIE_H_
