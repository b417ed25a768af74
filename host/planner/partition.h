// Partitioners: cut the model's layer units into stages (consecutive unit ranges) that fit the GPU
// memory (the two-slot model of cost_model.h) and minimise the objective J of cost_model.h:
//
//   J = K(S) * (max_s tau_s(R_s) + o) + T_opt
//
// where tau_s is the stage's tau as charged at its position: with the runtime's two-slot reuse
// (PartitionProblem::backward_uploads = kTwoSlotReuse, the default) the last r(S) = min(S, 2N)
// stages' backward uploads nothing (tau without W_R in the backward's H2D term), the first S - r(S)
// pay the upload; kEveryStage charges every stage the upload (r = 0). Every scorer here
// (ScorePartition, the partitioners' results) applies the rule for the partition's own S:
// costs[s] is stage s as charged (costs[s].backward_upload says which).
//
// `exact`   provably optimal, polynomial. A stage's charged tau is tau or reused tau of a
//           contiguous range, so the optimum's bottleneck is one of the O(L^2) values of
//           memory-feasible ranges (both kinds). Which stages are charged which depends on S, so
//           for each S = 1..L: the smallest candidate t admitting an S-stage partition with every
//           charged tau <= t (binary search; feasibility only grows with t), then the S of least
//           J = K(S)(t + o) + T_opt (ties: the smaller t). Feasibility of (S, t): some cut c where
//           [0, c) splits into exactly S - r full-tau stages and [c, L) into exactly r reused-tau
//           stages, all fitting with tau <= t. An interval of k units splits into exactly m such
//           stages iff fewest <= m <= k (a stage that fits under t still does when shrunk, so
//           stages can be split one at a time), and the fewest stages of every prefix (suffix) come
//           from two pointers in O(L): ranges grow by additive non-negative terms, so the
//           earliest start of a fitting stage ending at c never moves left as c grows. The
//           partition: greedy packing of each side (fewest stages), then the widest stage halved
//           until the counts are exact. Cost: O(L^2 log L) to tabulate and sort the candidates +
//           O(L log L) feasibility tests of O(L) each = O(L^2 log L) time, O(L^2) memory.
//           (Without reuse, greedy packing under the optimum's bottleneck alone would do: it gives
//           the fewest stages, and J is non-decreasing in S and in the bottleneck. With reuse,
//           feasibility under a bound is not monotone in S: one more stage can push a stage out
//           of the reused tail, where it is charged more. So every S is tried.)
// `uniform` the naive baseline: S stages of equal unit counts (sizes differ by at most one); S
//           given, or the smallest S >= min(N, L) whose stages all fit.
// The MIP (mip/) is the paper's formulation: it optimises J with kEveryStage whatever the problem
// says (mip_partition.h).
//
// Round-robin (RoundPipe) partitions: the forward and the backward pass are partitioned
// separately (backward with recompute costs ~3x forward, so its stages hold fewer units), and the
// stage passes of both form one stream over the GPUs. Objective (cost_model.h):
//   J_rr = K_rr(S_F + S_B) * (max over all passes of tau + o/2) + T_opt
// with tau_F for forward stages and tau_B for backward stages, and each pass's stages fitting
// 2 x slot (forward: W + A; backward: W + G + A) in the stage budget.
// `ExactRoundRobinPartition` is `exact` run on each pass with a shared bottleneck bound: for every
// candidate t (the taus of all memory-feasible ranges of either pass) greedy packing gives the
// fewest forward stages S_F(t) and the fewest backward stages S_B(t) with every tau <= t; J_rr is
// non-decreasing in S_F + S_B and in the bottleneck, so the best t is the optimum (exchange
// argument: greedy packing under a bound gives the fewest stages). O(L^3). The two-slot reuse
// rule does not apply to round-robin passes (cost_model.h): J_rr charges every backward pass its
// upload.
//
// Errors: FAILED_PRECONDITION when a single unit does not fit a GPU (the message has the numbers,
// needed vs available, and what would make it fit); INVALID_ARGUMENT for malformed input.
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_PLANNER_PARTITION_H_
#define MOBIUS_HOST_PLANNER_PARTITION_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "host/planner/cost_model.h"

namespace mobius::planner {

struct StageRange {
  int begin = 0;  // first unit
  int end = 0;    // one past the last unit

  bool operator==(const StageRange& o) const { return begin == o.begin && end == o.end; }
};

struct Partition {
  std::vector<StageRange> stages;
  std::vector<StageCost> costs;  // per stage, as charged at its position (header comment)
  double max_slot_seconds = 0;   // bottleneck: max over stages of costs[s].slot_seconds
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

// For every stage count S the memory allows (ascending S), the J-optimal S-stage partition (the
// same per-S optimum ExactPartition chooses among): the candidates a caller ranks by another
// measure, e.g. the simulator (api/make_plan.h). FAILED_PRECONDITION when a unit alone does not
// fit.
absl::StatusOr<std::vector<Partition>> ExactPartitionPerStageCount(const PartitionProblem& problem);

// num_stages == 0: the smallest feasible S >= min(N, L). Otherwise exactly num_stages
// (INVALID_ARGUMENT outside [1, L], FAILED_PRECONDITION when a stage does not fit).
absl::StatusOr<Partition> UniformPartition(const PartitionProblem& problem, int num_stages = 0);

// Separate forward and backward partitions for the round-robin schedule (see above). Both cover
// [0, L) with ascending, contiguous stages; the backward stages run in descending order.
struct RoundRobinPartition {
  Partition forward;   // scored on PassProblem(problem, kForward): costs[s].slot_seconds = tau_F
  Partition backward;  // scored on PassProblem(problem, kBackward): costs[s].slot_seconds = tau_B
  double max_pass_seconds = 0;   // the bottleneck over both passes
  double objective_seconds = 0;  // J_rr

  int num_passes() const { return forward.num_stages() + backward.num_stages(); }
};

// Scores given forward and backward stages (each validated like ScorePartition, on its pass).
absl::StatusOr<RoundRobinPartition> ScoreRoundRobinPartition(
    const PartitionProblem& problem, const std::vector<StageRange>& forward,
    const std::vector<StageRange>& backward);

// The J_rr optimum (see above). FAILED_PRECONDITION when a unit alone does not fit.
absl::StatusOr<RoundRobinPartition> ExactRoundRobinPartition(const PartitionProblem& problem);

// For every total pass count S_F + S_B that some bottleneck candidate packs to, the least-J_rr
// partition with that count (ExactRoundRobinPartition is the least of them), ascending by count:
// what a choice by simulation picks among (J_rr's K_rr term misjudges the bubble of a pass
// stream whose passes differ in length).
absl::StatusOr<std::vector<RoundRobinPartition>> ExactRoundRobinPartitionsPerPassCount(
    const PartitionProblem& problem);

// Each pass: the smallest feasible S >= min(N, L) of equal unit counts (UniformPartition per pass).
absl::StatusOr<RoundRobinPartition> UniformRoundRobinPartition(const PartitionProblem& problem);

// One partition for both passes (what mip or a fixed stage count gives): the same ranges scored
// per pass.
absl::StatusOr<RoundRobinPartition> SharedRoundRobinPartition(
    const PartitionProblem& problem, const std::vector<StageRange>& stages);

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_PARTITION_H_
