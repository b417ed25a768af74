#include "host/planner/mip/mip_partition.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "CbcHeuristic.hpp"
#include "CbcModel.hpp"
#include "CglGomory.hpp"
#include "CglKnapsackCover.hpp"
#include "CglMixedIntegerRounding2.hpp"
#include "CglProbing.hpp"
#include "CoinPackedMatrix.hpp"
#include "OsiClpSolverInterface.hpp"
#include "common/status_macros.h"

namespace mobius::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Per-unit linear coefficients of the stage terms (times in seconds, memory in bytes).
struct Coefficients {
  std::vector<double> fwd, bwd, h2d, d2h;  // M fwd_u, M bwd_u, W_u / h2d, G_u / d2h
  std::vector<int64_t> slot;               // W_u + G_u + A_u
  double act_h2d = 0, act_d2h = 0;         // M h / h2d, M h / d2h (per stage, constant)
  double max_single_tau = 0;               // max_u tau({u})
  int64_t slot_cap = 0;                    // the stage budget (slot: a unit's stage memory)
  int64_t total_slot = 0;
};

Coefficients MakeCoefficients(const PartitionProblem& p) {
  Coefficients c;
  const double m = p.num_microbatches;
  const double act = m * static_cast<double>(p.boundary_bytes);
  c.act_h2d = act / p.h2d_bytes_per_s;
  c.act_d2h = act / p.d2h_bytes_per_s;
  for (int u = 0; u < p.num_units(); ++u) {
    const UnitCost& unit = p.units[u];
    c.fwd.push_back(m * p.ForwardPassSeconds(u));
    c.bwd.push_back(m * unit.backward_seconds);
    c.h2d.push_back(static_cast<double>(unit.weight_bytes) / p.h2d_bytes_per_s);
    c.d2h.push_back(static_cast<double>(unit.gradient_bytes) / p.d2h_bytes_per_s);
    c.slot.push_back(UnitStageMemoryBytes(p, u));
    c.total_slot += c.slot.back();
    c.max_single_tau = std::max(c.max_single_tau, EvaluateStage(p, u, u + 1).slot_seconds);
  }
  c.slot_cap = p.stage_memory_budget_bytes();
  return c;
}

// A lower bound on the bottleneck of any S-stage partition: (a) the largest singleton tau; (b) some
// stage holds at least w = ceil(L / S) consecutive units and tau only grows with the range, so the
// smallest tau over windows of w units; (c) for each pair of linear minorants (aF of tau_F, aB of
// tau_B), the average of aF + aB over the S stages.
double BottleneckLowerBound(const PartitionProblem& p, const Coefficients& c, int s) {
  const int n = p.num_units();
  double fwd = 0, bwd = 0, h2d = 0, d2h = 0;
  for (int u = 0; u < n; ++u) fwd += c.fwd[u], bwd += c.bwd[u], h2d += c.h2d[u], d2h += c.d2h[u];
  const double ns = s;
  const double f_terms[] = {fwd / ns, h2d / ns + c.act_h2d, c.act_d2h};
  const double b_terms[] = {bwd / ns, h2d / ns + c.act_h2d, d2h / ns + c.act_d2h};
  double bound = c.max_single_tau;
  for (double f : f_terms) {
    for (double b : b_terms) bound = std::max(bound, f + b);
  }
  const int w = (n + s - 1) / s;
  double window = kInf;
  for (int begin = 0; begin + w <= n; ++begin) {
    window = std::min(window, EvaluateStage(p, begin, begin + w).slot_seconds);
  }
  return std::max(bound, window);
}

struct SolveOutcome {
  std::string outcome;  // "solved", "cutoff", "infeasible", "time_limit"
  std::optional<std::vector<StageRange>> stages;
  double bound_t = 0;  // proven lower bound on the bottleneck (seconds)
  int64_t nodes = 0;
};

