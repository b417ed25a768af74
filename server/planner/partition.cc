#include "server/planner/partition.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace mobius::planner {
namespace {

std::string GiB(int64_t bytes) {
  return absl::StrFormat("%.2f GiB (%d bytes)", static_cast<double>(bytes) / (1 << 30), bytes);
}

absl::Status CheckProblem(const PartitionProblem& p) {
  if (p.units.empty()) return absl::InvalidArgumentError("the model has no layer units");
  if (p.num_gpus < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a GPU plan needs at least one GPU (got ", p.num_gpus, ")"));
  }
  if (p.num_microbatches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_microbatches must be >= 1 (got ", p.num_microbatches, ")"));
  }
  if (!(p.h2d_bytes_per_s > 0) || !(p.d2h_bytes_per_s > 0)) {
    return absl::InvalidArgumentError("host link bandwidths must be positive");
  }
  return absl::OkStatus();
}

Partition Finish(const PartitionProblem& p, std::vector<StageRange> stages) {
  Partition part;
  part.stages = std::move(stages);
  for (const StageRange& r : part.stages) {
    part.costs.push_back(EvaluateStage(p, r.begin, r.end));
    part.max_slot_seconds = std::max(part.max_slot_seconds, part.costs.back().slot_seconds);
  }
  part.objective_seconds = Objective(p, part.num_stages(), part.max_slot_seconds);
  return part;
}

// Greedy packing under bound `t`: fewest stages with every tau <= t and every stage fitting.
// Returns false when some unit alone exceeds t.
bool GreedyPack(const PartitionProblem& p, double t, std::vector<StageRange>* stages) {
  stages->clear();
  const int n = p.num_units();
  const int64_t budget = p.stage_memory_budget_bytes();
  int begin = 0;
  while (begin < n) {
    StageAccumulator acc(p);
    int end = begin;
    while (end < n) {
      StageAccumulator next = acc;
      next.Add(end);
      if (next.MemoryBytes() > budget || next.Cost().slot_seconds > t) break;
      acc = next;
      ++end;
    }
    if (end == begin) return false;
    stages->push_back({begin, end});
    begin = end;
  }
  return true;
}

}  // namespace

