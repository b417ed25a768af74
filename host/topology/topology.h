// The hardware topology model of one server: CPU packages, NUMA nodes, the PCIe tree with its GPUs,
// NICs and NVMe drives, and NVLink connections.
//
// Pure data, no I/O: a TopologySource (topology_source.h) fills it from hwloc, and analysis.h derives
// the facts the planner and scheduler use (switches, root complexes, contention groups, P2P).
// Indices: PciNode::parent/children index Topology::pci; Gpu/Nic/Nvme::pci index Topology::pci;
// NvLink::gpu_a/gpu_b index Topology::gpus. GPUs are numbered in PCI bus-id order, the order
// nvidia-smi uses and CUDA uses with CUDA_DEVICE_ORDER=PCI_BUS_ID.
//
// Value type; thread-compatible.
#ifndef MOBIUS_HOST_TOPOLOGY_TOPOLOGY_H_
#define MOBIUS_HOST_TOPOLOGY_TOPOLOGY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace mobius::topology {

// One PCIe link, as the device at its end reports it. generation/width are 0 when unknown (then
// only reported_gbytes_per_s, hwloc's pci_link_speed, is known).
struct PcieLink {
  int generation = 0;                 // 1..5
  int width = 0;                      // lanes: 1, 2, 4, 8, 16
  double reported_gbytes_per_s = 0;   // per direction, GB/s (1e9 bytes/s), as hwloc reports it
};

enum class PciKind {
  kHostBridge,  // a CPU root complex (hwloc "HostBridge")
  kBridge,      // a PCI-to-PCI bridge: root port, switch upstream or downstream port
  kGpu,         // display / 3D controller (PCI class 0x0300 or 0x0302)
  kNic,         // network controller (class 0x02xx)
  kNvme,        // NVM Express controller (class 0x0108)
  kOther,
};

struct PciNode {
  PciKind kind = PciKind::kOther;
  int parent = -1;              // -1 for host bridges
  std::vector<int> children;
  std::string bus_id;           // "0000:3b:00.0"; host bridges: their bus range "0000:[3a-3c]"
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint16_t class_id = 0;        // PCI class and subclass, e.g. 0x0302
  std::string vendor_name;      // "NVIDIA Corporation" when known
  std::string device_name;      // "GA102 [GeForce RTX 3090]" when known
  PcieLink link;
  int package = -1;             // os_index of the local CPU package, -1 if unknown
  int numa_node = -1;           // os_index of the local NUMA node, -1 if unknown
  std::vector<std::string> os_devices;  // "cuda0", "nvml0", "eth0", "nvme0n1", ...
};

struct Gpu {
  int pci = -1;                 // index into Topology::pci
  std::string name;             // "NVIDIA GeForce RTX 3090" (CUDA/NVML model name, else PCI name)
  uint64_t memory_bytes = 0;    // 0 when unknown (no CUDA/NVML information)
  std::string uuid;             // NVML UUID when known
};

struct Nic {
  int pci = -1;
  std::string interface;        // "eth0", "mlx5_0"; empty when the OS device is unknown
  std::string address;          // MAC address when known
};

struct Nvme {
  int pci = -1;
  std::string block_device;     // "nvme0n1"
};

struct NumaNode {
  int os_index = -1;
  int package = -1;             // os_index of the package that holds it
  uint64_t memory_bytes = 0;
  std::vector<int> cpus;        // PU os indexes local to this node
};

struct Package {
  int os_index = -1;
  std::string cpu_model;        // "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz" when known
  int cores = 0;
  int threads = 0;              // PUs (hardware threads)
};

struct NvLink {
  int gpu_a = -1;
  int gpu_b = -1;
  double gbytes_per_s = 0;      // per direction, GB/s, summed over all links between the pair
};

struct Topology {
  std::string hostname;
  std::string source;           // "hwloc discovery" or "file <path>"
  std::vector<Package> packages;
  std::vector<NumaNode> numa_nodes;
  std::vector<PciNode> pci;
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  std::vector<Nvme> nvmes;
  std::vector<NvLink> nvlinks;
};

}  // namespace mobius::topology

#endif  // MOBIUS_HOST_TOPOLOGY_TOPOLOGY_H_
