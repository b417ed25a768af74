// Partitioners: cut the model's layer units into stages (consecutive unit ranges) that fit the GPU
// memory (the two-slot model of cost_model.h) and minimise the objective J of cost_model.h:
//
//   J = K(S) * (max_s tau(R_s) + o) + T_opt
//
// `exact`   provably optimal, polynomial. Every stage's tau is the tau of some contiguous range, so
//           the optimum's bottleneck is one of the O(L^2) values tau(i, j) of memory-feasible
//           ranges. For each candidate bound t (ascending), greedy packing (each stage extended
//           while it fits and its tau <= t) yields the fewest stages S(t) among partitions with
//           every tau <= t (exchange argument: costs are additive and non-negative, so a greedy
//           stage ends no earlier than the k-th stage of any other such partition, and a suffix of
//           a feasible range is feasible). Its real bottleneck is <= t, and J is non-decreasing in
//           S and in the bottleneck, so min over t of J(greedy(t)) <= J(optimum): it IS the
//           optimum. Cost: O(L^2 log L) to collect and sort the candidates + O(L) per candidate for
//           the greedy pass = O(L^3) time, O(L^2) memory (L = number of units).
// `uniform` the naive baseline: S stages of equal unit counts (sizes differ by at most one); S
// given,
//           or the smallest S >= min(N, L) whose stages all fit.
// The MIP (the paper's formulation, COIN-OR CBC) will optimise the same J.
//
// Errors: FAILED_PRECONDITION when a single unit does not fit a GPU (the message has the numbers,
// needed vs available, and what would make it fit); INVALID_ARGUMENT for malformed input.
//
// Pure; thread-safe.
#ifndef MOBIUS_SERVER_PLANNER_PARTITION_H_
#define MOBIUS_SERVER_PLANNER_PARTITION_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/planner/cost_model.h"

namespace mobius::planner {

struct StageRange {
  int begin = 0;  // first unit
  int end = 0;    // one past the last unit

  bool operator==(const StageRange& o) const { return begin == o.begin && end == o.end; }
};

struct Partition {
  std::vector<StageRange> stages;
  std::vector<StageCost> costs;  // per stage
  double max_slot_seconds = 0;   // bottleneck tau
  double objective_seconds = 0;  // J (the analytic predicted step time)

  int num_stages() const { return static_cast<int>(stages.size()); }
};

// FAILED_PRECONDITION naming the first unit that alone exceeds the stage memory budget.
absl::Status CheckEveryUnitFits(const PartitionProblem& problem);

// Scores given stages. INVALID_ARGUMENT unless they cover [0, L) contiguously with non-empty
// ranges; FAILED_PRECONDITION when a stage exceeds the memory budget.
absl::StatusOr<Partition> ScorePartition(const PartitionProblem& problem,
                                         const std::vector<StageRange>& stages);

absl::StatusOr<Partition> ExactPartition(const PartitionProblem& problem);

// num_stages == 0: the smallest feasible S >= min(N, L). Otherwise exactly num_stages
// (INVALID_ARGUMENT outside [1, L], FAILED_PRECONDITION when a stage does not fit).
absl::StatusOr<Partition> UniformPartition(const PartitionProblem& problem, int num_stages = 0);

}  // namespace mobius::planner

#endif  // MOBIUS_SERVER_PLANNER_PARTITION_H_
