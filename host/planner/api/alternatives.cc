// The steps MakePlan shares with the comparison table, and the table itself. Every row runs on the
// same PartitionProblem (profile, link rates, memory budget) and the same simulated machine, so the
// rows differ only in the one dimension they swap.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "host/planner/api/plan_context.h"
#include "host/planner/estimator.h"
#include "host/planner/mapping.h"
#include "host/planner/partition.h"
#ifdef MOBIUS_HAVE_MIP
#include "host/planner/mip/mip_partition.h"
#endif

namespace mobius::planner::internal {
namespace {

// A fixed set of ranges scored like ScorePartition (backward uploads included) without the
// two-slot memory check (resident and per-unit stages have their own memory rules).
Partition ScoreRanges(const PartitionProblem& p, std::vector<StageRange> ranges) {
  Partition out;
  out.stages = std::move(ranges);
  const int first_reused = out.num_stages() - ReusedBackwardStages(p, out.num_stages());
  for (int s = 0; s < out.num_stages(); ++s) {
    const StageRange& r = out.stages[s];
    out.costs.push_back(EvaluateStage(p, r.begin, r.end, /*backward_upload=*/s < first_reused));
    out.max_slot_seconds = std::max(out.max_slot_seconds, out.costs.back().slot_seconds);
  }
  out.objective_seconds = Objective(p, out.num_stages(), out.max_slot_seconds);
  return out;
}

Alternative RowFromSim(const PlanContext& ctx, const std::string& dimension,
                       const std::string& name, const sim::SimResult& r) {
  Alternative a;
  a.dimension = dimension;
  a.name = name;
  a.step_seconds = r.step_seconds;
  a.tokens_per_second = TokensPerSecond(ctx, r.step_seconds);
  a.h2d_bytes = r.h2d_bytes;
  a.d2h_bytes = r.d2h_bytes;
  a.weight_upload_bytes = r.weight_upload_bytes;
  return a;
}

std::string RoundRobinNote(const RoundRobinPartition& rr, const std::string& extra) {
  return absl::StrCat(rr.forward.num_stages(), " fwd + ", rr.backward.num_stages(), " bwd stages",
                      extra.empty() ? "" : "; ", extra);
}

Alternative Unavailable(const std::string& dimension, const std::string& name,
                        const absl::Status& why) {
  Alternative a;
  a.dimension = dimension;
  a.name = name;
  a.available = false;
  a.note = std::string(why.message());
  return a;
}

}  // namespace

absl::StatusOr<PartitionOutcome> ChooseBySimulation(const PlanContext& ctx) {
  MOBIUS_ASSIGN_OR_RETURN(std::vector<Partition> per_s, ExactPartitionPerStageCount(ctx.problem));
  const int n = static_cast<int>(ctx.gpus.size());
  // The J-optimal partition (what ExactPartition returns: least J, ties the smaller bottleneck).
  size_t j_best = 0;
  for (size_t i = 1; i < per_s.size(); ++i) {
    const Partition& a = per_s[i];
    const Partition& b = per_s[j_best];
    if (a.objective_seconds < b.objective_seconds ||
        (a.objective_seconds == b.objective_seconds && a.max_slot_seconds < b.max_slot_seconds)) {
      j_best = i;
    }
  }
  // No GPU left without a stage when the memory allows S >= N (every S from the least feasible
  // one up to L is feasible: splitting a stage keeps it fitting, and every unit fits alone).
  std::vector<size_t> allowed;
  for (size_t i = 0; i < per_s.size(); ++i) {
    if (per_s[i].num_stages() >= n) allowed.push_back(i);
  }
  const bool all_gpus_possible = !allowed.empty();
  if (!all_gpus_possible) {
    for (size_t i = 0; i < per_s.size(); ++i) allowed.push_back(i);
  }
  std::stable_sort(allowed.begin(), allowed.end(), [&](size_t a, size_t b) {
    return per_s[a].objective_seconds < per_s[b].objective_seconds;
  });
  const size_t keep = static_cast<size_t>(std::max(1, ctx.options.simulation_candidates));
  if (allowed.size() > keep) allowed.resize(keep);
  // The schedule the stages run under (roundrobin plans keep their own partitions; this one is
  // the mobius pipeline's, also the base of roundrobin's "shared" contrast row).
  size_t chosen = allowed.front();
  double chosen_step = 0, j_best_step = -1;
  for (size_t i : allowed) {
    MOBIUS_ASSIGN_OR_RETURN(Mapping map, RunMapper(ctx, ctx.options.mapper, per_s[i].num_stages()));
    MOBIUS_ASSIGN_OR_RETURN(sim::SimResult r,
                            SimulateSchedule(ctx, sim::Schedule::kMobius, per_s[i], map));
    if (i == j_best) j_best_step = r.step_seconds;
    if (i == allowed.front() || r.step_seconds < chosen_step) {
      chosen = i;
      chosen_step = r.step_seconds;
    }
  }
  PartitionOutcome out;
  out.partition = per_s[chosen];
  const Partition& jb = per_s[j_best];
  out.note = absl::StrFormat("S = %d chosen by simulation among %d J-best stage counts (%.4f s/step)",
                             out.partition.num_stages(), static_cast<int>(allowed.size()),
                             chosen_step);
  if (!all_gpus_possible) {
    out.note += absl::StrFormat(
        "; %d GPU(s) hold no stage: the model has only %d layer units for %d GPUs, so some GPU "
        "must idle, and this S simulates fastest",
        n - out.partition.num_stages(), ctx.problem.num_units(), n);
  }
  if (chosen != j_best) {
    out.note += j_best_step >= 0
                    ? absl::StrFormat("; the J-optimal S = %d simulates %.4f s/step",
                                      jb.num_stages(), j_best_step)
                    : absl::StrFormat("; the J-optimal S = %d would leave %d GPU(s) without a stage",
                                      jb.num_stages(), n - jb.num_stages());
  }
  return out;
}

absl::StatusOr<PartitionOutcome> RunPartitioner(const PlanContext& ctx, const std::string& name) {
  PartitionOutcome out;
  if (name == "exact" && ctx.options.choose_by_simulation) {
    return ChooseBySimulation(ctx);
  } else if (name == "exact") {
    MOBIUS_ASSIGN_OR_RETURN(out.partition, ExactPartition(ctx.problem));
  } else if (name == "uniform") {
    MOBIUS_ASSIGN_OR_RETURN(out.partition, UniformPartition(ctx.problem));
  } else if (name == "mip") {
#ifdef MOBIUS_HAVE_MIP
    MipOptions mo;
    mo.time_limit_seconds = ctx.options.mip_time_limit_seconds;
    mo.time_limit_per_solve_seconds = ctx.options.mip_time_limit_seconds;
    MOBIUS_ASSIGN_OR_RETURN(MipResult mip, MipPartition(ctx.problem, mo));
    // The MIP optimises the paper's objective (every backward uploads); the plan's J, like every
    // other row's, is the cost model's with the two-slot reuse.
    MOBIUS_ASSIGN_OR_RETURN(out.partition, ScorePartition(ctx.problem, mip.partition.stages));
    out.note = absl::StrFormat("CBC %s (paper's J %.4f s), gap %.2f%%, %d solves, %d nodes, %.2f s",
                               MipStatusName(mip.status), mip.partition.objective_seconds,
                               100 * mip.relative_gap, mip.solves, mip.nodes, mip.wall_seconds);
#else
    return absl::FailedPreconditionError(
        "mip not available in this build (COIN-OR CBC was not found at configure time)");
#endif
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown partitioner '", name, "'"));
  }
  return out;
}

bool RoundRobinFitsEveryGpu(const PlanContext& ctx, const RoundRobinPartition& rr,
                            const Mapping& mapping) {
  if (ctx.problem.memory_model != MemoryModel::kRuntime) return true;  // per stage = per GPU
  Plan plan;
  plan.num_microbatches = ctx.num_microbatches;
  plan.round_robin = rr;
  plan.mapping = mapping;
  const int n = static_cast<int>(mapping.gpu_order.size());
  EstimatorOptions eo;
  eo.every_pass_on_every_gpu =
      n > 1 && (ctx.options.dispatch == "pool" || rr.num_passes() % n != 0);
  const MemoryEstimate m = EstimateRoundRobinMemory(*ctx.model, ctx.profile, ctx.problem, plan, eo);
  return m.max_gpu_bytes <= m.gpu_capacity_bytes;
}

absl::StatusOr<RoundRobinPartition> ChooseRoundRobinBySimulation(const PlanContext& ctx) {
  MOBIUS_ASSIGN_OR_RETURN(std::vector<RoundRobinPartition> per_count,
                          ExactRoundRobinPartitionsPerPassCount(ctx.problem));
  const int n = static_cast<int>(ctx.gpus.size());
  std::vector<size_t> order;
  for (size_t i = 0; i < per_count.size(); ++i) order.push_back(i);
  // No GPU without a pass where possible, then by J_rr.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const bool fa = per_count[a].num_passes() >= n, fb = per_count[b].num_passes() >= n;
    if (fa != fb) return fa;
    return per_count[a].objective_seconds < per_count[b].objective_seconds;
  });
  const size_t keep = static_cast<size_t>(std::max(1, ctx.options.simulation_candidates));
  size_t chosen = order.front();
  double chosen_step = -1;
  size_t simulated = 0;
  for (size_t i : order) {
    if (simulated == keep) break;
    MOBIUS_ASSIGN_OR_RETURN(Mapping map,
                            RunMapper(ctx, ctx.options.mapper, per_count[i].num_passes()));
    // A worker sizes its slots for its largest pass: stages that fit alone may not together.
    if (!RoundRobinFitsEveryGpu(ctx, per_count[i], map)) continue;
    ++simulated;
    MOBIUS_ASSIGN_OR_RETURN(sim::SimResult r,
                            SimulateSchedule(ctx, sim::Schedule::kRoundRobin,
                                             per_count[i].forward, map, &per_count[i]));
    if (chosen_step < 0 || r.step_seconds < chosen_step) {
      chosen = i;
      chosen_step = r.step_seconds;
    }
  }
  return std::move(per_count[chosen]);
}

