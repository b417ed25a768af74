// Human-readable rendering of a topology: the tree socket -> root complex -> (root port) -> switch
// -> GPU with link speeds, then the contention groups and the GPU-to-GPU path/P2P matrix.
// Used by `mobius topo`; pure, thread-safe.
#ifndef MOBIUS_HOST_TOPOLOGY_RENDER_H_
#define MOBIUS_HOST_TOPOLOGY_RENDER_H_

#include <cstdint>
#include <string>

#include "host/topology/analysis.h"
#include "host/topology/topology.h"

namespace mobius::topology {

std::string RenderTopology(const Topology& topology, const TopologyFacts& facts);

// "24.0 GiB"
std::string FormatBytes(uint64_t bytes);

}  // namespace mobius::topology

#endif  // MOBIUS_HOST_TOPOLOGY_RENDER_H_
