#include "host/planner/partition.h"

#include <algorithm>
#include <map>
#include <limits>

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
  const int num_stages = part.num_stages();
  const int first_reused = num_stages - ReusedBackwardStages(p, num_stages);
  for (int s = 0; s < num_stages; ++s) {
    const StageRange& r = part.stages[s];
    part.costs.push_back(EvaluateStage(p, r.begin, r.end, /*backward_upload=*/s < first_reused));
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
    const std::string need =
        p.memory_model == MemoryModel::kRuntime
            ? absl::StrCat("2 stage slots x [weights ", GiB(unit.weight_bytes), " + gradients ",
                           GiB(unit.gradient_bytes), "] + its input ",
                           GiB(unit.activation_bytes), " + reserved ", GiB(p.reserved_bytes),
                           " for margin, the largest unit's workspace and the activation "
                           "buffers")
            : absl::StrCat("2 stage slots x [weights ", GiB(unit.weight_bytes), " + gradients ",
                           GiB(unit.gradient_bytes), " + activations ",
                           GiB(unit.activation_bytes), "] + reserved ", GiB(p.reserved_bytes),
                           " for margin and workspace");
    return absl::FailedPreconditionError(absl::StrCat(
        "layer unit ", u, " does not fit on a GPU even alone: it needs ",
        GiB(c.memory_bytes + p.reserved_bytes), " (", need, ") but the GPU has ",
        GiB(p.gpu_memory_bytes),
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

namespace {

constexpr int kNone = std::numeric_limits<int>::max();

// tau of every range [b, e) as one stage, charged with the backward upload (`full`) and without
// it (`reused`); +inf where the range does not fit. One accumulator per start, so the values are
// bit-identical to EvaluateStage's (and to Finish's re-scoring).
class RangeTable {
 public:
  explicit RangeTable(const PartitionProblem& p)
      : n_(p.num_units()),
        full_(static_cast<size_t>(n_) * (n_ + 1), kInf),
        reused_(full_.size(), kInf) {
    const int64_t budget = p.stage_memory_budget_bytes();
    for (int b = 0; b < n_; ++b) {
      StageAccumulator acc(p);
      for (int e = b + 1; e <= n_; ++e) {
        acc.Add(e - 1);
        if (acc.MemoryBytes() > budget) break;
        full_[Index(b, e)] = acc.Cost(true).slot_seconds;
        reused_[Index(b, e)] = acc.Cost(false).slot_seconds;
      }
    }
  }
  int num_units() const { return n_; }
  double Tau(int b, int e, bool reused) const { return (reused ? reused_ : full_)[Index(b, e)]; }
  // The finite taus of one kind, for the candidate bottlenecks.
  void AppendFinite(bool reused, std::vector<double>* out) const {
    for (double t : reused ? reused_ : full_) {
      if (t < kInf) out->push_back(t);
    }
  }

 private:
  static constexpr double kInf = std::numeric_limits<double>::infinity();
  size_t Index(int b, int e) const { return static_cast<size_t>(b) * (n_ + 1) + e; }
  int n_;
  std::vector<double> full_, reused_;
};

// A stage that fits with tau <= t still does when shrunk, and taus only grow with the range. So
// the fewest stages (each fitting, tau <= t) covering [0, c) never decrease in c, a stage ending
// at c best starts at the smallest start q(c) with tau(q, c) <= t, and q(c) never decreases in c:
// two pointers, O(L). fewest[c] (c = 0..L) or kNone.
std::vector<int> FewestPrefixStages(const RangeTable& tab, bool reused, double t) {
  const int n = tab.num_units();
  std::vector<int> fewest(n + 1, kNone);
  fewest[0] = 0;
  for (int c = 1, q = 0; c <= n; ++c) {
    while (q < c && !(tab.Tau(q, c, reused) <= t)) ++q;
    if (q < c && fewest[q] != kNone) fewest[c] = fewest[q] + 1;
  }
  return fewest;
}

// The mirror image: fewest stages covering [c, L), for c = 0..L.
std::vector<int> FewestSuffixStages(const RangeTable& tab, bool reused, double t) {
  const int n = tab.num_units();
  std::vector<int> fewest(n + 1, kNone);
  fewest[n] = 0;
  for (int c = n - 1, e = n; c >= 0; --c) {
    while (e > c && !(tab.Tau(c, e, reused) <= t)) --e;
    if (e > c && fewest[e] != kNone) fewest[c] = fewest[e] + 1;
  }
  return fewest;
}

// A partition into S stages whose first S - r stages are charged the full tau and last r stages
// the reused one (r = ReusedBackwardStages), all fitting with tau <= t, exists iff some cut c has
// [0, c) coverable by exactly S - r full-tau stages and [c, L) by exactly r reused-tau stages. An
// interval of k units is coverable by exactly m such stages iff fewest <= m <= k (split stages
// until there are m: sub-ranges still fit under t). Returns the largest such cut, or -1.
int FeasibleCut(const std::vector<int>& prefix, const std::vector<int>& suffix, int num_stages,
                int reused) {
  const int n = static_cast<int>(prefix.size()) - 1;
  const int first = num_stages - reused;
  for (int c = n; c >= 0; --c) {
    if (prefix[c] <= first && first <= c && suffix[c] <= reused && reused <= n - c) return c;
  }
  return -1;
}

// Exactly `count` stages over [begin, end), each with tau <= t: greedy packing (fewest stages),
// then the stage with the most units split in half until there are `count`.
// REQUIRES: the fewest-stage count of the interval <= count <= end - begin.
void PackExactly(const RangeTable& tab, bool reused, double t, int begin, int end, int count,
                 std::vector<StageRange>* out) {
  std::vector<StageRange> stages;
  for (int b = begin; b < end;) {
    int e = b + 1;
    while (e < end && tab.Tau(b, e + 1, reused) <= t) ++e;
    stages.push_back({b, e});
    b = e;
  }
  while (static_cast<int>(stages.size()) < count) {
    auto widest = std::max_element(stages.begin(), stages.end(), [](const auto& x, const auto& y) {
      return x.end - x.begin < y.end - y.begin;
    });
    const StageRange r = *widest;
    const int mid = r.begin + (r.end - r.begin) / 2;
    *widest = {r.begin, mid};
    stages.insert(widest + 1, StageRange{mid, r.end});
  }
  out->insert(out->end(), stages.begin(), stages.end());
}

}  // namespace

namespace {

// For every stage count S = 1..L that the memory allows: the smallest bottleneck t admitting an
// S-stage partition and its J, and (when `partitions`) that partition.
struct PerStageCount {
  int s = 0;
  double t = 0, j = 0;
};

std::vector<PerStageCount> ExactPerStageCount(const PartitionProblem& p,
                                              std::vector<Partition>* partitions) {
  const int n = p.num_units();
  const RangeTable tab(p);
  const bool any_reuse = ReusedBackwardStages(p, n) > 0;
  // Candidate bottlenecks: every tau a stage can be charged (full, and reused when the problem
  // reuses) of every memory-feasible range.
  std::vector<double> candidates;
  tab.AppendFinite(false, &candidates);
  if (any_reuse) tab.AppendFinite(true, &candidates);
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());

  // Which stages are charged the reused tau depends on S, and with it the best bottleneck: for
  // each S, the smallest candidate that admits an S-stage partition (binary search: feasibility
  // only grows with t).
  auto cut_for = [&](int s, double t) {
    return FeasibleCut(FewestPrefixStages(tab, false, t), FewestSuffixStages(tab, true, t), s,
                       ReusedBackwardStages(p, s));
  };
  std::vector<PerStageCount> out;
  for (int s = 1; s <= n; ++s) {
    if (cut_for(s, candidates.back()) < 0) continue;  // memory needs more stages
    size_t lo = 0, hi = candidates.size() - 1;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (cut_for(s, candidates[mid]) >= 0) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    const double t = candidates[lo];
    out.push_back({s, t, Objective(p, s, t)});
    if (partitions != nullptr) {
      const int reused = ReusedBackwardStages(p, s);
      const int cut = cut_for(s, t);
      std::vector<StageRange> stages;
      PackExactly(tab, false, t, 0, cut, s - reused, &stages);
      PackExactly(tab, true, t, cut, n, reused, &stages);
      partitions->push_back(Finish(p, std::move(stages)));
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<Partition> ExactPartition(const PartitionProblem& p) {
  MOBIUS_RETURN_IF_ERROR(CheckEveryUnitFits(p));
  // Every unit fits, so S = L (singletons) is feasible at the largest candidate: never empty.
  std::vector<Partition> partitions;
  const std::vector<PerStageCount> per_s = ExactPerStageCount(p, &partitions);
  size_t best = 0;
  for (size_t i = 1; i < per_s.size(); ++i) {  // least J; ties: the smaller bottleneck
    if (per_s[i].j < per_s[best].j || (per_s[i].j == per_s[best].j && per_s[i].t < per_s[best].t)) {
      best = i;
    }
  }
  return std::move(partitions[best]);
}

absl::StatusOr<std::vector<Partition>> ExactPartitionPerStageCount(const PartitionProblem& p) {
  MOBIUS_RETURN_IF_ERROR(CheckEveryUnitFits(p));
  std::vector<Partition> partitions;
  ExactPerStageCount(p, &partitions);
  return partitions;
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
  MOBIUS_ASSIGN_OR_RETURN(std::vector<RoundRobinPartition> per_count,
                          ExactRoundRobinPartitionsPerPassCount(problem));
  // Least J_rr; ties: the smaller bottleneck (the first bound to reach it).
  size_t best = 0;
  for (size_t i = 1; i < per_count.size(); ++i) {
    const RoundRobinPartition& a = per_count[i];
    const RoundRobinPartition& b = per_count[best];
    if (a.objective_seconds < b.objective_seconds ||
        (a.objective_seconds == b.objective_seconds && a.max_pass_seconds < b.max_pass_seconds)) {
      best = i;
    }
  }
  return std::move(per_count[best]);
}

absl::StatusOr<std::vector<RoundRobinPartition>> ExactRoundRobinPartitionsPerPassCount(
    const PartitionProblem& problem) {
  const PartitionProblem fp = PassProblem(problem, Pass::kForward);
  const PartitionProblem bp = PassProblem(problem, Pass::kBackward);
  // The backward slot (W + G + A) is the larger one: if every unit fits there, it fits forward.
  MOBIUS_RETURN_IF_ERROR(CheckEveryUnitFits(bp));
  std::vector<double> candidates;
  CollectCandidates(fp, &candidates);
  CollectCandidates(bp, &candidates);
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());

  struct Best {
    double j = 0;
    std::vector<StageRange> fwd, bwd;
  };
  std::map<size_t, Best> per_count;  // by S_F + S_B
  std::vector<StageRange> fwd, bwd;
  for (double t : candidates) {
    if (!GreedyPack(fp, t, &fwd) || !GreedyPack(bp, t, &bwd)) continue;
    const double bottleneck = std::max(Bottleneck(fp, fwd), Bottleneck(bp, bwd));
    const size_t count = fwd.size() + bwd.size();
    const double j = RoundRobinObjective(problem, static_cast<int>(count), bottleneck);
    auto [it, inserted] = per_count.try_emplace(count);
    if (inserted || j < it->second.j) it->second = Best{j, fwd, bwd};
  }
  // Every unit fits, so the largest candidate packs both passes: never empty.
  std::vector<RoundRobinPartition> out;
  for (auto& [count, b] : per_count) {
    out.push_back(FinishRoundRobin(problem, Finish(fp, std::move(b.fwd)),
                                   Finish(bp, std::move(b.bwd))));
  }
  return out;
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