absl::StatusOr<RoundRobinPartition> RunRoundRobinPartitioner(const PlanContext& ctx,
                                                             const std::string& name,
                                                             const Partition& shared) {
  if (ctx.options.num_stages > 0 || name == "mip") {
    return SharedRoundRobinPartition(ctx.problem, shared.stages);
  }
  // Our runtime's plans (kRuntime): the fastest simulated of the J-best pass counts that fit every
  // GPU; the published systems' setups keep the J optimum their calibration was made with.
  if (name == "exact" && ctx.options.choose_by_simulation &&
      ctx.problem.memory_model == MemoryModel::kRuntime) {
    return ChooseRoundRobinBySimulation(ctx);
  }
  if (name == "exact") return ExactRoundRobinPartition(ctx.problem);
  if (name == "uniform") return UniformRoundRobinPartition(ctx.problem);
  return absl::InvalidArgumentError(absl::StrCat("unknown partitioner '", name, "'"));
}

absl::StatusOr<Mapping> RunMapper(const PlanContext& ctx, const std::string& name,
                                  int num_stages) {
  if (name == "cross") return CrossMapping(*ctx.facts, ctx.gpus, num_stages);
  if (name == "sequential") return SequentialMapping(*ctx.facts, ctx.gpus, num_stages);
  return absl::InvalidArgumentError(absl::StrCat("unknown mapper '", name, "'"));
}

