// The `mip` partitioner: the Mobius paper's mixed-integer program (reconstructed, design/mobius.md
// section 1 item 4) solved with COIN-OR CBC, on the same problem as ExactPartition (partition.h,
// cost_model.h) with the paper's objective:
//
//   J = K(S) * (max_s tau(R_s) + o) + T_opt,   feasible(R) <=> 2 * slot(R) <= budget,
//
// where every stage's backward uploads its weights: MipPartition solves and scores
// `problem` with backward_uploads = kEveryStage, whatever the caller set. It does not model the
// runtime's two-slot reuse (cost_model.h: the last min(S, 2N) stages' backward uploads nothing),
// which the paper's formulation does not have. ExactPartition on a kEveryStage problem is its
// reference (equal J); on the default kTwoSlotReuse problem ExactPartition minimises the J that
// counts the reuse, which the MIP's partition, re-scored that way, can only match or exceed.
// Callers that compare it with other partitions re-score its stages (ScorePartition on their
// problem; the planner's comparison table does).
//
// K depends on the number of stages S, so one MIP is solved per candidate S (J is linear in the
// bottleneck once S is fixed). For a fixed S (L units u, stages s = 0..S-1):
//
//   x[u][s] in {0,1}  unit u runs in stage s; only s in [max(0, S-L+u), min(u, S-1)] exist (every
//                     stage holds at least one unit);
//   sum_s x[u][s] = 1                                  each unit in exactly one stage;
//   x[u][s] <= x[u-1][s] + x[u-1][s-1]                 monotone contiguity: the stage index grows by
//                                                      0 or 1 from one unit to the next, from stage
//                                                      0 (unit 0) to stage S-1 (unit L-1);
//   sum_u slot_u x[u][s] <= floor(budget / 2)          the two-slot memory rule of ExactPartition;
//   tF[s] >= M sum_u fwd_u x[u][s],  tF[s] >= (sum_u W_u x[u][s] + M h) / h2d,  tF[s] >= M h / d2h;
//   tB[s] >= M sum_u bwd_u x[u][s],  tB[s] >= (sum_u W_u x[u][s] + M h) / h2d,
//   tB[s] >= (sum_u G_u x[u][s] + M h) / d2h;          epigraph of tau_F / tau_B (max of terms);
//   T >= tF[s] + tB[s];  T >= LB_T(S) (below)          epigraph of the bottleneck (+ a valid bound);
//   minimise T.                                        J(S) = K(S) (T* + o) + T_opt.
//
// The per-stage sums are linear in the assignment binaries, so the max terms need only epigraph
// variables, no big-M (big-M appears in the integer-stage-index form; the binaries x are that form
// with the index unary-encoded). Candidate S are pruned without a solve when provably no better:
//   - K(S) == K(S+1): splitting a stage never raises tau or breaks memory, so J(S+1) <= J(S);
//   - S < ceil(total slot bytes / floor(budget/2)): no S-stage partition fits;
//   - K(S) (LB_T(S) + o) + T_opt >= best J so far, with LB_T(S) = max(max_u tau({u}), the
//     smallest tau of ceil(L/S) consecutive units (some stage holds that many), the average over
//     stages of each linear minorant of tau). LB_T(S) is also T's lower bound in the MIP.
// The remaining S are solved best first (ascending bound), in two passes: a short slice each
// (time_limit / (2 x candidates)), then the per-solve limit for those not finished. Each solve gets
// a cutoff from the best J so far (and the uniform split into S stages when it fits), so CBC
// (CbcModel::branchAndBound on OsiClpSolverInterface, Cgl cuts, quiet) only searches for strictly
// better partitions. The stages it returns are re-scored with ScorePartition, so J is computed by
// exactly the code ExactPartition uses.
//
// Errors: as ExactPartition (FAILED_PRECONDITION with the numbers when a unit alone does not fit;
// INVALID_ARGUMENT for malformed input); INVALID_ARGUMENT for negative time limits. A time limit is
// not an error: the result holds the best partition found (the uniform partition if the solver
// found none) with status kTimeLimit and the relative gap to the proven lower bound.
//
// Thread-safe (each call builds its own solver).
#ifndef MOBIUS_HOST_PLANNER_MIP_MIP_PARTITION_H_
#define MOBIUS_HOST_PLANNER_MIP_MIP_PARTITION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "host/planner/cost_model.h"
#include "host/planner/partition.h"

namespace mobius::planner {

struct MipOptions {
  double time_limit_per_solve_seconds = 60;  // wall clock, one MIP (one S)
  double time_limit_seconds = 300;           // wall clock, all MIPs together
};

enum class MipStatus {
  kOptimal,    // every candidate S solved or pruned: the partition minimises J
  kTimeLimit,  // a limit stopped the search: best found, gap below
};

std::string MipStatusName(MipStatus status);

// One candidate number of stages.
struct MipStageCountSolve {
  int num_stages = 0;
  // "solved" (optimal for this S), "cutoff" (proven no better than the incumbent), "infeasible",
  // "time_limit", "pruned_bound", "pruned_memory", "dominated" (K(S) == K(S+1)), "not_reached".
  std::string outcome;
  double objective_seconds = 0;    // J of the partition found for this S; 0 if none
  double lower_bound_seconds = 0;  // proven lower bound on J over S-stage partitions (inf: none)
  int64_t nodes = 0;
  double wall_seconds = 0;
};

struct MipResult {
  Partition partition;  // the best partition found (scored by ScorePartition, kEveryStage)
  MipStatus status = MipStatus::kOptimal;
  double lower_bound_seconds = 0;  // proven lower bound on the optimal J
  double relative_gap = 0;         // (J - lower bound) / J; 0 when optimal
  int64_t nodes = 0;               // branch-and-bound nodes over all solves
  int solves = 0;                  // MIPs handed to CBC
  double wall_seconds = 0;
  std::vector<MipStageCountSolve> stage_counts;  // every S in [1, L], ascending
};

absl::StatusOr<MipResult> MipPartition(const PartitionProblem& problem,
                                       const MipOptions& options = {});

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_MIP_MIP_PARTITION_H_
