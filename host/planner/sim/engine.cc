#include "host/planner/sim/engine.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mobius::planner::sim {

const char* TaskKindName(TaskKind kind) {
  switch (kind) {
    case TaskKind::kCompute: return "compute";
    case TaskKind::kWeightUpload: return "weights";
    case TaskKind::kActivation: return "activation";
    case TaskKind::kCheckpoint: return "checkpoint";
    case TaskKind::kGradientOffload: return "gradients";
    case TaskKind::kOptimizer: return "optimizer";
    case TaskKind::kCollective: return "collective";
    case TaskKind::kAllReduce: return "allreduce";
  }
  return "?";
}

namespace {

absl::Status Validate(const TaskGraph& g, const std::vector<SimLink>& links) {
  const int num_streams = static_cast<int>(g.streams.size());
  for (const Stream& s : g.streams) {
    if (s.capacity < 1) return absl::InvalidArgumentError(absl::StrCat("stream ", s.name, " has capacity < 1"));
    if (s.fifo && s.capacity != 1) {
      return absl::InvalidArgumentError(absl::StrCat("FIFO stream ", s.name, " needs capacity 1"));
    }
  }
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& t = g.tasks[i];
    if (t.stream < 0 || t.stream >= num_streams) {
      return absl::InvalidArgumentError(absl::StrCat("task ", i, " on unknown stream ", t.stream));
    }
    for (int d : t.deps) {
      if (d < 0 || d >= static_cast<int>(i)) {
        return absl::InvalidArgumentError(
            absl::StrCat("task ", i, " (", t.label, ") depends on task ", d, ", not created before it"));
      }
    }
    for (int l : t.path) {
      if (l < 0 || l >= static_cast<int>(links.size()) || !(links[l].bytes_per_s > 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("task ", i, " (", t.label, ") crosses link ", l, " without capacity"));
      }
    }
    if (t.seconds < 0 || t.bytes < 0 || t.max_bytes_per_s < 0) {
      return absl::InvalidArgumentError(absl::StrCat("task ", i, " has a negative size"));
    }
  }
  return absl::OkStatus();
}

// Max-min fair rates by progressive filling: every unfrozen transfer's rate rises at the same pace
// until a link it crosses is full (its remaining capacity split among its unfrozen transfers) or
// it reaches its own cap; those freeze at that level, and the rest keep rising on what is left. A
// transfer limited elsewhere thus leaves its unused share of a link to the others.
void FairRates(const TaskGraph& g, const std::vector<SimLink>& links, double duplex_factor,
               const std::vector<int>& active, const std::vector<int>& count,
               std::vector<double>& rate) {
  const int num_links = static_cast<int>(links.size());
  std::vector<double> left(num_links, 0);
  std::vector<int> unfrozen_on(count);
  for (int l = 0; l < num_links; ++l) {
    if (count[l] == 0) continue;
    const int rev = links[l].reverse;
    left[l] = links[l].bytes_per_s * (rev >= 0 && count[rev] > 0 ? duplex_factor : 1.0);
  }
  std::vector<int> todo(active), frozen_now;
  while (!todo.empty()) {
    double level = std::numeric_limits<double>::infinity();
    for (int i : todo) {
      const Task& t = g.tasks[i];
      if (t.max_bytes_per_s > 0) level = std::min(level, t.max_bytes_per_s);
      for (int l : t.path) level = std::min(level, left[l] / unfrozen_on[l]);
    }
    const double reach = level * (1 + 1e-12);
    frozen_now.clear();
    std::vector<int> still;
    for (int i : todo) {
      const Task& t = g.tasks[i];
      bool limited = t.max_bytes_per_s > 0 && t.max_bytes_per_s <= reach;
      for (int l : t.path) limited = limited || left[l] / unfrozen_on[l] <= reach;
      (limited ? frozen_now : still).push_back(i);
    }
    for (int i : frozen_now) {
      rate[i] = level;
      for (int l : g.tasks[i].path) {
        left[l] = std::max(0.0, left[l] - level);
        --unfrozen_on[l];
      }
    }
    todo.swap(still);
  }
}

}  // namespace