absl::StatusOr<Partition> ResidentPartition(const PlanContext& ctx) {
  const PartitionProblem& p = ctx.problem;
  const int units = p.num_units();
  const bool megatron = ctx.options.megatron_resident && units >= 3;
  // Megatron: the L blocks (units 1..L) evenly, the embedding with the first, the head with the
  // last; ours: equal unit counts.
  const int splittable = megatron ? units - 2 : units;
  const int stages = std::min(p.num_gpus, splittable);
  std::vector<StageRange> ranges;
  for (int s = 0, begin = 0; s < stages; ++s) {
    int size = splittable / stages + (s < splittable % stages ? 1 : 0);
    if (megatron && s == 0) ++size;
    if (megatron && s == stages - 1) ++size;
    ranges.push_back({begin, begin + size});
    begin += size;
  }
  const int64_t budget = p.gpu_memory_bytes - p.reserved_bytes;
  // bf16 weights are 2 bytes/parameter; resident full fine-tuning keeps weights 2 + gradients
  // (the profile's dtype) + fp32 master and moments 12 bytes/parameter: state per weight byte.
  // LoRA: W (bf16 base + fp32 adapters, which are their own masters) + G (adapter gradients) +
  // Adam m and v, 8 bytes per adapter parameter.
  const int64_t state_per_param = 2 + ctx.profile.gradient_bytes_per_parameter + 12;
  const bool lora = ctx.profile.lora.has_value();
  auto state_of = [&](int begin, int end) {
    int64_t state = 0;
    for (int u = begin; u < end; ++u) {
      const UnitCost& c = p.units[u];
      state += lora ? c.weight_bytes + c.gradient_bytes + 8 * c.optimizer_parameters
                    : c.weight_bytes / 2 * state_per_param;
    }
    return state;
  };
  const int64_t gpus_needed = budget > 0 ? (state_of(0, units) + budget - 1) / budget : 0;
  for (int s = 0; s < stages; ++s) {
    int64_t activations = 0;
    for (int u = ranges[s].begin; u < ranges[s].end; ++u) {
      // Ours recomputes a stage at once (all its units' activations live); Megatron one layer.
      activations = megatron ? std::max(activations, p.units[u].activation_bytes)
                             : activations + p.units[u].activation_bytes;
    }
    const int64_t state = state_of(ranges[s].begin, ranges[s].end);
    // Ours (GPipe order): the stage input of all M microbatches. Megatron: every block's input
    // of the min(S - s, M) microbatches 1F1B keeps in flight on stage s.
    int blocks = ranges[s].end - ranges[s].begin;
    if (megatron) blocks -= (s == 0) + (s == stages - 1);
    const int64_t checkpoints =
        megatron ? int64_t{blocks} * std::min(stages - s, ctx.num_microbatches) * p.boundary_bytes
                 : p.num_microbatches * p.boundary_bytes;
    const int64_t need = state + activations + checkpoints;
    if (need > budget && ctx.options.resident_memory_check) {
      return absl::FailedPreconditionError(absl::StrCat(
          "resident schedule does not fit: stage ", s, " (units ", ranges[s].begin, "..",
          ranges[s].end - 1, ") needs ", GiB(need + p.reserved_bytes),
          lora ? " (frozen base, adapters, their gradients and Adam state "
               : " (weights, gradients and Adam state ",
          GiB(state), " + activations ", GiB(activations), " + checkpoints ", GiB(checkpoints),
          " + reserved ", GiB(p.reserved_bytes), ") but the GPU has ", GiB(p.gpu_memory_bytes),
          "; to fit: at least ", gpus_needed,
          " GPUs of this size (model state alone), or the mobius schedule (swaps stages "
          "through host memory)"));
    }
  }
  return ScoreRanges(p, std::move(ranges));
}

