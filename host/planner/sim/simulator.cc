#include "host/planner/sim/simulator.h"

#include <algorithm>
#include <array>
#include <map>
#include <numeric>
#include <tuple>

namespace mobius::planner::sim {
namespace {

// Metrics of the reported steps (the last reported_steps; SimResult::step_begin_seconds on), per
// step.
void GpuMetrics(const SimMachine& m, SimResult& r) {
  const TaskGraph& g = r.graph;
  const std::vector<TaskTiming>& t = r.engine.timings;
  const int n = m.num_gpus();
  const int last = r.steps - 1 - r.drain_steps;
  const int first = last + 1 - r.reported_steps;
  r.gpus.assign(n, {});
  std::vector<std::vector<int>> computes(n);
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& k = g.tasks[i];
    if (k.step < first || k.step > last) continue;
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
    double prev = r.step_begin_seconds;
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
  // One step: idle share over [0, compute end]; several: over the reported steps' window.
  const double window = r.steps > 1 ? r.reported_steps * r.step_seconds
                                    : r.compute_end_seconds - r.step_begin_seconds;
  r.bubble_fraction = window > 0 ? 1.0 - busy_total / (n * window) : 0.0;
  if (r.reported_steps > 1) {  // per step
    const double k = r.reported_steps;
    r.h2d_bytes /= r.reported_steps, r.d2h_bytes /= r.reported_steps;
    r.p2p_bytes /= r.reported_steps, r.weight_upload_bytes /= r.reported_steps;
    for (GpuStats& s : r.gpus) {
      s.busy_seconds /= k, s.stall_prefetch_seconds /= k, s.stall_activation_seconds /= k;
      s.stall_other_seconds /= k, s.idle_tail_seconds /= k;
      s.h2d_bytes /= r.reported_steps, s.d2h_bytes /= r.reported_steps;
      s.p2p_bytes /= r.reported_steps;
    }
  }
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
    if (k.step != r.steps - 1 - r.drain_steps || k.stage < 0 || k.stage >= num_stages) continue;
    StageTiming& st = r.stages[k.stage];
    if (k.kind == TaskKind::kOptimizer) st.optimizer_end = std::max(st.optimizer_end, t[i].end);
    if (k.kind == TaskKind::kAllReduce) {
      st.allreduce_start =
          st.allreduce_end > 0 ? std::min(st.allreduce_start, t[i].start) : t[i].start;
      st.allreduce_end = std::max(st.allreduce_end, t[i].end);
      r.allreduce_bytes += k.bytes;
      r.allreduce_seconds += t[i].end - t[i].start;
    }
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

int StepsOf(const SimConfig& c) {
  return c.schedule == Schedule::kMobius || c.schedule == Schedule::kRoundRobin
             ? std::max(1, c.steps)
             : 1;
}

// The rotation cycle of a round-robin pass stream (simulator.h): N / gcd(P, N); 1 otherwise.
int RotationCycle(const SimMachine& machine, const std::vector<SimStage>& stages,
                  const SimConfig& c) {
  if (c.schedule != Schedule::kRoundRobin) return 1;
  const int n = c.gpu_order.empty() ? machine.num_gpus() : static_cast<int>(c.gpu_order.size());
  const int sb = c.backward_stages.empty() ? static_cast<int>(stages.size())
                                           : static_cast<int>(c.backward_stages.size());
  const int p = static_cast<int>(stages.size()) + sb;
  return n > 0 ? n / std::gcd(p, n) : 1;
}

absl::StatusOr<SimResult> SimulateOnce(const SimMachine& machine,
                                       const std::vector<SimStage>& stages,
                                       const SimConfig& config) {
  absl::StatusOr<TaskGraph> graph = BuildTaskGraph(machine, stages, config);
  if (!graph.ok()) return graph.status();
  absl::StatusOr<EngineResult> engine = RunEngine(*graph, machine.links, machine.duplex_factor);
  if (!engine.ok()) return engine.status();
  SimResult r;
  r.schedule = ScheduleName(config.schedule);
  r.graph = *std::move(graph);
  r.engine = *std::move(engine);
  r.steps = StepsOf(config);
  r.drain_steps = r.steps > 2 ? std::min(config.drain_steps, r.steps - 2) : 0;
  const int last = r.steps - 1 - r.drain_steps;  // the last reported step
  // The steady steps: after the first (cold) and, with staleness 1, the second (it computes with
  // the initial weights and waits for no update); whole rotation cycles of them, at least one.
  const int cycle = RotationCycle(machine, stages, config);
  const int steady = last - config.optimizer_staleness;  // steps 1 + staleness .. last
  r.reported_steps = r.steps > 1 ? std::min(last, std::max(cycle, steady / cycle * cycle)) : 1;
  std::vector<double> step_end(r.steps, 0);
  for (size_t i = 0; i < r.graph.tasks.size(); ++i) {
    const int k = std::min(r.graph.tasks[i].step, r.steps - 1);
    step_end[k] = std::max(step_end[k], r.engine.timings[i].end);
  }
  r.step_begin_seconds = r.steps > 1 ? step_end[last - r.reported_steps] : 0.0;
  r.step_seconds = (step_end[last] - r.step_begin_seconds) / r.reported_steps;
  r.compute_end_seconds = r.step_begin_seconds;
  // Link bytes per reported step; busy time averaged over the steps.
  std::vector<int64_t> bytes(machine.links.size(), 0);
  for (const Task& k : r.graph.tasks) {
    if (k.step < last + 1 - r.reported_steps || k.step > last) continue;
    for (int l : k.path) bytes[l] += k.bytes;
  }
  for (int64_t& b : bytes) b /= r.reported_steps;
  for (size_t l = 0; l < machine.links.size(); ++l) {
    r.links.push_back({machine.links[l].name, machine.links[l].bytes_per_s, bytes[l],
                       r.engine.links[l].busy_seconds / r.steps});
  }
  GpuMetrics(machine, r);
  // roundrobin with a backward partition: backward_* fields of StageTiming k are backward stage k.
  StageMetrics(machine, r,
               static_cast<int>(std::max(stages.size(), config.backward_stages.size())));
  return r;
}

// Pool dispatch: a GPU claims the next pass of the stream when its current one is ready to
// compute on its side (the weights loaded and the GPU's previous pass done; its input may still
// be on the way), as RunPoolPasses does; GPUs claim passes 0..N-1 in gpu_order at the start. The
// claims depend on the timings and the timings on the claims, so the assignment is iterated to a
// fixed point from round-robin: the k-th pass to be ready (ties by pass) hands pass N + k to its
// GPU. Stops at the fixed point or after kPoolIterations (SimResult::pool_converged). The claims
// are greedy: a GPU whose pass ends first also claims the next ticket, so consecutive passes can
// queue on one GPU while others idle (sim_mechanisms_test: slower than static there).
constexpr int kPoolIterations = 12;

absl::StatusOr<SimResult> SimulatePool(const SimMachine& machine,
                                       const std::vector<SimStage>& stages,
                                       const SimConfig& config) {
  SimConfig c = config;
  std::vector<int> order = config.gpu_order;
  if (order.empty()) {
    for (const SimGpu& g : machine.gpus) order.push_back(g.topology_gpu);
  }
  const int n = static_cast<int>(order.size());
  const int sf = static_cast<int>(stages.size());
  const int sb = config.backward_stages.empty() ? sf
                                                : static_cast<int>(config.backward_stages.size());
  const int per_step = sf + sb;
  const int total = per_step * std::max(1, config.steps);
  c.pass_gpus.resize(total);
  for (int j = 0; j < total; ++j) c.pass_gpus[j] = order[j % n];
  absl::StatusOr<SimResult> r;
  for (int iter = 1; iter <= kPoolIterations; ++iter) {
    r = SimulateOnce(machine, stages, c);
    if (!r.ok()) return r.status();
    r->pool_iterations = iter;
    // When each pass's rank claims the next ticket: as the runtime does (RunPoolPasses), once the
    // pass's weights are on the device and the rank's previous pass has returned, i.e. before
    // the pass waits for its input (not at its first compute).
    std::vector<double> loaded(total, 0), end(total, 0), start(total, 0);
    for (size_t i = 0; i < r->graph.tasks.size(); ++i) {
      const Task& k = r->graph.tasks[i];
      if (k.kind != TaskKind::kCompute && k.kind != TaskKind::kWeightUpload) continue;
      const int j = k.step * per_step + (k.backward ? sf + (sb - 1 - k.stage) : k.stage);
      if (j < 0 || j >= total) continue;
      double& t = k.kind == TaskKind::kCompute ? end[j] : loaded[j];
      t = std::max(t, r->engine.timings[i].end);
    }
    std::map<int, double> previous_end;  // by GPU: the end of its last pass so far
    for (int j = 0; j < total; ++j) {
      double& prev = previous_end[c.pass_gpus[j]];
      start[j] = std::max(loaded[j], prev);
      prev = end[j];
    }
    std::vector<int> by_start(total);
    for (int j = 0; j < total; ++j) by_start[j] = j;
    std::stable_sort(by_start.begin(), by_start.end(),
                     [&](int a, int b) { return start[a] < start[b]; });
    std::vector<int> next(total);
    for (int j = 0; j < std::min(n, total); ++j) next[j] = order[j];
    for (int k = 0; k + n < total; ++k) {
      // In a consistent assignment the k-th pass to start was claimed before pass N + k; in an
      // intermediate one it may not have been: keep its previous GPU then.
      const int src = by_start[k];
      next[k + n] = src < k + n ? next[src] : c.pass_gpus[src];
    }
    if (next == c.pass_gpus) {
      r->pool_converged = true;
      break;
    }
    c.pass_gpus = std::move(next);
  }
  r->pass_gpus = c.pass_gpus;
  return r;
}

}  // namespace

absl::StatusOr<SimResult> Simulate(const SimMachine& machine, const std::vector<SimStage>& stages,
                                   const SimConfig& config) {
  SimConfig c = config;
  // A rotating pass stream: one cycle + 1 steps at least, so that the reported mean covers every
  // phase (simulator.h). Explicit pass_gpus keep the caller's steps (they fix their length).
  const int cycle = RotationCycle(machine, stages, c);
  if (cycle > 1 && c.pass_gpus.empty()) c.steps = std::min(64, std::max(c.steps, cycle + 1));
  // The drain: the last step of a finite stream has nothing after it (no next step's passes,
  // uploads or activations on its GPUs and links), so with several steps one more is simulated
  // and left out of the report. Explicit pass_gpus fix the length: no drain then.
  c.drain_steps = 0;
  if (StepsOf(c) > 1 && c.pass_gpus.empty() && c.steps < 64) {
    c.steps += 1;
    c.drain_steps = 1;
  }
  if (c.schedule == Schedule::kRoundRobin && c.dispatch == Dispatch::kPool &&
      c.pass_gpus.empty()) {
    return SimulatePool(machine, stages, c);
  }
  absl::StatusOr<SimResult> r = SimulateOnce(machine, stages, c);
  if (r.ok()) r->pass_gpus = c.pass_gpus;
  return r;
}

}  // namespace mobius::planner::sim
