// NodeResources from the topology model: each GPU's memory, switch, contention group (the uplink it
// shares into the root complex), root complex, socket, NUMA node and NVLink peers (analysis.h), the
// GPU allow-list and the host memory budgets.
//
// The allow-list uses CUDA_VISIBLE_DEVICES syntax: comma-separated entries, each a GPU index in PCI
// bus-id order (the daemon's order; CUDA agrees with CUDA_DEVICE_ORDER=PCI_BUS_ID) or a GPU UUID
// ("GPU-8c3e61a4-..."; a unique prefix of at least "GPU-" plus one character is enough, as CUDA
// accepts). Unlike CUDA, which silently stops at the first invalid entry, any bad entry is an
// error: a daemon must never guess which GPUs it may use.
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_SCHEDULER_NODE_RESOURCES_H_
#define MOBIUS_HOST_SCHEDULER_NODE_RESOURCES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "host/scheduler/resources.h"
#include "host/topology/analysis.h"
#include "host/topology/topology.h"

namespace mobius::jobs {

// One GpuResource per Topology::gpus entry, in the same order.
// REQUIRES: `facts` == topology::Analyze(topology).
std::vector<GpuResource> GpuResourcesFromTopology(const topology::Topology& topology,
                                                  const topology::TopologyFacts& facts);

// The GPU indices `spec` names (CUDA_VISIBLE_DEVICES syntax, see above), ascending. "" = none.
// INVALID_ARGUMENT naming the entry (1-based) and its text: not an index or UUID, index out of
// range, unknown or ambiguous UUID, MIG instance, duplicate GPU, empty entry.
absl::StatusOr<std::vector<int>> ParseGpuAllowList(absl::string_view spec,
                                                   const std::vector<GpuResource>& gpus);

struct NodeConfig {
  std::optional<std::string> gpu_allow_list;  // CUDA_VISIBLE_DEVICES syntax; nullopt = every GPU
  int64_t host_bytes = 0;                     // host RAM available to jobs
  int64_t pinned_bytes = 0;                   // pinned-memory budget
};

// INVALID_ARGUMENT for negative budgets ("host_bytes: ...") or a bad allow-list
// ("gpu_allow_list: entry 2 ...").
absl::StatusOr<NodeResources> MakeNodeResources(const topology::Topology& topology,
                                                const topology::TopologyFacts& facts,
                                                const NodeConfig& config);

}  // namespace mobius::jobs

#endif  // MOBIUS_HOST_SCHEDULER_NODE_RESOURCES_H_