Partition UnitPartition(const PlanContext& ctx) {
  std::vector<StageRange> ranges;
  for (int u = 0; u < ctx.problem.num_units(); ++u) ranges.push_back({u, u + 1});
  return ScoreRanges(ctx.problem, std::move(ranges));
}

sim::SimConfig SimConfigFor(const PlanContext& ctx, sim::Schedule schedule) {
  const PlanOptions& o = ctx.options;
  sim::SimConfig c;
  c.schedule = schedule;
  c.num_microbatches = ctx.num_microbatches;
  const bool swapped = schedule == sim::Schedule::kMobius || schedule == sim::Schedule::kRoundRobin;
  if (swapped) {
    c.internode = o.internode;
    c.optimizer_staleness = o.optimizer_staleness;
    c.steps = o.simulated_steps > 0 ? o.simulated_steps : (o.optimizer_staleness == 1 ? 3 : 1);
    // Our runtime's fp16 mode updates nothing before the global norm says the step is finite.
    c.paper_barrier = o.optimizer_after_backward ||
                      (ctx.job.dtype == "fp16" && o.cost.memory_model == MemoryModel::kRuntime);
  }
  if (schedule == sim::Schedule::kRoundRobin) {
    c.dispatch = *sim::ParseDispatch(o.dispatch);  // checked by MakePlan
  }
  c.one_f_one_b = o.megatron_resident;
  c.zero = o.zero;
  if (o.zero_as_deepspeed_runs_it) {
    const int n = ctx.machine.num_gpus();
    c.zero.micro_steps = std::max(1, ctx.num_microbatches / std::max(1, n));
    c.zero.gathers = 3;
    bool all_p2p = true;
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) all_p2p = all_p2p && (a == b || ctx.machine.p2p[a][b]);
    }
    c.zero.host_staged_collectives = !all_p2p;
  }
  return c;
}

