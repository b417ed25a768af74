// Internal to mobius::planner_api: the resolved inputs of one MakePlan call and the steps that
// make_plan.cc (the chosen plan) and alternatives.cc (the comparison table) share. Not installed
// for other components; include make_plan.h instead.
#ifndef MOBIUS_HOST_PLANNER_API_PLAN_CONTEXT_H_
#define MOBIUS_HOST_PLANNER_API_PLAN_CONTEXT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "host/planner/api/make_plan.h"
#include "host/planner/sim/simulator.h"

namespace mobius::planner::internal {

struct PlanContext {
  const model::ModelDescription* model = nullptr;
  const topology::Topology* topology = nullptr;
  const topology::TopologyFacts* facts = nullptr;
  JobShape job;
  PlanOptions options;
  std::vector<int> gpus;  // granted, ascending
  int num_microbatches = 1;
  DeviceSpec device;
  Profile profile;
  PartitionProblem problem;
  sim::SimMachine machine;
};

struct PartitionOutcome {
  Partition partition;
  std::string note;  // MIP status and gap
};

// "exact" | "mip" | "uniform". FAILED_PRECONDITION for mip without CBC in the build. "exact" with
// PlanOptions::choose_by_simulation: ChooseBySimulation.
absl::StatusOr<PartitionOutcome> RunPartitioner(const PlanContext& ctx, const std::string& name);

// The round-robin schedule's forward and backward partitions for partitioner `name`: exact ->
// ExactRoundRobinPartition (with PlanOptions::choose_by_simulation and the runtime's memory
// model: ChooseRoundRobinBySimulation); uniform -> UniformRoundRobinPartition; mip (and a fixed stage count)
// -> `shared`'s ranges for both passes (the MIP optimises one partition for both passes).
absl::StatusOr<RoundRobinPartition> RunRoundRobinPartitioner(const PlanContext& ctx,
                                                             const std::string& name,
                                                             const Partition& shared);

// The exact partitioner's per-stage-count optima (ExactPartitionPerStageCount), restricted to
// S >= N when the memory allows it (no GPU without a stage), the PlanOptions::
// simulation_candidates best by J simulated under the mobius schedule with the chosen mapper; the
// least simulated step wins (ties: the better J). The note says which S won and what the
// J-optimal S simulates.
absl::StatusOr<PartitionOutcome> ChooseBySimulation(const PlanContext& ctx);

// The round-robin counterpart: of ExactRoundRobinPartitionsPerPassCount, those with at least N
// passes first (where any), by J_rr; the first PlanOptions::simulation_candidates of them whose
// per-GPU need fits (a worker's two slots for its largest pass, every pass where passes rotate or
// pool: estimator.h) simulated under roundrobin; the least step wins (ties: the better J). None
// fits: the J-best, which MakePlan then refuses with the numbers.
absl::StatusOr<RoundRobinPartition> ChooseRoundRobinBySimulation(const PlanContext& ctx);

// "cross" | "sequential" over ctx.gpus.
absl::StatusOr<Mapping> RunMapper(const PlanContext& ctx, const std::string& name,
                                  int num_stages);

// min(N, L) stages of equal unit counts, one per GPU, scored on ctx.problem; FAILED_PRECONDITION
// (with the numbers) when a stage with its optimizer state (18 bytes/parameter with fp32
// gradients), one microbatch's activations and M checkpoints does not fit the GPU. With
// PlanOptions::megatron_resident: min(N, L) stages of the L blocks split evenly (embedding first,
// head last), one unit's activations live and (units x min(S - s, M)) checkpoints on stage s.
absl::StatusOr<Partition> ResidentPartition(const PlanContext& ctx);

// One stage per unit (the ZeRO model's granularity), scored on ctx.problem.
Partition UnitPartition(const PlanContext& ctx);

// The simulator's configuration for `schedule` from the plan's options (staleness, steps,
// dispatch, optimizer barrier, 1F1B, ZeRO model).
sim::SimConfig SimConfigFor(const PlanContext& ctx, sim::Schedule schedule);

// FAILED_PRECONDITION ("GPU memory too small", the position, its need and the capacity) when the
// plan's largest per-GPU need (plan.memory, estimator.h) exceeds the GPU: every stage fits alone,
// but a worker sizes its slots and buffers for the largest among its passes.
absl::Status CheckGpuMemory(const PlanContext& ctx, const Plan& plan);

// Simulates one step. zero: unit stages, machine order; roundrobin with `rr`: its forward and
// backward stages (without: `partition` in both passes); others: the partition's stages.
absl::StatusOr<sim::SimResult> SimulateSchedule(const PlanContext& ctx, sim::Schedule schedule,
                                                const Partition& partition, const Mapping& mapping,
                                                const RoundRobinPartition* rr = nullptr);

double TokensPerSecond(const PlanContext& ctx, double step_seconds);

// The comparison table (partitioners, mappers, schedules) around the chosen plan.
absl::StatusOr<std::vector<Alternative>> CompareAlternatives(const PlanContext& ctx,
                                                             const PartitionOutcome& base);

std::string GiB(int64_t bytes);  // "12.34 GiB"

}  // namespace mobius::planner::internal

#endif  // MOBIUS_HOST_PLANNER_API_PLAN_CONTEXT_H_
