#include "host/planner/sim/schedules.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "host/planner/sim/builder.h"

namespace mobius::planner::sim {

namespace {

// The parameters the CPU optimizer updates for unit u: UnitCost::optimizer_parameters, or, in a
// hand-built problem that gives none for any unit, the bf16 weights' (weight_bytes / 2).
int64_t OptimizerParameters(const PartitionProblem& p, int u, bool given) {
  return given ? p.units[u].optimizer_parameters : p.units[u].weight_bytes / 2;
}

// `pass_forward`: a pipeline stage's forward is what its forward pass runs
// (PartitionProblem::ForwardPassSeconds); false: every unit's whole forward (ZeRO's per-unit
// stages, whose forward computes the loss).
std::vector<SimStage> StagesOf(const PartitionProblem& p, const std::vector<StageRange>& ranges,
                               bool pass_forward) {
  bool given = false;
  for (const UnitCost& u : p.units) given = given || u.optimizer_parameters > 0;
  int64_t total = 0;
  for (int u = 0; u < p.num_units(); ++u) total += OptimizerParameters(p, u, given);
  std::vector<SimStage> out;
  for (size_t s = 0; s < ranges.size(); ++s) {
    SimStage st;
    for (int u = ranges[s].begin; u < ranges[s].end; ++u) {
      st.forward_seconds += pass_forward ? p.ForwardPassSeconds(u) : p.units[u].forward_seconds;
      st.backward_seconds += p.units[u].backward_seconds;
      st.weight_bytes += p.units[u].weight_bytes;
      st.gradient_bytes += p.units[u].gradient_bytes;
      st.parameters += OptimizerParameters(p, u, given);
    }
    st.overhead_seconds = p.stage_overhead_seconds / 2;
    st.unit_begin = ranges[s].begin;
    st.unit_end = ranges[s].end;
    st.input_bytes = s == 0 ? 0 : p.boundary_bytes;
    st.optimizer_seconds = total > 0 ? p.optimizer_seconds * static_cast<double>(st.parameters) /
                                           static_cast<double>(total)
                                     : 0;
    out.push_back(st);
  }
  return out;
}

}  // namespace


absl::StatusOr<Dispatch> ParseDispatch(const std::string& name) {
  if (name == "static") return Dispatch::kStatic;
  if (name == "pool") return Dispatch::kPool;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dispatch '", name, "' (static, pool)"));
}

std::vector<SimStage> MakeSimStages(const PartitionProblem& problem, const Partition& partition) {
  return StagesOf(problem, partition.stages, /*pass_forward=*/true);
}

std::vector<SimStage> MakeUnitSimStages(const PartitionProblem& problem) {
  std::vector<StageRange> r;
  for (int u = 0; u < problem.num_units(); ++u) r.push_back({u, u + 1});
  return StagesOf(problem, r, /*pass_forward=*/false);
}

std::vector<SimStage> MakeZeroSimStages(const PartitionProblem& problem,
                                        int64_t gradient_bytes_per_parameter) {
  std::vector<SimStage> stages = MakeUnitSimStages(problem);
  for (SimStage& st : stages) {
    st.gradient_bytes = st.gradient_bytes / std::max<int64_t>(gradient_bytes_per_parameter, 1) * 2;
  }
  return stages;
}

absl::StatusOr<TaskGraph> BuildTaskGraph(const SimMachine& machine,
                                         const std::vector<SimStage>& stages,
                                         const SimConfig& config) {
  if (stages.empty()) return absl::InvalidArgumentError("no stages to simulate");
  if (config.num_microbatches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_microbatches must be >= 1 (got ", config.num_microbatches, ")"));
  }
  if (machine.num_gpus() < 1) return absl::InvalidArgumentError("the machine has no GPU");
  if (config.steps < 1 || config.steps > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps must be in [1, 64] (got ", config.steps, ")"));
  }
  if (config.optimizer_staleness != 0 && config.optimizer_staleness != 1) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer_staleness must be 0 or 1 (got ",
                                                   config.optimizer_staleness, ")"));
  }
  if (config.zero.micro_steps < 1 || config.zero.gathers < 2 || config.zero.gathers > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("zero: micro_steps must be >= 1 and gathers 2 or 3 (got ",
                     config.zero.micro_steps, ", ", config.zero.gathers, ")"));
  }
  if (absl::Status s = ValidateInterNode(config.internode); !s.ok()) return s;
  if (config.internode.enabled() && config.schedule != Schedule::kMobius &&
      config.schedule != Schedule::kRoundRobin) {
    return absl::InvalidArgumentError(absl::StrCat(
        "internode.nodes: ", config.internode.nodes, " nodes are modelled for the mobius and "
        "roundrobin schedules (their CPU optimizer waits for the all-reduce), not '",
        ScheduleName(config.schedule), "'"));
  }
  std::vector<int> order;
  if (config.gpu_order.empty()) {
    for (int i = 0; i < machine.num_gpus(); ++i) order.push_back(i);
  } else {
    for (int g : config.gpu_order) {
      const int pos = machine.PositionOf(g);
      if (pos < 0) return absl::InvalidArgumentError(absl::StrCat("GPU ", g, " not in the machine"));
      order.push_back(pos);
    }
  }
  if (config.schedule != Schedule::kRoundRobin) {
    internal::Builder b(machine, config, std::move(order));
    return config.schedule == Schedule::kZeroOffload ? internal::BuildZero(b, stages)
                                                     : internal::BuildPipeline(b, stages);
  }
  // Hand-built stages without unit ranges: one unit each (only meaningful without a separate
  // backward partition).
  std::vector<SimStage> forward = stages;
  bool unnamed = true;
  for (const SimStage& s : forward) unnamed = unnamed && s.unit_end == 0;
  if (unnamed) {
    for (size_t s = 0; s < forward.size(); ++s) {
      forward[s].unit_begin = static_cast<int>(s);
      forward[s].unit_end = static_cast<int>(s) + 1;
    }
  }
  const std::vector<SimStage>& backward =
      config.backward_stages.empty() ? forward : config.backward_stages;
  auto covered = [](const std::vector<SimStage>& v) {
    int next = 0;
    for (const SimStage& s : v) {
      if (s.unit_begin != next || s.unit_end <= s.unit_begin) return -1;
      next = s.unit_end;
    }
    return next;
  };
  const int units = covered(forward);
  if (units < 0 || covered(backward) != units) {
    return absl::InvalidArgumentError(
        "roundrobin: forward and backward stages must each cover the same units contiguously");
  }
  const size_t passes = (forward.size() + backward.size()) * config.steps;
  std::vector<int> pass_positions;
  if (!config.pass_gpus.empty()) {
    if (config.pass_gpus.size() != passes) {
      return absl::InvalidArgumentError(
          absl::StrCat("roundrobin: pass_gpus has ", config.pass_gpus.size(), " entries for ",
                       passes, " passes (", config.steps, " steps)"));
    }
    for (int g : config.pass_gpus) {
      const int pos = machine.PositionOf(g);
      if (pos < 0) return absl::InvalidArgumentError(absl::StrCat("GPU ", g, " not in the machine"));
      pass_positions.push_back(pos);
    }
  }
  internal::Builder b(machine, config, std::move(order));
  return internal::BuildRoundRobin(b, forward, backward, pass_positions);
}

}  // namespace mobius::planner::sim
