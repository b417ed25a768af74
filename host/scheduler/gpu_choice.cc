#include "host/scheduler/gpu_choice.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_format.h"

namespace mobius::jobs {
namespace {

using Key = std::tuple<int64_t, int64_t, int64_t>;

Key KeyOf(const PlacementCost& c, Placement placement) {
  if (placement == Placement::kPack) return {c.interference_pairs, c.distance, 0};
  return {c.uplink_pairs, c.interference_pairs, c.distance};
}

// Precomputed per-GPU group ids, busy counts per group and the distance matrix, so that scoring a
// subset costs O(k^2).
class Scorer {
 public:
  Scorer(const std::vector<GpuResource>& gpus, const std::vector<bool>& busy) {
    const int n = static_cast<int>(gpus.size());
    group_.resize(n);
    std::map<int, int> dense;  // contention group -> dense id
    for (int i = 0; i < n; ++i) {
      const int g = gpus[i].contention_group;
      if (g >= 0) {
        auto [it, inserted] = dense.emplace(g, static_cast<int>(dense.size()));
        group_[i] = it->second;
      } else {
        group_[i] = -1;
      }
    }
    int next = static_cast<int>(dense.size());
    for (int i = 0; i < n; ++i) {
      if (group_[i] < 0) group_[i] = next++;  // a group of its own
    }
    busy_in_group_.assign(next, 0);
    for (int i = 0; i < n; ++i) {
      if (i < static_cast<int>(busy.size()) && busy[i]) ++busy_in_group_[group_[i]];
    }
    distance_.assign(static_cast<size_t>(n) * n, 0);
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) distance_[a * n + b] = GpuDistance(gpus[a], gpus[b]);
    }
    n_ = n;
    chosen_in_group_.assign(next, 0);
  }

  PlacementCost Score(const std::vector<int>& chosen) {
    PlacementCost c;
    for (size_t i = 0; i < chosen.size(); ++i) {
      const int g = group_[chosen[i]];
      c.self_pairs += chosen_in_group_[g];  // pairs with the chosen GPUs before it in g
      ++chosen_in_group_[g];
      c.interference_pairs += busy_in_group_[g];
      for (size_t j = 0; j < i; ++j) c.distance += distance_[chosen[i] * n_ + chosen[j]];
    }
    for (int gpu : chosen) chosen_in_group_[group_[gpu]] = 0;
    c.uplink_pairs = c.self_pairs + c.interference_pairs;
    return c;
  }

 private:
  int n_ = 0;
  std::vector<int> group_;
  std::vector<int64_t> busy_in_group_;
  std::vector<int64_t> chosen_in_group_;  // scratch, all zero between calls
  std::vector<int> distance_;
};

// C(n, k), saturating at `cap` + 1.
int64_t Binomial(int n, int k, int64_t cap) {
  k = std::min(k, n - k);
  long double v = 1;
  for (int i = 1; i <= k; ++i) {
    v = v * (n - k + i) / i;
    if (v > static_cast<long double>(cap)) return cap + 1;
  }
  return static_cast<int64_t>(v + 0.5L);
}

GpuChoice Exhaustive(Scorer& scorer, const std::vector<int>& candidates, int k,
                     Placement placement) {
  const int n = static_cast<int>(candidates.size());
  std::vector<int> pos(k);
  for (int i = 0; i < k; ++i) pos[i] = i;
  std::vector<int> subset(k);
  GpuChoice best;
  Key best_key;
  bool have = false;
  while (true) {
    for (int i = 0; i < k; ++i) subset[i] = candidates[pos[i]];
    const PlacementCost cost = scorer.Score(subset);
    const Key key = KeyOf(cost, placement);
    // Subsets come in lexicographic order, so keeping the first of equal keys keeps the smallest.
    if (!have || key < best_key) {
      have = true;
      best_key = key;
      best.gpus = subset;
      best.cost = cost;
    }
    int i = k - 1;
    while (i >= 0 && pos[i] == n - k + i) --i;
    if (i < 0) break;
    ++pos[i];
    for (int j = i + 1; j < k; ++j) pos[j] = pos[j - 1] + 1;
  }
  best.exhaustive = true;
  return best;
}

GpuChoice Greedy(Scorer& scorer, std::vector<int> candidates, int k, Placement placement) {
  std::vector<int> chosen;
  for (int step = 0; step < k; ++step) {
    size_t best_i = 0;
    Key best_key;
    for (size_t i = 0; i < candidates.size(); ++i) {
      chosen.push_back(candidates[i]);
      const Key key = KeyOf(scorer.Score(chosen), placement);
      chosen.pop_back();
      if (i == 0 || key < best_key) {
        best_key = key;
        best_i = i;
      }
    }
    chosen.push_back(candidates[best_i]);
    candidates.erase(candidates.begin() + best_i);
  }
  std::sort(chosen.begin(), chosen.end());
  GpuChoice out;
  out.cost = scorer.Score(chosen);
  out.gpus = std::move(chosen);
  out.exhaustive = false;
  return out;
}

}  // namespace

int GpuDistance(const GpuResource& a, const GpuResource& b) {
  if (a.index == b.index) return 0;
  if (std::binary_search(a.nvlink_peers.begin(), a.nvlink_peers.end(), b.index)) return 0;
  if (a.switch_index >= 0 && a.switch_index == b.switch_index) return 1;
  if (a.root_complex >= 0 && a.root_complex == b.root_complex) return 2;
  if (a.package >= 0 || b.package >= 0) return a.package == b.package ? 3 : 4;
  if (a.numa_node >= 0 && a.numa_node == b.numa_node) return 3;
  return 4;
}

PlacementCost ScorePlacement(const std::vector<GpuResource>& gpus, const std::vector<int>& chosen,
                             const std::vector<bool>& busy) {
  Scorer scorer(gpus, busy);
  return scorer.Score(chosen);
}

GpuChoice ChooseGpus(const std::vector<GpuResource>& gpus, std::vector<int> candidates, int k,
                     const std::vector<bool>& busy, Placement placement,
                     const GpuChoiceOptions& options) {
  std::sort(candidates.begin(), candidates.end());
  Scorer scorer(gpus, busy);
  const int n = static_cast<int>(candidates.size());
  if (k >= n) {
    GpuChoice all;
    all.cost = scorer.Score(candidates);
    all.gpus = std::move(candidates);
    return all;
  }
  if (Binomial(n, k, options.max_exhaustive_subsets) <= options.max_exhaustive_subsets) {
    return Exhaustive(scorer, candidates, k, placement);
  }
  return Greedy(scorer, std::move(candidates), k, placement);
}

std::string PlacementCostString(const PlacementCost& c) {
  return absl::StrFormat("uplink_pairs=%d interference_pairs=%d self_pairs=%d distance=%d",
                         c.uplink_pairs, c.interference_pairs, c.self_pairs, c.distance);
}

}  // namespace mobius::jobs