// The MIP for exactly `s` stages (header comment), searching for T < cutoff_t (kInf: no cutoff).
SolveOutcome SolveForStageCount(const PartitionProblem& p, const Coefficients& c, int s,
                                double bound_t, double cutoff_t, double seconds) {
  const int n = p.num_units();
  const double t_scale = c.max_single_tau > 0 ? c.max_single_tau : 1.0;  // objective ~ O(1)
  // Columns: x[u][s] for lo(u) <= s <= hi(u), then tF[0..s), tB[0..s), T.
  std::vector<int> first(n + 1);
  auto lo = [&](int u) { return std::max(0, s - (n - u)); };
  auto hi = [&](int u) { return std::min(u, s - 1); };
  for (int u = 0; u < n; ++u) first[u + 1] = first[u] + (hi(u) - lo(u) + 1);
  auto x = [&](int u, int k) { return (k < lo(u) || k > hi(u)) ? -1 : first[u] + k - lo(u); };
  const int num_x = first[n], tf0 = num_x, tb0 = num_x + s, t_col = num_x + 2 * s;
  const int num_cols = t_col + 1;
  std::vector<double> col_lb(num_cols, 0.0), col_ub(num_cols, 1.0), obj(num_cols, 0.0);
  for (int k = 0; k < s; ++k) {
    col_lb[tf0 + k] = c.act_d2h / t_scale;  // tF >= M h / d2h (a constant term)
    col_ub[tf0 + k] = col_ub[tb0 + k] = COIN_DBL_MAX;
  }
  col_lb[t_col] = bound_t / t_scale;  // BottleneckLowerBound: valid, tightens the LP
  col_ub[t_col] = COIN_DBL_MAX;
  obj[t_col] = 1.0;

  std::vector<int> rows, cols;
  std::vector<double> vals, row_lb, row_ub;
  auto add_row = [&](const std::vector<std::pair<int, double>>& terms, double lb, double ub) {
    const int r = static_cast<int>(row_lb.size());
    for (const auto& [col, v] : terms) {
      if (col < 0 || v == 0) continue;
      rows.push_back(r), cols.push_back(col), vals.push_back(v);
    }
    row_lb.push_back(lb), row_ub.push_back(ub);
  };
  std::vector<std::pair<int, double>> terms;
  for (int u = 0; u < n; ++u) {  // assignment
    terms.clear();
    for (int k = lo(u); k <= hi(u); ++k) terms.push_back({x(u, k), 1.0});
    add_row(terms, 1.0, 1.0);
  }
  for (int u = 1; u < n; ++u) {  // contiguity: x[u][k] - x[u-1][k] - x[u-1][k-1] <= 0
    for (int k = lo(u); k <= hi(u); ++k) {
      add_row({{x(u, k), 1.0}, {x(u - 1, k), -1.0}, {k > 0 ? x(u - 1, k - 1) : -1, -1.0}},
              -COIN_DBL_MAX, 0.0);
    }
  }
  const bool memory_binds = c.total_slot > c.slot_cap;
  const double mem_scale = 1.0 / static_cast<double>(std::max<int64_t>(c.slot_cap, 1));
  for (int k = 0; k < s; ++k) {
    // Epigraph rows, in scaled time: sum_u coef_u x[u][k] - t[k] <= -constant.
    auto epigraph = [&](const std::vector<double>& coef, int t, double constant) {
      terms.clear();
      for (int u = 0; u < n; ++u) terms.push_back({x(u, k), coef[u] / t_scale});
      terms.push_back({t, -1.0});
      add_row(terms, -COIN_DBL_MAX, -constant / t_scale);
    };
    epigraph(c.fwd, tf0 + k, 0.0);
    epigraph(c.h2d, tf0 + k, c.act_h2d);
    epigraph(c.bwd, tb0 + k, 0.0);
    epigraph(c.h2d, tb0 + k, c.act_h2d);
    epigraph(c.d2h, tb0 + k, c.act_d2h);
    add_row({{tf0 + k, 1.0}, {tb0 + k, 1.0}, {t_col, -1.0}}, -COIN_DBL_MAX, 0.0);
    if (memory_binds) {  // integer slot sums: <= cap + 0.5 is exact and tolerance-proof
      terms.clear();
      for (int u = 0; u < n; ++u) {
        terms.push_back({x(u, k), static_cast<double>(c.slot[u]) * mem_scale});
      }
      add_row(terms, -COIN_DBL_MAX, (static_cast<double>(c.slot_cap) + 0.5) * mem_scale);
    }
  }
  const CoinPackedMatrix matrix(false, rows.data(), cols.data(), vals.data(),
                                static_cast<CoinBigIndex>(vals.size()));
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(matrix, col_lb.data(), col_ub.data(), obj.data(), row_lb.data(),
                     row_ub.data());
  for (int j = 0; j < num_x; ++j) solver.setInteger(j);

  // CbcModel::branchAndBound with a few Cgl cut generators and a rounding heuristic, quiet, tight
  // tolerances (J must match ExactPartition to 1e-9). Not CbcMain1 (the cbc driver): it was ~10x
  // slower on the small test instances, and with its default CglPreProcess CBC 2.10.8 wrongly
  // reported 2 of 300 memory-binding test instances infeasible.
  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  model.solver()->messageHandler()->setLogLevel(0);
  model.setUseElapsedTime(true);
  model.setMaximumSeconds(std::max(seconds, 1e-6));
  model.setAllowableFractionGap(1e-10);
  model.setAllowableGap(1e-12);
  model.setCutoffIncrement(1e-12);
  model.setIntegerTolerance(1e-9);
  model.solver()->setDblParam(OsiPrimalTolerance, 1e-10);
  if (cutoff_t < kInf) model.setCutoff(cutoff_t / t_scale);
  CglProbing probing;
  probing.setUsingObjective(1);
  probing.setMaxPass(3);
  probing.setMaxProbe(100);
  probing.setMaxLook(50);
  CglGomory gomory;
  gomory.setLimit(300);
  CglKnapsackCover knapsack;
  CglMixedIntegerRounding2 mir;
  model.addCutGenerator(&probing, -1, "Probing");
  model.addCutGenerator(&gomory, -1, "Gomory");
  model.addCutGenerator(&knapsack, -1, "Knapsack");
  model.addCutGenerator(&mir, -1, "MIR2");
  CbcRounding rounding(model);
  model.addHeuristic(&rounding);
  model.initialSolve();
  model.branchAndBound();

  SolveOutcome out;
  out.nodes = model.getNodeCount();
  const bool limit = model.status() == 1 || model.isSecondsLimitReached();
  // The caller re-scores whatever comes back (exact J, exact memory check), so any solution is
  // worth offering, even one CBC does not count as improving.
  if (const double* sol = model.bestSolution(); sol != nullptr) {
    std::vector<StageRange> stages;
    int current = -1;
    for (int u = 0; u < n; ++u) {
      int best_k = lo(u);
      for (int k = lo(u); k <= hi(u); ++k) {
        if (sol[x(u, k)] > sol[x(u, best_k)]) best_k = k;
      }
      if (best_k != current) {
        if (!stages.empty()) stages.back().end = u;
        stages.push_back({u, n});
        current = best_k;
      }
    }
    out.stages = std::move(stages);
  }
  if (limit) {
    out.outcome = "time_limit";
    out.bound_t = std::max(bound_t, model.getBestPossibleObjValue() * t_scale);
  } else if (out.stages && model.getSolutionCount() > 0 && model.getObjValue() * t_scale < cutoff_t) {
    out.outcome = "solved";
    out.bound_t = std::min(cutoff_t, model.getObjValue() * t_scale);
  } else {
    out.outcome = cutoff_t < kInf ? "cutoff" : "infeasible";
    out.bound_t = cutoff_t;
  }
  return out;
}

