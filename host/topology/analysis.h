// Derived facts of a Topology: what the planner, the mapper and the scheduler ask of the hardware.
//
//  - Bridge roles: root port (a bridge directly under a host bridge), switch upstream port (a
//    bridge under a root port or a switch downstream port that has bridges below it), switch
//    downstream port (a bridge under a switch upstream port).
//  - Switches with the GPUs below them; root complexes (host bridges) with their package, NUMA node,
//    GPUs and switches.
//  - Contention groups: GPUs whose host traffic shares an uplink. The uplink of a GPU is the link
//    that enters its root complex (the root port's link): GPUs behind one switch under one root port
//    share it; a GPU on its own root port is a group of one.
//  - The path between every pair of GPUs (as `nvidia-smi topo -m` names them) and whether the pair
//    can use peer-to-peer copies: NVLink, or both under one PCIe switch and neither a GeForce/TITAN
//    card (their drivers disable PCIe P2P).
//  - Each GPU's own link bandwidth and the narrowest link on its way to the root complex.
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_TOPOLOGY_ANALYSIS_H_
#define MOBIUS_HOST_TOPOLOGY_ANALYSIS_H_

#include <string>
#include <vector>

#include "host/topology/topology.h"

namespace mobius::topology {

enum class BridgeRole { kNone, kRootPort, kSwitchUpstream, kSwitchDownstream };

// Path between two GPUs, from closest to farthest (nvidia-smi's names in brackets).
enum class GpuPath {
  kSelf,          // [X]
  kNvLink,        // [NV#] connected by NVLink
  kSwitch,        // [PIX] through one PCIe switch
  kMultiSwitch,   // [PXB] through several PCIe switches, not through a host bridge
  kHostBridge,    // [PHB] through one root complex
  kNode,          // [NODE] across root complexes of one socket
  kSystem,        // [SYS] across sockets (the inter-socket link)
};

struct SwitchInfo {
  int pci = -1;                 // the switch's upstream port (index into Topology::pci)
  int root_complex = -1;        // index into TopologyFacts::root_complexes
  PcieLink uplink;              // link of the upstream port
  std::vector<int> gpus;        // all GPUs below the switch (nested switches included)
};

struct RootComplexInfo {
  int pci = -1;                 // the host bridge
  int package = -1;             // os_index, -1 if unknown
  int numa_node = -1;           // os_index, -1 if unknown
  std::vector<int> gpus;
  std::vector<int> switches;    // indices into TopologyFacts::switches
};

struct ContentionGroup {
  int uplink_pci = -1;          // the node whose link is shared (root port, or the GPU itself)
  int root_complex = -1;
  double uplink_gbytes_per_s = 0;
  std::vector<int> gpus;
};

struct GpuFacts {
  int root_complex = -1;        // index into TopologyFacts::root_complexes
  int switch_index = -1;        // nearest switch above it (index into switches), -1 if none
  int package = -1;
  int numa_node = -1;
  int contention_group = -1;
  bool consumer_card = false;   // GeForce / TITAN: no PCIe P2P
  double link_gbytes_per_s = 0;       // its own link
  double host_path_gbytes_per_s = 0;  // narrowest link between it and the root complex
};

struct TopologyFacts {
  std::vector<BridgeRole> bridge_roles;   // per Topology::pci entry
  std::vector<SwitchInfo> switches;
  std::vector<RootComplexInfo> root_complexes;
  std::vector<ContentionGroup> contention_groups;
  std::vector<GpuFacts> gpus;             // per Topology::gpus entry
  std::vector<std::vector<GpuPath>> gpu_paths;  // [gpu][gpu]
  std::vector<std::vector<bool>> p2p;           // [gpu][gpu], false on the diagonal
};

TopologyFacts Analyze(const Topology& topology);

// True for cards whose driver disables PCIe peer-to-peer (GeForce and TITAN).
bool IsConsumerGpuName(const std::string& name);

// "X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS".
const char* GpuPathName(GpuPath path);

}  // namespace mobius::topology

#endif  // MOBIUS_HOST_TOPOLOGY_ANALYSIS_H_
