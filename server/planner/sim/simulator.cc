#include "server/planner/sim/simulator.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

namespace mobius::planner::sim {
namespace {

void GpuMetrics(const SimMachine& m, SimResult& r) {
  const TaskGraph& g = r.graph;
  const std::vector<TaskTiming>& t = r.engine.timings;
  const int n = m.num_gpus();
  r.gpus.assign(n, {});
  std::vector<double> last_end(n, 0);
  std::vector<bool> any(n, false);
  std::vector<std::vector<int>> computes(n);
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& k = g.tasks[i];
    if (k.kind == TaskKind::kCompute) {
      computes[k.gpu].push_back(static_cast<int>(i));
      r.compute_end_seconds = std::max(r.compute_end_seconds, t[i].end);
    }
    if (k.is_transfer() && k.gpu >= 0) {
      GpuStats& s = r.gpus[k.gpu];
      switch (k.direction) {
        case Direction::kH2D: s.h2d_bytes += k.bytes; r.h2d_bytes += k.bytes; break;
        case Direction::kD2H: s.d2h_bytes += k.bytes; r.d2h_bytes += k.bytes; break;
        case Direction::kP2P: s.p2p_bytes += k.bytes; r.p2p_bytes += k.bytes; break;
        case Direction::kNone: break;
      }
      if (k.kind == TaskKind::kWeightUpload && k.direction == Direction::kH2D) {
        r.weight_upload_bytes += k.bytes;
      }
    }
  }
  double busy_total = 0;
  for (int gpu = 0; gpu < n; ++gpu) {
    GpuStats& s = r.gpus[gpu];
    s.gpu = m.gpus[gpu].topology_gpu;
    std::vector<int>& c = computes[gpu];
    std::sort(c.begin(), c.end(), [&](int a, int b) { return t[a].start < t[b].start; });
    double prev = 0;
    for (int i : c) {
      s.busy_seconds += t[i].end - t[i].start;
      const double gap = t[i].start - prev;
      if (gap > 1e-12) {
        int last = -1;
        for (int d : g.tasks[i].deps) {
          if (last < 0 || t[d].end > t[last].end) last = d;
        }
        const TaskKind kind = last >= 0 ? g.tasks[last].kind : TaskKind::kCompute;
        if (kind == TaskKind::kWeightUpload) {
          s.stall_prefetch_seconds += gap;
        } else if (kind == TaskKind::kActivation || kind == TaskKind::kCheckpoint) {
          s.stall_activation_seconds += gap;
        } else {
          s.stall_other_seconds += gap;
        }
      }
      prev = t[i].end;
    }
    s.idle_tail_seconds = r.compute_end_seconds - prev;
    busy_total += s.busy_seconds;
  }
  const int used = n;
  r.bubble_fraction =
      r.compute_end_seconds > 0 ? 1.0 - busy_total / (used * r.compute_end_seconds) : 0.0;
}

void StageMetrics(const SimMachine& m, SimResult& r, int num_stages) {
  const TaskGraph& g = r.graph;
  const std::vector<TaskTiming>& t = r.engine.timings;
  r.stages.assign(num_stages, {});
  for (int s = 0; s < num_stages; ++s) r.stages[s].stage = s;
  std::vector<std::array<bool, 2>> seen(num_stages, {false, false});
  // A residency per slot occupancy (Task::slot), else per pass (resident, zero).
  using Key = std::tuple<int, int, int, bool>;  // gpu, occupancy, stage, backward
  std::map<Key, Residency> slots;
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& k = g.tasks[i];
    if (k.stage < 0 || k.stage >= num_stages) continue;
    StageTiming& st = r.stages[k.stage];
    if (k.kind == TaskKind::kOptimizer) st.optimizer_end = std::max(st.optimizer_end, t[i].end);
    if (k.kind == TaskKind::kCompute) {
      double& b = k.backward ? st.backward_start : st.forward_start;
      double& e = k.backward ? st.backward_end : st.forward_end;
      if (!seen[k.stage][k.backward]) {
        b = t[i].start;
        e = t[i].end;
        seen[k.stage][k.backward] = true;
        (k.backward ? st.backward_gpu : st.forward_gpu) = m.gpus[k.gpu].topology_gpu;
      }
      b = std::min(b, t[i].start);
      e = std::max(e, t[i].end);
    }
    const bool held = k.kind == TaskKind::kCompute || k.kind == TaskKind::kWeightUpload ||
                      k.kind == TaskKind::kGradientOffload;
    if (!held || k.gpu < 0) continue;
    const Key key =
        k.slot >= 0 ? Key{k.gpu, k.slot, -1, false} : Key{k.gpu, -1, k.stage, k.backward};
    auto [it, fresh] =
        slots.try_emplace(key, Residency{k.gpu, k.stage, k.backward, t[i].start, t[i].end});
    it->second.begin = std::min(it->second.begin, t[i].start);
    it->second.end = std::max(it->second.end, t[i].end);
  }
  std::vector<std::vector<std::pair<double, int>>> events(m.num_gpus());
  for (const auto& [key, res] : slots) {
    r.residencies.push_back(res);
    events[res.gpu].push_back({res.begin, +1});
    events[res.gpu].push_back({res.end, -1});
  }
  for (int gpu = 0; gpu < m.num_gpus(); ++gpu) {
    auto& e = events[gpu];
    std::sort(e.begin(), e.end());  // at equal times releases (-1) come first
    int held = 0;
    for (const auto& [time, delta] : e) {
      held += delta;
      r.gpus[gpu].max_resident_stages = std::max(r.gpus[gpu].max_resident_stages, held);
    }
  }
}

}  // namespace

absl::StatusOr<SimResult> Simulate(const SimMachine& machine, const std::vector<SimStage>& stages,
                                   const SimConfig& config) {
  absl::StatusOr<TaskGraph> graph = BuildTaskGraph(machine, stages, config);
  if (!graph.ok()) return graph.status();
  absl::StatusOr<EngineResult> engine = RunEngine(*graph, machine.links, machine.duplex_factor);
  if (!engine.ok()) return engine.status();
  SimResult r;
  r.schedule = ScheduleName(config.schedule);
  r.graph = *std::move(graph);
  r.engine = *std::move(engine);
  r.step_seconds = r.engine.makespan;
  for (size_t l = 0; l < machine.links.size(); ++l) {
    r.links.push_back({machine.links[l].name, machine.links[l].bytes_per_s, r.engine.links[l].bytes,
                       r.engine.links[l].busy_seconds});
  }
  GpuMetrics(machine, r);
  // roundrobin with a backward partition: backward_* fields of StageTiming k are backward stage k.
  StageMetrics(machine, r,
               static_cast<int>(std::max(stages.size(), config.backward_stages.size())));
  return r;
}

}  // namespace mobius::planner::sim