absl::Status CheckEveryUnitFits(const PartitionProblem& p) {
  MOBIUS_RETURN_IF_ERROR(CheckProblem(p));
  const int64_t budget = p.stage_memory_budget_bytes();
  for (int u = 0; u < p.num_units(); ++u) {
    const StageCost c = EvaluateStage(p, u, u + 1);
    if (c.memory_bytes <= budget) continue;
    const UnitCost& unit = p.units[u];
    return absl::FailedPreconditionError(absl::StrCat(
        "layer unit ", u, " does not fit on a GPU even alone: it needs ",
        GiB(c.memory_bytes + p.reserved_bytes), " (2 stage slots x [weights ",
        GiB(unit.weight_bytes), " + gradients ", GiB(unit.gradient_bytes), " + activations ",
        GiB(unit.activation_bytes), "] + reserved ", GiB(p.reserved_bytes),
        " for margin and workspace) but the GPU has ", GiB(p.gpu_memory_bytes),
        "; to make it fit: lower the microbatch size or sequence length (activations scale with "
        "both), or use GPUs with more memory"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Partition> ScorePartition(const PartitionProblem& p,
                                         const std::vector<StageRange>& stages) {
  MOBIUS_RETURN_IF_ERROR(CheckProblem(p));
  int next = 0;
  for (const StageRange& r : stages) {
    if (r.begin != next || r.end <= r.begin || r.end > p.num_units()) {
      return absl::InvalidArgumentError(absl::StrCat("stages must cover units [0, ", p.num_units(),
                                                     ") contiguously; stage [", r.begin, ", ",
                                                     r.end, ") follows unit ", next));
    }
    next = r.end;
  }
  if (next != p.num_units()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stages cover units [0, ", next, ") of ", p.num_units()));
  }
  Partition part = Finish(p, stages);
  for (int s = 0; s < part.num_stages(); ++s) {
    if (part.costs[s].memory_bytes > p.stage_memory_budget_bytes()) {
      return absl::FailedPreconditionError(
          absl::StrCat("stage ", s, " (units [", stages[s].begin, ", ", stages[s].end, ")) needs ",
                       GiB(part.costs[s].memory_bytes + p.reserved_bytes), " but the GPU has ",
                       GiB(p.gpu_memory_bytes), "; use more stages"));
    }
  }
  return part;
}

absl::StatusOr<Partition> ExactPartition(const PartitionProblem& p) {
  MOBIUS_RETURN_IF_ERROR(CheckEveryUnitFits(p));
  const int n = p.num_units();
  const int64_t budget = p.stage_memory_budget_bytes();
  // Candidate bottlenecks: tau of every memory-feasible range (ranges grow from each start until
  // memory runs out; memory is monotone in the range).
  std::vector<double> candidates;
  for (int begin = 0; begin < n; ++begin) {
    StageAccumulator acc(p);
    for (int end = begin; end < n; ++end) {
      acc.Add(end);
      if (acc.MemoryBytes() > budget) break;
      candidates.push_back(acc.Cost().slot_seconds);
    }
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());

  std::vector<StageRange> stages, best_stages;
  double best = 0;
  for (double t : candidates) {
    if (!GreedyPack(p, t, &stages)) continue;
    double bottleneck = 0;
    for (const StageRange& r : stages) {
      bottleneck = std::max(bottleneck, EvaluateStage(p, r.begin, r.end).slot_seconds);
    }
    const double j = Objective(p, static_cast<int>(stages.size()), bottleneck);
    if (best_stages.empty() || j < best) {
      best = j;
      best_stages = stages;
    }
  }
  // Every unit fits, so the largest candidate (whole feasible ranges) always packs.
  return Finish(p, std::move(best_stages));
}

absl::StatusOr<Partition> UniformPartition(const PartitionProblem& p, int num_stages) {
  MOBIUS_RETURN_IF_ERROR(CheckProblem(p));
  const int n = p.num_units();
  auto make = [n](int s) {
    std::vector<StageRange> stages;
    int begin = 0;
    for (int i = 0; i < s; ++i) {
      const int size = n / s + (i < n % s ? 1 : 0);
      stages.push_back({begin, begin + size});
      begin += size;
    }
    return stages;
  };
  if (num_stages != 0) {
    if (num_stages < 1 || num_stages > n) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_stages must be in [1, ", n, "] (got ", num_stages, ")"));
    }
    return ScorePartition(p, make(num_stages));
  }
  MOBIUS_RETURN_IF_ERROR(CheckEveryUnitFits(p));
  for (int s = std::min(p.num_gpus, n); s <= n; ++s) {
    absl::StatusOr<Partition> part = ScorePartition(p, make(s));
    if (part.ok()) return part;
  }
  // Unreachable: with one unit per stage every stage fits (checked above).
  return ScorePartition(p, make(n));
}

namespace {

RoundRobinPartition FinishRoundRobin(const PartitionProblem& p, Partition forward,
                                     Partition backward) {
  RoundRobinPartition rr;
  rr.forward = std::move(forward);
  rr.backward = std::move(backward);
  rr.max_pass_seconds = std::max(rr.forward.max_slot_seconds, rr.backward.max_slot_seconds);
  rr.objective_seconds = RoundRobinObjective(p, rr.num_passes(), rr.max_pass_seconds);
  return rr;
}

// Candidate bottlenecks of one pass: tau of every memory-feasible range.
void CollectCandidates(const PartitionProblem& p, std::vector<double>* out) {
  const int n = p.num_units();
  const int64_t budget = p.stage_memory_budget_bytes();
  for (int begin = 0; begin < n; ++begin) {
    StageAccumulator acc(p);
    for (int end = begin; end < n; ++end) {
      acc.Add(end);
      if (acc.MemoryBytes() > budget) break;
      out->push_back(acc.Cost().slot_seconds);
    }
  }
}

double Bottleneck(const PartitionProblem& p, const std::vector<StageRange>& stages) {
  double b = 0;
  for (const StageRange& r : stages) b = std::max(b, EvaluateStage(p, r.begin, r.end).slot_seconds);
  return b;
}

}  // namespace

absl::StatusOr<RoundRobinPartition> ScoreRoundRobinPartition(
    const PartitionProblem& p, const std::vector<StageRange>& forward,
    const std::vector<StageRange>& backward) {
  absl::StatusOr<Partition> f = ScorePartition(PassProblem(p, Pass::kForward), forward);
  if (!f.ok()) {
    return absl::Status(f.status().code(),
                        absl::StrCat("forward partition: ", f.status().message()));
  }
  absl::StatusOr<Partition> b = ScorePartition(PassProblem(p, Pass::kBackward), backward);
  if (!b.ok()) {
    return absl::Status(b.status().code(),
                        absl::StrCat("backward partition: ", b.status().message()));
  }
  return FinishRoundRobin(p, *std::move(f), *std::move(b));
}

absl::StatusOr<RoundRobinPartition> ExactRoundRobinPartition(const PartitionProblem& problem) {
  const PartitionProblem fp = PassProblem(problem, Pass::kForward);
  const PartitionProblem bp = PassProblem(problem, Pass::kBackward);
  // The backward slot (W + G + A) is the larger one: if every unit fits there, it fits forward.
  MOBIUS_RETURN_IF_ERROR(CheckEveryUnitFits(bp));
  std::vector<double> candidates;
  CollectCandidates(fp, &candidates);
  CollectCandidates(bp, &candidates);
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());

  std::vector<StageRange> fwd, bwd, best_fwd, best_bwd;
  double best = 0;
  for (double t : candidates) {
    if (!GreedyPack(fp, t, &fwd) || !GreedyPack(bp, t, &bwd)) continue;
    const double bottleneck = std::max(Bottleneck(fp, fwd), Bottleneck(bp, bwd));
    const double j =
        RoundRobinObjective(problem, static_cast<int>(fwd.size() + bwd.size()), bottleneck);
    if (best_fwd.empty() || j < best) {
      best = j;
      best_fwd = fwd;
      best_bwd = bwd;
    }
  }
  // Every unit fits, so the largest candidate packs both passes.
  return FinishRoundRobin(problem, Finish(fp, std::move(best_fwd)),
                          Finish(bp, std::move(best_bwd)));
}

absl::StatusOr<RoundRobinPartition> UniformRoundRobinPartition(const PartitionProblem& problem) {
  MOBIUS_ASSIGN_OR_RETURN(Partition f, UniformPartition(PassProblem(problem, Pass::kForward)));
  MOBIUS_ASSIGN_OR_RETURN(Partition b, UniformPartition(PassProblem(problem, Pass::kBackward)));
  return FinishRoundRobin(problem, std::move(f), std::move(b));
}

absl::StatusOr<RoundRobinPartition> SharedRoundRobinPartition(
    const PartitionProblem& problem, const std::vector<StageRange>& stages) {
  return ScoreRoundRobinPartition(problem, stages, stages);
}

}  // namespace mobius::planner
