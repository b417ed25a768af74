// The simulated machine: the job's GPUs and the links their copies cross, built from the topology
// (host/topology/analysis.h) or by hand in tests.
//
//   per GPU:        its own PCIe link (the narrowest link between it and its root complex), one
//                   SimLink per direction;
//   per contention group with more than one of the job's GPUs, or whose uplink is not the GPU's
//                   own link: the group's uplink, one SimLink per direction, shared by its GPUs;
//   NVLink:         per GPU an aggregate "nvlink in" and "nvlink out" link (sum of its NVLink
//                   bandwidths) when the topology has NVLinks;
//   all capacities: dma_efficiency x the theoretical rate (cost_model.h's convention);
//   host DRAM (MachineOptions::host_memory_bytes_per_s > 0): one link "host.memory" without a
//                   reverse direction, crossed by every host copy of every GPU (H2D and D2H) and
//                   by the CPU optimizer's steps: the DRAM bandwidth all of them share
//                   (host_spec.h).
// A GPU's H2D path is [uplink.h2d, own.h2d] (uplink first), its D2H path [own.d2h, uplink.d2h],
// each with host.memory appended when modelled.
// P2P pairs (analysis.h) copy directly: over NVLink [src nvlink_out, dst nvlink_in] when both have
// NVLink, else over the switch [src own.d2h, dst own.h2d] (the uplink is not crossed).
//
// Pure; value type.
#ifndef MOBIUS_HOST_PLANNER_SIM_MACHINE_H_
#define MOBIUS_HOST_PLANNER_SIM_MACHINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "host/planner/sim/engine.h"
#include "host/topology/analysis.h"
#include "host/topology/topology.h"

namespace mobius::planner::sim {

struct SimGpu {
  int topology_gpu = -1;  // index into Topology::gpus (tests: the position)
  std::string name;
  std::vector<int> h2d_path;  // link ids, host -> GPU
  std::vector<int> d2h_path;  // link ids, GPU -> host
  int own_link = -1;          // its own PCIe link's H2D id (D2H: + 1)
  int nvlink_in = -1;         // link ids, -1 without NVLink
  int nvlink_out = -1;
};

struct SimMachine {
  std::vector<SimLink> links;
  std::vector<SimGpu> gpus;                // the job's GPUs, by position
  std::vector<std::vector<bool>> p2p;      // [position][position]
  double duplex_factor = 1.0;              // see engine.h
  int cpu_optimizer_threads = 1;           // concurrent CPU optimizer steps
  int host_memory_link = -1;               // link id of host.memory, -1 when not modelled
  // CPU optimizer steps by their DRAM traffic (> 0): a stage's step moves parameters x
  // optimizer_bytes_per_param over host.memory at most optimizer_bytes_per_s fast (its threads);
  // 0: each step takes SimStage::optimizer_seconds.
  double optimizer_bytes_per_s = 0;
  double optimizer_bytes_per_param = 30;

  int num_gpus() const { return static_cast<int>(gpus.size()); }
  // Position of a topology GPU index, -1 if not part of the machine.
  int PositionOf(int topology_gpu) const;
  // The path of a direct copy between two positions (requires p2p[a][b]).
  std::vector<int> P2pPath(int a, int b) const;
  // Adds both directions of a link; returns the H2D ("down") id, the D2H id is that + 1.
  int AddDuplexLink(const std::string& name, double bytes_per_s);
};

struct MachineOptions {
  double dma_efficiency = 0.8;
  double duplex_factor = 1.0;
  int cpu_optimizer_threads = 1;
  double host_memory_bytes_per_s = 0;   // > 0: model the DRAM as a shared link
  double optimizer_bytes_per_s = 0;     // see SimMachine
  double optimizer_bytes_per_param = 30;
};

// INVALID_ARGUMENT for an empty, duplicated or out-of-range GPU list, or a GPU without link speed.
absl::StatusOr<SimMachine> MakeMachine(const topology::Topology& topology,
                                       const topology::TopologyFacts& facts,
                                       const std::vector<int>& gpus,
                                       const MachineOptions& options = {});

}  // namespace mobius::planner::sim

#endif  // MOBIUS_HOST_PLANNER_SIM_MACHINE_H_