absl::StatusOr<EngineResult> RunEngine(const TaskGraph& g, const std::vector<SimLink>& links,
                                       double duplex_factor) {
  if (absl::Status s = Validate(g, links); !s.ok()) return s;
  const int n = static_cast<int>(g.tasks.size());
  const int num_streams = static_cast<int>(g.streams.size());
  const int num_links = static_cast<int>(links.size());

  std::vector<int> pending(n);
  std::vector<std::vector<int>> dependents(n);
  std::vector<std::vector<int>> fifo(num_streams);
  std::vector<size_t> fifo_next(num_streams, 0);
  std::vector<std::set<std::pair<int64_t, int>>> ready_set(num_streams);
  std::vector<char> ready(n, 0);
  std::vector<int> running(num_streams, 0);
  for (int i = 0; i < n; ++i) {
    const Task& t = g.tasks[i];
    pending[i] = static_cast<int>(t.deps.size());
    for (int d : t.deps) dependents[d].push_back(i);
    if (g.streams[t.stream].fifo) fifo[t.stream].push_back(i);
  }
  auto make_ready = [&](int i) {
    ready[i] = 1;
    const Task& t = g.tasks[i];
    if (!g.streams[t.stream].fifo) ready_set[t.stream].insert({t.priority, i});
  };
  for (int i = 0; i < n; ++i) {
    if (pending[i] == 0) make_ready(i);
  }

  EngineResult r;
  r.timings.assign(n, {});
  r.links.assign(num_links, {});
  std::vector<double> end_time(n, 0), remaining(n, 0);
  std::vector<int> active_compute, active_transfer;
  double now = 0;
  int done = 0;

  auto start = [&](int i) {
    const Task& t = g.tasks[i];
    r.timings[i].start = now;
    ++running[t.stream];
    if (t.is_transfer() && t.bytes > 0) {
      remaining[i] = static_cast<double>(t.bytes);
      active_transfer.push_back(i);
    } else {
      end_time[i] = now + (t.is_transfer() ? 0.0 : t.seconds);
      active_compute.push_back(i);
    }
  };
  auto finish = [&](int i) {
    const Task& t = g.tasks[i];
    r.timings[i].end = now;
    --running[t.stream];
    ++done;
    for (int l : t.path) r.links[l].bytes += t.bytes;
    for (int d : dependents[i]) {
      if (--pending[d] == 0) make_ready(d);
    }
  };

  std::vector<int> count(num_links, 0);
  std::vector<double> rate(n, 0);
  while (done < n) {
    // Start everything that can start now.
    for (int s = 0; s < num_streams; ++s) {
      while (running[s] < g.streams[s].capacity) {
        int pick = -1;
        if (g.streams[s].fifo) {
          if (fifo_next[s] < fifo[s].size() && ready[fifo[s][fifo_next[s]]]) {
            pick = fifo[s][fifo_next[s]++];
          }
        } else if (!ready_set[s].empty()) {
          pick = ready_set[s].begin()->second;
          ready_set[s].erase(ready_set[s].begin());
        }
        if (pick < 0) break;
        start(pick);
      }
    }
    if (active_compute.empty() && active_transfer.empty()) {
      return absl::InternalError(absl::StrCat("simulation stuck at t=", now, " with ", n - done,
                                              " of ", n, " tasks left (dependency cycle?)"));
    }
    ++r.events;
    // Rates: max-min fair share over the links (full-duplex degradation applied), per-task caps.
    std::fill(count.begin(), count.end(), 0);
    for (int i : active_transfer) {
      for (int l : g.tasks[i].path) ++count[l];
    }
    FairRates(g, links, duplex_factor, active_transfer, count, rate);
    double dt = std::numeric_limits<double>::infinity();
    for (int i : active_compute) dt = std::min(dt, end_time[i] - now);
    for (int i : active_transfer) dt = std::min(dt, remaining[i] / rate[i]);
    dt = std::max(dt, 0.0);
    for (int l = 0; l < num_links; ++l) {
      if (count[l] > 0) r.links[l].busy_seconds += dt;
    }
    const double tolerance = dt * 1e-12 + 1e-15;
    std::vector<int> finished;
    for (size_t k = 0; k < active_transfer.size();) {
      const int i = active_transfer[k];
      if (remaining[i] / rate[i] <= dt + tolerance) {
        finished.push_back(i);
        active_transfer[k] = active_transfer.back();
        active_transfer.pop_back();
      } else {
        remaining[i] -= rate[i] * dt;
        ++k;
      }
    }
    const double next = now + dt;
    for (size_t k = 0; k < active_compute.size();) {
      const int i = active_compute[k];
      if (end_time[i] <= next + tolerance) {
        finished.push_back(i);
        active_compute[k] = active_compute.back();
        active_compute.pop_back();
      } else {
        ++k;
      }
    }
    now = next;
    std::sort(finished.begin(), finished.end());
    for (int i : finished) finish(i);
  }
  for (const TaskTiming& t : r.timings) r.makespan = std::max(r.makespan, t.end);
  return r;
}

}  // namespace mobius::planner::sim
