// BuildRunConfig: turns a plan (host/planner) into the runtime's RunConfig
// (common/run/run_config.h): the plan's stages, its stage -> GPU mapping as stage -> rank
// (rank = position in Mapping::gpu_order), and, for the CPU backend's link emulation, the PCIe links
// of those GPUs taken from the simulator's machine model (sim/machine.h): each GPU's own link and
// each shared uplink, at the simulator's effective DMA bandwidth times `link_scale`. Emulated run
// and simulator therefore describe the same links, which is what makes measured and predicted step
// times comparable.
//
// Each rank also gets the CPUs of its GPU's NUMA node (RunConfig::rank_cpus; empty when the
// topology does not say), where the worker pins itself.
//
// A roundrobin plan (plan.round_robin) becomes RunConfig's forward_stages / backward_stages and
// pass_rank[j] = j mod N: pass j runs on GpuOfPass(j) = gpu_order[j mod N].
//
// A plan with fewer stages (roundrobin: passes) than GPUs (a model small enough for fewer GPUs)
// runs on the first num_stages (num_passes) GPUs of its mapping only.
//
// Used by the daemon's supervisor and by `mobius run`. Pure; thread-safe.
#ifndef MOBIUS_HOST_LAUNCH_RUN_BUILDER_H_
#define MOBIUS_HOST_LAUNCH_RUN_BUILDER_H_

#include <string>

#include "absl/status/statusor.h"
#include "host/planner/plan.h"
#include "host/topology/analysis.h"
#include "host/topology/topology.h"
#include "common/run/run_config.h"
#include "common/run/trainer_options.h"

namespace mobius::launch {

struct EmulationOptions {
  bool enabled = true;      // CPU backend: emulate the plan's GPUs' links
  double link_scale = 1.0;  // multiplies every link's bandwidth (< 1: slower, to emulate a
                            // PCIe-bound server with a small model on a small machine)
  double dma_efficiency = 0.8;  // as the simulator (sim::MachineOptions)
};

// INVALID_ARGUMENT when the plan's GPUs are not in the topology, the scale is not positive or a
// roundrobin plan lacks its partitions.
absl::StatusOr<runtime::RunConfig> BuildRunConfig(const std::string& job_id,
                                                  const train::TrainerOptions& training,
                                                  const planner::Plan& plan,
                                                  const topology::Topology& topology,
                                                  const topology::TopologyFacts& facts,
                                                  const EmulationOptions& emulation);

}  // namespace mobius::launch

#endif  // MOBIUS_HOST_LAUNCH_RUN_BUILDER_H_