// The uniform split into s stages (sizes differ by at most one) when every stage fits.
std::optional<std::vector<StageRange>> UniformIfFits(const PartitionProblem& p, int s) {
  std::vector<StageRange> stages;
  int begin = 0;
  for (int i = 0; i < s; ++i) {
    const int size = p.num_units() / s + (i < p.num_units() % s ? 1 : 0);
    stages.push_back({begin, begin + size});
    if (EvaluateStage(p, begin, begin + size).memory_bytes > p.stage_memory_budget_bytes()) {
      return std::nullopt;
    }
    begin += size;
  }
  return stages;
}

}  // namespace

std::string MipStatusName(MipStatus status) {
  return status == MipStatus::kOptimal ? "optimal" : "time_limit";
}

absl::StatusOr<MipResult> MipPartition(const PartitionProblem& problem, const MipOptions& options) {
  const Clock::time_point start = Clock::now();
  // The paper's formulation: every backward uploads its weights (header). Everything below, the
  // re-scoring included, runs on this copy.
  PartitionProblem p = problem;
  p.backward_uploads = BackwardUploads::kEveryStage;
  MOBIUS_RETURN_IF_ERROR(CheckEveryUnitFits(p));
  if (!(options.time_limit_seconds >= 0) || !(options.time_limit_per_solve_seconds >= 0)) {
    return absl::InvalidArgumentError("MIP time limits must be >= 0");
  }
  const int n = p.num_units();
  const Coefficients c = MakeCoefficients(p);
  auto j_of = [&](int s, double t) { return Objective(p, s, t); };

  MipResult result;
  std::optional<Partition> best;
  auto offer = [&](const std::vector<StageRange>& stages) -> std::optional<double> {
    absl::StatusOr<Partition> scored = ScorePartition(p, stages);
    if (!scored.ok()) return std::nullopt;  // numerically off (memory by a hair): not a solution
    if (!best || scored->objective_seconds < best->objective_seconds) best = *scored;
    return scored->objective_seconds;
  };
  auto best_j = [&] { return best ? best->objective_seconds : kInf; };

  const int64_t min_stages_memory =
      c.slot_cap > 0 ? (c.total_slot + c.slot_cap - 1) / c.slot_cap : (c.total_slot > 0 ? n : 1);
  // Classify every S; the candidates are then solved most promising first (ascending lower bound
  // on J, larger S first on ties: smaller MIPs), so the incumbent's cutoff prunes the rest early.
  result.stage_counts.resize(n);
  std::vector<double> bound_t(n + 1, 0.0);
  for (int s = 1; s <= n; ++s) bound_t[s] = BottleneckLowerBound(p, c, s);
  std::vector<int> candidates;
  for (int s = 1; s <= n; ++s) {
    MipStageCountSolve& info = result.stage_counts[s - 1];
    info.num_stages = s;
    info.lower_bound_seconds = j_of(s, bound_t[s]);
    if (s < n && PipelineSlots(s, p.num_gpus, p.num_microbatches) ==
                     PipelineSlots(s + 1, p.num_gpus, p.num_microbatches)) {
      info.outcome = "dominated";  // J*(S+1) <= J*(S); its bound is carried by S+1
    } else if (s < min_stages_memory) {
      info.outcome = "pruned_memory";
      info.lower_bound_seconds = kInf;
    } else {
      candidates.push_back(s);
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) {
    const double la = result.stage_counts[a - 1].lower_bound_seconds;
    const double lb = result.stage_counts[b - 1].lower_bound_seconds;
    return la != lb ? la < lb : a > b;
  });
  // Two passes: first every candidate gets a short slice (so an easy S with a good partition sets
  // the cutoff early), then the unfinished ones get the per-solve limit, in the same order.
  const double slice =
      candidates.empty() ? 0.0
                         : std::min(options.time_limit_per_solve_seconds,
                                    options.time_limit_seconds / (2.0 * candidates.size()));
  for (int pass = 0; pass < 2; ++pass) {
    for (int s : candidates) {
      MipStageCountSolve& info = result.stage_counts[s - 1];
      if (pass == 1 && info.outcome != "time_limit") continue;
      const double lb_j = info.lower_bound_seconds;
      const Clock::time_point solve_start = Clock::now();
      if (lb_j >= best_j()) {
        info.outcome = "pruned_bound";
      } else if (SecondsSince(start) >= options.time_limit_seconds) {
        if (info.outcome.empty()) info.outcome = "not_reached";
      } else {
        // Cutoff: strictly better than the best J so far and than the uniform split into s stages.
        double cutoff_j = best_j();
        if (std::optional<std::vector<StageRange>> uniform = UniformIfFits(p, s)) {
          if (std::optional<double> j = offer(*uniform)) cutoff_j = std::min(cutoff_j, *j);
        }
        const double k = PipelineSlots(s, p.num_gpus, p.num_microbatches);
        const double cutoff_t = cutoff_j < kInf
                                    ? (cutoff_j - p.optimizer_seconds) / k - p.stage_overhead_seconds
                                    : kInf;
        const double seconds =
            std::min(pass == 0 ? slice : options.time_limit_per_solve_seconds,
                     options.time_limit_seconds - SecondsSince(start));
        SolveOutcome o = SolveForStageCount(p, c, s, bound_t[s], cutoff_t, seconds);
        ++result.solves;
        info.outcome = o.outcome;
        info.nodes += o.nodes;
        result.nodes += o.nodes;
        if (o.stages) {
          if (std::optional<double> j = offer(*o.stages)) info.objective_seconds = *j;
        }
        if (o.outcome == "time_limit") {
          info.lower_bound_seconds = std::max(lb_j, j_of(s, o.bound_t));
        } else if (o.outcome == "infeasible") {
          info.lower_bound_seconds = kInf;
        } else if (o.outcome == "cutoff") {
          info.lower_bound_seconds = std::max(lb_j, cutoff_j);
        } else {  // solved: the optimum for s is the partition found (or below the cutoff)
          const double found = info.objective_seconds > 0 ? info.objective_seconds : kInf;
          info.lower_bound_seconds = std::max(lb_j, std::min(found, j_of(s, o.bound_t)));
        }
      }
      info.wall_seconds += SecondsSince(solve_start);
    }
  }

  if (!best) {  // no solve got anywhere (time limit ~0): fall back to a feasible split
    MOBIUS_ASSIGN_OR_RETURN(Partition uniform, UniformPartition(p));
    best = std::move(uniform);
  }
  result.partition = *best;
  const double j = best->objective_seconds;
  // Lower bound: min over S of what is proven for S ("dominated" S are covered by S + 1).
  double lower = j;
  bool limited = false;
  for (const MipStageCountSolve& info : result.stage_counts) {
    if (info.outcome == "dominated") continue;
    if (info.outcome == "time_limit" || info.outcome == "not_reached") limited = true;
    lower = std::min(lower, info.lower_bound_seconds);
  }
  result.status = limited ? MipStatus::kTimeLimit : MipStatus::kOptimal;
  result.lower_bound_seconds = result.status == MipStatus::kOptimal ? j : lower;
  result.relative_gap = j > 0 ? std::max(0.0, (j - result.lower_bound_seconds) / j) : 0.0;
  result.wall_seconds = SecondsSince(start);
  return result;
}

}  // namespace mobius::planner
