#include "host/planner/mapping.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace mobius::planner {
namespace {

// Relative slack under which two scores count as equal (sums in different orders differ by ulps).
constexpr double kTolerance = 1e-12;

bool Better(double a, double b) { return a < b - kTolerance * std::max(1.0, std::fabs(b)); }

int DomainOf(const topology::TopologyFacts& facts, int gpu, ContentionDomain domain) {
  return domain == ContentionDomain::kRootComplex ? facts.gpus[gpu].root_complex
                                                  : facts.gpus[gpu].contention_group;
}

// shared[a][b] over positions of `gpus` (not indices into the topology).
std::vector<std::vector<double>> SharedMatrix(const topology::TopologyFacts& facts,
                                              const std::vector<int>& gpus,
                                              ContentionDomain domain) {
  const int n = static_cast<int>(gpus.size());
  std::vector<std::vector<double>> shared(n, std::vector<double>(n, 0));
  for (int a = 0; a < n; ++a) {
    const int da = DomainOf(facts, gpus[a], domain);
    int members = 0;
    for (int c = 0; c < n; ++c) {
      if (c == a || (da >= 0 && DomainOf(facts, gpus[c], domain) == da)) ++members;
    }
    for (int b = 0; b < n; ++b) {
      if (b == a || (da >= 0 && DomainOf(facts, gpus[b], domain) == da)) shared[a][b] = members;
    }
  }
  return shared;
}

// Symmetric position weights: weight[p][q] (p != q) = w(p,q) + w(q,p); weight[p][p] = w(p,p).
std::vector<std::vector<double>> PositionWeights(int n, int num_stages) {
  std::vector<std::vector<double>> w(n, std::vector<double>(n, 0));
  for (int d = 1; d < num_stages; ++d) {
    for (int i = 0; i + d < num_stages; ++i) {
      const int p = i % n, q = (i + d) % n;
      w[std::min(p, q)][std::max(p, q)] += 1.0 / d;
    }
  }
  return w;
}

// Score of `perm` (positions into the granted list), upper triangle of the weights.
double Score(const std::vector<std::vector<double>>& weight,
             const std::vector<std::vector<double>>& shared, const std::vector<int>& perm) {
  const int n = static_cast<int>(perm.size());
  double s = 0;
  for (int p = 0; p < n; ++p) {
    for (int q = p; q < n; ++q) s += weight[p][q] * shared[perm[p]][perm[q]];
  }
  return s;
}

absl::Status Validate(const topology::TopologyFacts& facts, const std::vector<int>& gpus,
                      int num_stages) {
  if (gpus.empty()) return absl::InvalidArgumentError("no GPUs granted: a GPU plan needs one");
  if (num_stages < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_stages must be >= 1 (got ", num_stages, ")"));
  }
  std::set<int> seen;
  for (int g : gpus) {
    if (g < 0 || g >= static_cast<int>(facts.gpus.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "granted GPU ", g, " out of range (server has ", facts.gpus.size(), " GPUs)"));
    }
    if (!seen.insert(g).second) {
      return absl::InvalidArgumentError(absl::StrCat("GPU ", g, " granted twice"));
    }
  }
  return absl::OkStatus();
}

std::vector<int> Exhaustive(const std::vector<std::vector<double>>& weight,
                            const std::vector<std::vector<double>>& shared, int n) {
  std::vector<int> perm(n), best;
  for (int i = 0; i < n; ++i) perm[i] = i;
  double best_score = 0;
  do {
    const double s = Score(weight, shared, perm);
    if (best.empty() || Better(s, best_score)) {
      best_score = s;
      best = perm;
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
  return best;
}

std::vector<int> GreedyLocalSearch(const std::vector<std::vector<double>>& weight,
                                   const std::vector<std::vector<double>>& shared, int n) {
  std::vector<int> perm;
  std::vector<bool> used(n, false);
  for (int p = 0; p < n; ++p) {
    int pick = -1;
    double pick_cost = 0;
    for (int g = 0; g < n; ++g) {
      if (used[g]) continue;
      double cost = weight[p][p] * shared[g][g];
      for (int q = 0; q < p; ++q) cost += weight[q][p] * shared[perm[q]][g];
      if (pick < 0 || Better(cost, pick_cost)) {
        pick = g;
        pick_cost = cost;
      }
    }
    used[pick] = true;
    perm.push_back(pick);
  }
  double score = Score(weight, shared, perm);
  for (bool improved = true; improved;) {
    improved = false;
    for (int a = 0; a < n && !improved; ++a) {
      for (int b = a + 1; b < n && !improved; ++b) {
        std::swap(perm[a], perm[b]);
        const double s = Score(weight, shared, perm);
        if (Better(s, score)) {
          score = s;
          improved = true;
        } else {
          std::swap(perm[a], perm[b]);
        }
      }
    }
  }
  return perm;
}

}  // namespace

double ContentionScore(const topology::TopologyFacts& facts, const std::vector<int>& gpu_order,
                       int num_stages, ContentionDomain domain) {
  const int n = static_cast<int>(gpu_order.size());
  std::vector<int> identity(n);
  for (int i = 0; i < n; ++i) identity[i] = i;
  return Score(PositionWeights(n, num_stages), SharedMatrix(facts, gpu_order, domain), identity);
}

absl::StatusOr<Mapping> SequentialMapping(const topology::TopologyFacts& facts,
                                          const std::vector<int>& granted_gpus, int num_stages,
                                          const MappingOptions& options) {
  MOBIUS_RETURN_IF_ERROR(Validate(facts, granted_gpus, num_stages));
  Mapping m;
  m.gpu_order = granted_gpus;
  std::sort(m.gpu_order.begin(), m.gpu_order.end());
  m.contention_score = ContentionScore(facts, m.gpu_order, num_stages, options.domain);
  m.method = "sequential";
  return m;
}

absl::StatusOr<Mapping> CrossMapping(const topology::TopologyFacts& facts,
                                     const std::vector<int>& granted_gpus, int num_stages,
                                     const MappingOptions& options) {
  MOBIUS_RETURN_IF_ERROR(Validate(facts, granted_gpus, num_stages));
  std::vector<int> gpus = granted_gpus;
  std::sort(gpus.begin(), gpus.end());
  const int n = static_cast<int>(gpus.size());
  const auto weight = PositionWeights(n, num_stages);
  const auto shared = SharedMatrix(facts, gpus, options.domain);
  const bool exhaustive = n <= options.exhaustive_max_gpus;
  const std::vector<int> perm =
      exhaustive ? Exhaustive(weight, shared, n) : GreedyLocalSearch(weight, shared, n);
  Mapping m;
  for (int p : perm) m.gpu_order.push_back(gpus[p]);
  m.contention_score = Score(weight, shared, perm);
  m.method = exhaustive ? "cross-exhaustive" : "cross-local-search";
  return m;
}

}  // namespace mobius::planner
