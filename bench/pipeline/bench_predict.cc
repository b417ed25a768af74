#include "bench/pipeline/bench_predict.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "host/planner/cost_model.h"
#include "host/planner/partition.h"
#include "host/planner/profile.h"

namespace mobius::bench {
namespace {

planner::DeviceSpec CalibratedDevice(const PredictOptions& o) {
  planner::DeviceSpec d;
  d.name = "calibrated CPU core";
  d.peak_flops_per_s = o.effective_flops_per_s;
  d.nf4_dequantize_values_per_s = o.nf4_dequantize_values_per_s;
  d.efficiency = 1.0;
  d.memory_bytes = int64_t{24} << 30;  // the testbed's RTX 3090 (the cap below is what binds)
  return d;
}

planner::CostOptions Cost(const PredictOptions& o) {
  planner::CostOptions c;
  c.dma_efficiency = o.dma_efficiency * o.link_scale;
  c.optimizer_seconds_per_billion_params = o.optimizer_seconds_per_billion_params;
  return c;
}

std::vector<int> Gpus(const topology::Topology& t, const PredictOptions& o) {
  if (!o.gpus.empty()) return o.gpus;
  std::vector<int> g(t.gpus.size());
  for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<int>(i);
  return g;
}

// The same problem MakePlan builds internally (same profile, GPUs, microbatches, cost options).
absl::StatusOr<planner::PartitionProblem> Problem(const model::ModelDescription& model,
                                                  const topology::Topology& topology,
                                                  const topology::TopologyFacts& facts,
                                                  const planner::JobShape& job,
                                                  const PredictOptions& o) {
  planner::AnalyticOptions ao;
  if (o.lora.enabled()) {
    MOBIUS_ASSIGN_OR_RETURN(ao.lora, planner::MakeLoraLayout(model, o.lora));
  }
  ao.half_backward = job.dtype == "fp16" && !o.lora.enabled();  // as MakePlan sets it
  MOBIUS_ASSIGN_OR_RETURN(
      planner::Profile profile,
      planner::AnalyticProfile(model, {job.microbatch, job.seq_len}, CalibratedDevice(o), ao));
  return planner::MakePartitionProblem(profile, model, topology, facts, Gpus(topology, o),
                                       static_cast<int>(job.global_batch / job.microbatch),
                                       CalibratedDevice(o).memory_bytes, Cost(o));
}

// Reserved bytes + the two-slot memory of the largest window of `k` consecutive units.
int64_t CapFor(const planner::PartitionProblem& p, int k) {
  int64_t worst = 0;
  for (int b = 0; b + k <= p.num_units(); ++b) {
    planner::StageAccumulator acc(p);
    for (int u = b; u < b + k; ++u) acc.Add(u);
    worst = std::max(worst, acc.MemoryBytes());
  }
  return p.reserved_bytes + worst;
}

// What the runtime does that the planner's stages do not say (see the header).
std::vector<planner::sim::SimStage> RuntimeStages(const planner::PartitionProblem& p,
                                                  const planner::Partition& partition) {
  std::vector<planner::sim::SimStage> stages = planner::sim::MakeSimStages(p, partition);
  for (int s = 0; s < partition.num_stages(); ++s) {
    planner::sim::SimStage& st = stages[s];
    for (int u = partition.stages[s].begin; u + 1 < partition.stages[s].end; ++u) {
      st.backward_seconds += p.units[u].forward_seconds;  // interior inputs recomputed
    }
  }
  return stages;
}

// The planner's simulator on the runtime's stages and chunks (it already runs the backward of a
// rank's last two stages from their forward slots, as the runtime does).
absl::StatusOr<RuntimeSim> SimulateRuntime(const planner::sim::SimMachine& machine,
                                           const std::vector<planner::sim::SimStage>& stages,
                                           const planner::sim::SimConfig& config) {
  MOBIUS_ASSIGN_OR_RETURN(planner::sim::SimResult r,
                          planner::sim::Simulate(machine, stages, config));
  RuntimeSim out;
  out.step_seconds = r.step_seconds;
  for (const planner::sim::GpuStats& g : r.gpus) {
    out.max_busy_seconds = std::max(out.max_busy_seconds, g.busy_seconds);
  }
  for (const planner::sim::StageTiming& t : r.stages) {
    out.forward_end_seconds = std::max(out.forward_end_seconds, t.forward_end);
  }
  out.links = std::move(r.links);
  return out;
}

}  // namespace

absl::StatusOr<Prediction> Predict(const model::ModelDescription& model,
                                   const topology::Topology& topology,
                                   const topology::TopologyFacts& facts,
                                   const planner::JobShape& job, const PredictOptions& o,
                                   const std::string& schedule, const std::string& mapper) {
  if (!(o.effective_flops_per_s > 0) || !(o.link_scale > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("effective FLOP/s (", o.effective_flops_per_s,
                                                   ") and link scale (", o.link_scale,
                                                   ") must be positive"));
  }
  MOBIUS_ASSIGN_OR_RETURN(const planner::sim::Schedule sim_schedule,
                          planner::sim::ParseSchedule(schedule));
  Prediction pr;
  pr.name = mapper;
  pr.schedule = schedule;
  pr.mapper = mapper;
  pr.optimizer_staleness = o.optimizer_staleness;
  pr.dispatch = o.dispatch;
  pr.lora = o.lora;
  pr.precision = job.dtype;
  MOBIUS_ASSIGN_OR_RETURN(planner::PartitionProblem problem,
                          Problem(model, topology, facts, job, o));
  // roundrobin with its own partitioner: separate forward and backward partitions.
  const bool rr_own =
      sim_schedule == planner::sim::Schedule::kRoundRobin && o.roundrobin_partitioner != "shared";
  planner::PlanOptions po;
  po.schedule = sim_schedule;
  po.partitioner = rr_own ? o.roundrobin_partitioner : o.partitioner;
  po.mapper = mapper;
  po.efficiency = 1.0;
  po.device = CalibratedDevice(o);
  po.cost = Cost(o);
  po.compare = false;
  po.num_stages = rr_own ? 0 : o.num_stages;
  po.gpus = o.gpus;
  po.optimizer_staleness = o.optimizer_staleness;
  po.dispatch = o.dispatch;
  po.lora = o.lora;
  po.optimizer_after_backward = o.optimizer_after_backward;
  po.internode = o.internode;
  po.simulated_steps = sim_schedule == planner::sim::Schedule::kResident ? 1 : o.steps;
  if (o.units_per_stage > 0) {
    pr.gpu_memory_cap_bytes = CapFor(problem, std::min(o.units_per_stage, problem.num_units()));
    po.gpu_memory_bytes = pr.gpu_memory_cap_bytes;
  }
  absl::StatusOr<planner::PlanReport> report = planner::MakePlan(model, topology, facts, job, po);
  if (!report.ok()) {
    return absl::Status(report.status().code(),
                        absl::StrCat("plan (schedule ", schedule, ", mapper ", mapper,
                                     "): ", report.status().message()));
  }
  pr.report = *std::move(report);
  const planner::Plan& plan = pr.report.plan;

  planner::sim::MachineOptions mo;
  mo.dma_efficiency = o.dma_efficiency * o.link_scale;
  mo.cpu_optimizer_threads = static_cast<int>(plan.mapping.gpu_order.size());
  MOBIUS_ASSIGN_OR_RETURN(planner::sim::SimMachine machine,
                          planner::sim::MakeMachine(topology, facts, Gpus(topology, o), mo));
  planner::sim::SimConfig sc;
  sc.schedule = sim_schedule;
  sc.num_microbatches = plan.num_microbatches;
  sc.gpu_order = plan.mapping.gpu_order;
  sc.chunk_bytes = int64_t{4} << 20;  // the CPU backend's copy chunk under emulation
  sc.internode = o.internode;
  if (sim_schedule != planner::sim::Schedule::kResident) {
    sc.steps = o.steps;
    sc.optimizer_staleness = o.optimizer_staleness;
    // fp16 waits for the global norm (the loss scaler's overflow check) as clipping does.
    sc.paper_barrier = o.optimizer_after_backward || job.dtype == "fp16";
    MOBIUS_ASSIGN_OR_RETURN(sc.dispatch, planner::sim::ParseDispatch(o.dispatch));
  }
  if (plan.round_robin) sc.backward_stages = RuntimeStages(problem, plan.round_robin->backward);
  MOBIUS_ASSIGN_OR_RETURN(pr.runtime_sim,
                          SimulateRuntime(machine, RuntimeStages(problem, plan.partition), sc));
  return pr;
}

}  // namespace mobius::bench