absl::StatusOr<sim::SimResult> SimulateSchedule(const PlanContext& ctx, sim::Schedule schedule,
                                                const Partition& partition, const Mapping& mapping,
                                                const RoundRobinPartition* rr) {
  sim::SimConfig c = SimConfigFor(ctx, schedule);
  if (schedule == sim::Schedule::kZeroOffload) {
    c.gpu_order = ctx.gpus;
    // DeepSpeed's ZeRO-offload moves bf16 gradients to the host, whatever our runtime's dtype.
    return sim::Simulate(
        ctx.machine, sim::MakeZeroSimStages(ctx.problem, ctx.profile.gradient_bytes_per_parameter),
        c);
  }
  c.gpu_order = mapping.gpu_order;
  if (schedule == sim::Schedule::kRoundRobin && rr != nullptr) {
    c.backward_stages = sim::MakeSimStages(ctx.problem, rr->backward);
    return sim::Simulate(ctx.machine, sim::MakeSimStages(ctx.problem, rr->forward), c);
  }
  return sim::Simulate(ctx.machine, sim::MakeSimStages(ctx.problem, partition), c);
}

absl::StatusOr<std::vector<Alternative>> CompareAlternatives(const PlanContext& ctx,
                                                             const PartitionOutcome& base) {
  std::vector<Alternative> rows;
  const PlanOptions& o = ctx.options;
  const sim::Schedule chosen_schedule = o.schedule;
  // Partitioner and mapper rows run a stage-bound pipeline: the chosen one, or mobius.
  const sim::Schedule pipeline = chosen_schedule == sim::Schedule::kRoundRobin
                                     ? sim::Schedule::kRoundRobin
                                     : sim::Schedule::kMobius;
  MOBIUS_ASSIGN_OR_RETURN(Mapping base_mapping,
                          RunMapper(ctx, o.mapper, base.partition.num_stages()));
  const bool rr_chosen = chosen_schedule == sim::Schedule::kRoundRobin;
  MOBIUS_ASSIGN_OR_RETURN(RoundRobinPartition base_rr,
                          RunRoundRobinPartitioner(ctx, o.partitioner, base.partition));

  for (const std::string name : {"exact", "mip", "uniform"}) {
    absl::StatusOr<PartitionOutcome> part =
        name == o.partitioner ? absl::StatusOr<PartitionOutcome>(base) : RunPartitioner(ctx, name);
    if (!part.ok()) {
      rows.push_back(Unavailable("partitioner", name, part.status()));
      continue;
    }
    if (rr_chosen) {
      MOBIUS_ASSIGN_OR_RETURN(RoundRobinPartition rr,
                              RunRoundRobinPartitioner(ctx, name, part->partition));
      MOBIUS_ASSIGN_OR_RETURN(Mapping map, RunMapper(ctx, o.mapper, rr.num_passes()));
      MOBIUS_ASSIGN_OR_RETURN(sim::SimResult r,
                              SimulateSchedule(ctx, pipeline, rr.forward, map, &rr));
      Alternative a = RowFromSim(ctx, "partitioner", name, r);
      a.chosen = name == o.partitioner;
      a.note = RoundRobinNote(rr, part->note);
      a.num_stages = rr.num_passes();
      a.objective_seconds = rr.objective_seconds;
      a.contention_score = map.contention_score;
      rows.push_back(std::move(a));
      continue;
    }
    MOBIUS_ASSIGN_OR_RETURN(Mapping map, RunMapper(ctx, o.mapper, part->partition.num_stages()));
    MOBIUS_ASSIGN_OR_RETURN(sim::SimResult r,
                            SimulateSchedule(ctx, pipeline, part->partition, map));
    Alternative a = RowFromSim(ctx, "partitioner", name, r);
    a.chosen = name == o.partitioner;
    a.note = part->note;
    a.num_stages = part->partition.num_stages();
    a.objective_seconds = part->partition.objective_seconds;
    a.contention_score = map.contention_score;
    rows.push_back(std::move(a));
  }

  for (const std::string name : {"cross", "sequential"}) {
    const int slots = rr_chosen ? base_rr.num_passes() : base.partition.num_stages();
    MOBIUS_ASSIGN_OR_RETURN(Mapping map, RunMapper(ctx, name, slots));
    MOBIUS_ASSIGN_OR_RETURN(sim::SimResult r, SimulateSchedule(ctx, pipeline, base.partition, map,
                                                               rr_chosen ? &base_rr : nullptr));
    Alternative a = RowFromSim(ctx, "mapper", name, r);
    a.chosen = name == o.mapper;
    a.num_stages = slots;
    a.objective_seconds = rr_chosen ? base_rr.objective_seconds : base.partition.objective_seconds;
    a.contention_score = map.contention_score;
    a.note = map.method;
    rows.push_back(std::move(a));
  }

  for (sim::Schedule s : {sim::Schedule::kMobius, sim::Schedule::kRoundRobin,
                          sim::Schedule::kResident, sim::Schedule::kZeroOffload}) {
    const std::string name = sim::ScheduleName(s);
    Partition part = base.partition;
    Mapping map = base_mapping;
    if (s == sim::Schedule::kRoundRobin) {
      // Separate forward/backward partitions (the schedule's own), and for contrast one
      // partition for both passes (the chosen partitioner's stages).
      MOBIUS_ASSIGN_OR_RETURN(Mapping rr_map, RunMapper(ctx, o.mapper, base_rr.num_passes()));
      MOBIUS_ASSIGN_OR_RETURN(sim::SimResult r,
                              SimulateSchedule(ctx, s, base_rr.forward, rr_map, &base_rr));
      Alternative a = RowFromSim(ctx, "schedule", name, r);
      a.chosen = s == chosen_schedule;
      a.num_stages = base_rr.num_passes();
      a.objective_seconds = base_rr.objective_seconds;
      a.note = RoundRobinNote(base_rr, "");
      rows.push_back(std::move(a));
      MOBIUS_ASSIGN_OR_RETURN(RoundRobinPartition shared,
                              SharedRoundRobinPartition(ctx.problem, base.partition.stages));
      MOBIUS_ASSIGN_OR_RETURN(Mapping shared_map, RunMapper(ctx, o.mapper, shared.num_passes()));
      MOBIUS_ASSIGN_OR_RETURN(sim::SimResult rs,
                              SimulateSchedule(ctx, s, shared.forward, shared_map, &shared));
      Alternative b = RowFromSim(ctx, "schedule", "rr-shared", rs);
      b.num_stages = shared.num_passes();
      b.objective_seconds = shared.objective_seconds;
      b.note = "roundrobin, one partition for both passes";
      rows.push_back(std::move(b));
      continue;
    }
    if (o.internode.enabled() &&
        (s == sim::Schedule::kResident || s == sim::Schedule::kZeroOffload)) {
      rows.push_back(Unavailable(
          "schedule", name,
          absl::UnimplementedError("not modelled across nodes (mobius and roundrobin are)")));
      continue;
    }
    if (s == sim::Schedule::kResident) {
      absl::StatusOr<Partition> res = ResidentPartition(ctx);
      if (!res.ok()) {
        rows.push_back(Unavailable("schedule", name, res.status()));
        continue;
      }
      part = *std::move(res);
      MOBIUS_ASSIGN_OR_RETURN(map, RunMapper(ctx, o.mapper, part.num_stages()));
    } else if (s == sim::Schedule::kZeroOffload) {
      part = UnitPartition(ctx);
    }
    MOBIUS_ASSIGN_OR_RETURN(sim::SimResult r, SimulateSchedule(ctx, s, part, map));
    Alternative a = RowFromSim(ctx, "schedule", name, r);
    a.chosen = s == chosen_schedule;
    a.num_stages = part.num_stages();
    if (s == sim::Schedule::kZeroOffload) {
      const sim::ZeroConfig z = SimConfigFor(ctx, s).zero;
      a.note = ctx.options.zero_as_deepspeed_runs_it
                   ? absl::StrCat("ZeRO-3 offload as DeepSpeed runs it: ", z.micro_steps,
                                  " micro-steps, ", z.gathers, " gathers per layer",
                                  z.host_staged_collectives ? ", collectives through host memory"
                                                            : "")
                   : "reference model, layer granularity";
      if (ctx.profile.lora) {
        a.note += "; LoRA: the frozen base still partitioned and gathered, adapter gradients only";
      }
    }
    if (s == sim::Schedule::kResident) a.note = "no swapping, optimizer state on the GPUs";
    rows.push_back(std::move(a));
  }
  return rows;
}

}  // namespace mobius::planner::internal
