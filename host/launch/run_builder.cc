#include "host/launch/run_builder.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "host/planner/sim/machine.h"

namespace mobius::launch {

absl::StatusOr<runtime::RunConfig> BuildRunConfig(const std::string& job_id,
                                                  const train::TrainerOptions& training,
                                                  const planner::Plan& plan,
                                                  const topology::Topology& topology,
                                                  const topology::TopologyFacts& facts,
                                                  const EmulationOptions& emulation) {
  if (!(emulation.link_scale > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("link scale must be positive (got ",
                                                   emulation.link_scale, ")"));
  }
  std::vector<int> order = plan.mapping.gpu_order;
  if (order.empty()) return absl::InvalidArgumentError("the plan maps its stages to no GPU");
  const runtime::Schedule schedule = plan.schedule;
  const bool round_robin = runtime::Traits(schedule).separate_pass_partitions;
  if (round_robin && !plan.round_robin) {
    return absl::InvalidArgumentError(
        "the plan's schedule is roundrobin but it has no forward/backward partitions");
  }
  // Fewer stages (roundrobin: passes) than GPUs (a small model): the GPUs without one get no
  // worker.
  const int units_of_work = round_robin ? plan.num_passes() : plan.num_stages();
  if (units_of_work < static_cast<int>(order.size())) order.resize(units_of_work);
  runtime::RunConfig run;
  run.job_id = job_id;
  run.training = training;
  run.training.microbatch = plan.shape.microbatch_size;
  run.num_workers = static_cast<int>(order.size());
  run.schedule = schedule;
  run.rank_gpu = order;
  // Each rank's NUMA node CPUs (the worker pins itself to those usable where it runs).
  for (int g : order) {
    std::vector<int> cpus;
    if (g >= 0 && g < static_cast<int>(topology.gpus.size())) {
      const int pci = topology.gpus[g].pci;
      const int node =
          pci >= 0 && pci < static_cast<int>(topology.pci.size()) ? topology.pci[pci].numa_node : -1;
      for (const topology::NumaNode& n : topology.numa_nodes) {
        if (n.os_index == node && node >= 0) cpus = n.cpus;
      }
    }
    run.rank_cpus.push_back(std::move(cpus));
  }
  if (round_robin) {
    // Pass j runs on GpuOfPass(j) = gpu_order[j mod N], i.e. rank j mod N.
    for (const planner::StageRange& r : plan.round_robin->forward.stages) {
      run.forward_stages.push_back({r.begin, r.end});
    }
    for (const planner::StageRange& r : plan.round_robin->backward.stages) {
      run.backward_stages.push_back({r.begin, r.end});
    }
    for (int j = 0; j < plan.num_passes(); ++j) run.pass_rank.push_back(j % run.num_workers);
  } else {
    for (int s = 0; s < plan.num_stages(); ++s) {
      run.stages.push_back({plan.partition.stages[s].begin, plan.partition.stages[s].end});
      run.stage_rank.push_back(s % run.num_workers);
    }
  }
  if (!emulation.enabled) return run;
  planner::sim::MachineOptions mo;
  mo.dma_efficiency = emulation.dma_efficiency;
  MOBIUS_ASSIGN_OR_RETURN(planner::sim::SimMachine machine,
                          planner::sim::MakeMachine(topology, facts, order, mo));
  std::map<int, int> link_of;  // simulator h2d link id -> emulated link index
  run.rank_links.resize(run.num_workers);
  for (int pos = 0; pos < machine.num_gpus(); ++pos) {
    for (int id : machine.gpus[pos].h2d_path) {
      auto [it, added] = link_of.emplace(id, static_cast<int>(run.links.size()));
      if (added) {
        const planner::sim::SimLink& l = machine.links[id];
        run.links.push_back({std::string(absl::StripSuffix(l.name, ".h2d")),
                             l.bytes_per_s * emulation.link_scale});
      }
      run.rank_links[pos].push_back(it->second);
    }
  }
  run.link_scale = emulation.link_scale;
  return run;
}

}  // namespace mobius::launch
