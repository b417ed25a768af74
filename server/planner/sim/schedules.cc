#include "server/planner/sim/schedules.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mobius::planner::sim {

namespace {

std::vector<SimStage> StagesOf(const PartitionProblem& p, const std::vector<StageRange>& ranges) {
  int64_t total_w = 0;
  for (const UnitCost& u : p.units) total_w += u.weight_bytes;
  std::vector<SimStage> out;
  for (size_t s = 0; s < ranges.size(); ++s) {
    SimStage st;
    for (int u = ranges[s].begin; u < ranges[s].end; ++u) {
      st.forward_seconds += p.units[u].forward_seconds;
      st.backward_seconds += p.units[u].backward_seconds;
      st.weight_bytes += p.units[u].weight_bytes;
      st.gradient_bytes += p.units[u].gradient_bytes;
    }
    st.overhead_seconds = p.stage_overhead_seconds / 2;
    st.unit_begin = ranges[s].begin;
    st.unit_end = ranges[s].end;
    st.input_bytes = s == 0 ? 0 : p.boundary_bytes;
    st.optimizer_seconds = total_w > 0 ? p.optimizer_seconds * static_cast<double>(st.weight_bytes) /
                                             static_cast<double>(total_w)
                                       : 0;
    out.push_back(st);
  }
  return out;
}

// The two weight slots of one GPU as the runtime uses them (worker/runtime/pipeline_worker.cc,
// RunPasses; pipeline_passes.cc, EnsureLoaded / Prefetch): a pass whose unit range a slot still
// holds runs from it; any other pass loads into the slot used less recently (the runtime prefetches
// into the slot the current pass does not use), once that slot's last pass has released it.
class SlotPair {
 public:
  struct Use {
    bool load = true;        // the pass uploads its weights ...
    std::vector<int> after;  // ... once these tasks have ended (the evicted slot's release)
    int occupancy = 0;       // Task::slot of the pass's tasks
  };

  // The slot of the next pass on this GPU, over units `range`.
  Use Take(std::pair<int, int> range) {
    for (int i : {mru_, 1 - mru_}) {
      if (slot_[i].range == range) {
        mru_ = i;
        return {false, {}, slot_[i].occupancy};
      }
    }
    mru_ = 1 - mru_;
    Entry& e = slot_[mru_];
    Use u{true, std::move(e.release), loads_++};
    e = {range, {}, u.occupancy};
    return u;
  }
  // The tasks that end the pass just taken (its last compute; backward: its gradient offload).
  void Release(std::vector<int> tasks) { slot_[mru_].release = std::move(tasks); }

 private:
  struct Entry {
    std::pair<int, int> range{-1, -1};
    std::vector<int> release;
    int occupancy = -1;
  };
  Entry slot_[2];
  int mru_ = 1;  // the slot used last; the first load goes to slot 0
  int loads_ = 0;
};

constexpr int64_t kClassActivation = 0;
constexpr int64_t kClassBulk = int64_t{1} << 40;

class Builder {
 public:
  Builder(const SimMachine& m, const std::vector<SimStage>& st, const SimConfig& c,
          std::vector<int> order)
      : m_(m), st_(st), c_(c), order_(std::move(order)), n_(m.num_gpus()),
        s_(static_cast<int>(st.size())), mb_(c.num_microbatches) {
    for (int i = 0; i < n_; ++i) {
      g_.AddStream({absl::StrCat("gpu", m.gpus[i].topology_gpu, ".compute"), StreamKind::kCompute, i, true, 1});
      g_.AddStream({absl::StrCat("gpu", m.gpus[i].topology_gpu, ".h2d"), StreamKind::kH2D, i, false, 1});
      g_.AddStream({absl::StrCat("gpu", m.gpus[i].topology_gpu, ".d2h"), StreamKind::kD2H, i, false, 1});
    }
    cpu_ = g_.AddStream({"cpu.optimizer", StreamKind::kCpu, -1, false, m.cpu_optimizer_threads});
  }

  TaskGraph Pipeline();
  TaskGraph RoundRobin(const std::vector<SimStage>& backward);
  TaskGraph Zero();

 private:
  int Comp(int gpu) const { return 3 * gpu; }
  int H2D(int gpu) const { return 3 * gpu + 1; }
  int D2H(int gpu) const { return 3 * gpu + 2; }

  int Add(Task t, int64_t cls) {
    t.priority = cls + static_cast<int64_t>(g_.tasks.size());
    return g_.Add(std::move(t));
  }
  Task Xfer(TaskKind kind, Direction dir, int gpu, int64_t bytes, std::vector<int> path,
            std::vector<int> deps, int stage, int mb, bool bwd, std::string label) {
    Task t;
    t.kind = kind;
    t.direction = dir;
    t.stream = dir == Direction::kH2D ? H2D(gpu) : D2H(gpu);
    t.bytes = bytes;
    t.path = std::move(path);
    t.deps = std::move(deps);
    t.gpu = gpu;
    t.stage = stage;
    t.microbatch = mb;
    t.backward = bwd;
    t.label = std::move(label);
    return t;
  }
  // Bulk copy (weights or gradients) in chunks; returns the chunk task ids.
  std::vector<int> Bulk(TaskKind kind, Direction dir, int gpu, int64_t bytes,
                        const std::vector<int>& path, const std::vector<int>& deps, int stage,
                        bool bwd, const std::string& label) {
    std::vector<int> ids;
    const int64_t chunk = c_.chunk_bytes > 0 ? c_.chunk_bytes : std::max<int64_t>(bytes, 1);
    int64_t left = bytes;
    do {
      const int64_t b = std::min(left, chunk);
      ids.push_back(Add(Xfer(kind, dir, gpu, b, path, deps, stage, -1, bwd, label), kClassBulk));
      left -= b;
    } while (left > 0);
    return ids;
  }
  // Moves `bytes` produced by task `src_task` on GPU a to GPU b; returns the task b waits for.
  // Host-staged unless P2P; `host_copy` is an existing D2H copy of the data on a (or -1).
  int Move(TaskKind kind, int a, int b, int64_t bytes, int src_task, int host_copy, int stage,
           int mb, bool bwd, const std::string& what) {
    if (bytes <= 0) return src_task;
    if (a != b && m_.p2p[a][b]) {
      return Add(Xfer(kind, Direction::kP2P, a, bytes, m_.P2pPath(a, b), {src_task}, stage, mb,
                      bwd, what + " p2p"),
                 kClassActivation);
    }
    if (host_copy < 0) {
      host_copy = Add(Xfer(kind, Direction::kD2H, a, bytes, m_.gpus[a].d2h_path, {src_task},
                           stage, mb, bwd, what + " d2h"),
                      kClassActivation);
    }
    return Add(Xfer(kind, Direction::kH2D, b, bytes, m_.gpus[b].h2d_path, {host_copy}, stage, mb,
                    bwd, what + " h2d"),
               kClassActivation);
  }
  int Compute(int gpu, double seconds, std::vector<int> deps, int stage, int mb, bool bwd,
              std::string label) {
    Task t;
    t.kind = TaskKind::kCompute;
    t.stream = Comp(gpu);
    t.seconds = seconds;
    t.deps = std::move(deps);
    t.gpu = gpu;
    t.stage = stage;
    t.microbatch = mb;
    t.backward = bwd;
    t.label = std::move(label);
    return Add(std::move(t), 0);
  }
  // Marks the tasks as held in weight slot occupancy `slot` (Task::slot).
  void Hold(int slot, const std::vector<int>& ids) {
    for (int id : ids) g_.tasks[id].slot = slot;
  }
  int Optimizer(int stage, double seconds, std::vector<int> deps) {
    Task t;
    t.kind = TaskKind::kOptimizer;
    t.stream = cpu_;
    t.seconds = seconds;
    t.deps = std::move(deps);
    t.stage = stage;
    t.backward = true;
    t.label = absl::StrCat("adam s", stage);
    return Add(std::move(t), 0);
  }

  const SimMachine& m_;
  const std::vector<SimStage>& st_;
  const SimConfig& c_;
  std::vector<int> order_;
  int n_, s_, mb_;
  int cpu_ = 0;
  TaskGraph g_;
};

TaskGraph Builder::Pipeline() {
  const bool resident = c_.schedule == Schedule::kResident;
  // mobius and resident: stage s on order[s mod N] in both passes (roundrobin: RoundRobin()).
  auto gpu_of = [&](int stage, bool /*bwd*/) {
    return order_[stage % static_cast<int>(order_.size())];
  };
  std::vector<SlotPair> slots(n_);
  std::vector<std::vector<int>> fwd(s_, std::vector<int>(mb_, -1)), bwd = fwd, ckpt = fwd;

  // Stage s's weights for a pass on `gpu` (one partition in both passes: the stage index names the
  // units); no upload when a slot still holds them (a GPU's last two forward stages, in backward).
  // Returns the upload's chunks and sets `slot` (Task::slot).
  auto upload = [&](int gpu, int stage, bool back, int& slot) -> std::vector<int> {
    if (resident) return {};
    const SlotPair::Use use = slots[gpu].Take({stage, stage + 1});
    slot = use.occupancy;
    if (!use.load) return {};
    return Bulk(TaskKind::kWeightUpload, Direction::kH2D, gpu, st_[stage].weight_bytes,
                m_.gpus[gpu].h2d_path, use.after, stage, back,
                absl::StrCat(back ? "B" : "F", " weights s", stage));
  };

  for (int s = 0; s < s_; ++s) {  // forward
    const int g = gpu_of(s, false);
    int slot = -1;
    std::vector<int> w = upload(g, s, false, slot);
    for (int mb = 0; mb < mb_; ++mb) {
      std::vector<int> deps = w;
      if (s == 0) {
        if (!resident && st_[0].input_bytes > 0) {
          deps.push_back(Add(Xfer(TaskKind::kCheckpoint, Direction::kH2D, g, st_[0].input_bytes,
                                  m_.gpus[g].h2d_path, {}, 0, mb, false, "input h2d"),
                             kClassActivation));
        }
      } else {
        const int p = gpu_of(s - 1, false);
        const int64_t h = st_[s].input_bytes;
        if (resident && p == g) {
          deps.push_back(fwd[s - 1][mb]);
        } else {
          deps.push_back(Move(TaskKind::kActivation, p, g, h, fwd[s - 1][mb],
                              resident ? -1 : ckpt[s - 1][mb], s, mb, false,
                              absl::StrCat("F act s", s - 1, "->", s)));
        }
      }
      fwd[s][mb] = Compute(g, st_[s].forward_seconds + (mb == 0 ? st_[s].overhead_seconds : 0),
                           deps, s, mb, false, absl::StrCat("F s", s, " mb", mb));
      if (!resident && s + 1 < s_ && st_[s + 1].input_bytes > 0) {
        ckpt[s][mb] = Add(Xfer(TaskKind::kCheckpoint, Direction::kD2H, g, st_[s + 1].input_bytes,
                               m_.gpus[g].d2h_path, {fwd[s][mb]}, s, mb, false,
                               absl::StrCat("F ckpt s", s, " mb", mb)),
                          kClassActivation);
      }
    }
    Hold(slot, w);
    Hold(slot, fwd[s]);
    if (!resident) slots[g].Release({fwd[s][mb_ - 1]});
  }
  std::vector<int> all_grads;
  for (int s = s_ - 1; s >= 0; --s) {  // backward
    const int g = gpu_of(s, true);
    int slot = -1;
    std::vector<int> w = upload(g, s, true, slot);
    for (int mb = 0; mb < mb_; ++mb) {
      std::vector<int> deps = w;
      deps.push_back(fwd[s][mb]);  // the forward happened (resident: its input is still here)
      if (!resident && st_[s].input_bytes > 0) {
        std::vector<int> src = s > 0 && ckpt[s - 1][mb] >= 0 ? std::vector<int>{ckpt[s - 1][mb]}
                                                             : std::vector<int>{};
        deps.push_back(Add(Xfer(TaskKind::kCheckpoint, Direction::kH2D, g, st_[s].input_bytes,
                                m_.gpus[g].h2d_path, src, s, mb, true,
                                absl::StrCat("B ckpt s", s, " mb", mb)),
                           kClassActivation));
      }
      if (s + 1 < s_) {
        const int q = gpu_of(s + 1, true);
        if (resident && q == g) {
          deps.push_back(bwd[s + 1][mb]);
        } else {
          deps.push_back(Move(TaskKind::kActivation, q, g, st_[s + 1].input_bytes, bwd[s + 1][mb],
                              -1, s, mb, true, absl::StrCat("B grad s", s + 1, "->", s)));
        }
      }
      bwd[s][mb] = Compute(g, st_[s].backward_seconds + (mb == 0 ? st_[s].overhead_seconds : 0),
                           deps, s, mb, true, absl::StrCat("B s", s, " mb", mb));
    }
    std::vector<int> rel = {bwd[s][mb_ - 1]};
    if (!resident) {
      std::vector<int> gr =
          Bulk(TaskKind::kGradientOffload, Direction::kD2H, g, st_[s].gradient_bytes,
               m_.gpus[g].d2h_path, {bwd[s][mb_ - 1]}, s, true, absl::StrCat("grads s", s));
      rel.insert(rel.end(), gr.begin(), gr.end());
      all_grads.insert(all_grads.end(), gr.begin(), gr.end());
      if (!c_.paper_barrier) Optimizer(s, st_[s].optimizer_seconds, gr);
      Hold(slot, w);
      Hold(slot, bwd[s]);
      Hold(slot, gr);
      slots[g].Release(rel);
    }
  }
  if (!resident && c_.paper_barrier) {
    for (int s = s_ - 1; s >= 0; --s) Optimizer(s, st_[s].optimizer_seconds, all_grads);
  }
  return std::move(g_);
}

TaskGraph Builder::RoundRobin(const std::vector<SimStage>& bst) {
  const int sf = s_, sb = static_cast<int>(bst.size());
  const int n = static_cast<int>(order_.size());
  auto gpu_of_pass = [&](int pass) { return order_[pass % n]; };
  std::vector<SlotPair> slots(n_);
  // A pass's weights, unless a slot of its GPU still holds its unit range (the runtime keys slots
  // by range, so a backward pass may run from a forward pass's slot). Sets `slot` (Task::slot).
  auto upload = [&](int gpu, const SimStage& st, int stage, bool back, int& slot) {
    const SlotPair::Use use = slots[gpu].Take({st.unit_begin, st.unit_end});
    slot = use.occupancy;
    if (!use.load) return std::vector<int>{};
    return Bulk(TaskKind::kWeightUpload, Direction::kH2D, gpu, st.weight_bytes,
                m_.gpus[gpu].h2d_path, use.after, stage, back,
                absl::StrCat(back ? "B" : "F", " weights s", stage));
  };
  // Units where a checkpoint is needed: the input of every backward stage but the first (and of
  // every forward stage, which the next forward stage receives through it).
  std::vector<int64_t> ckpt_bytes_at;  // by unit; 0 = no checkpoint there
  int num_units = 0;
  for (const SimStage& st : st_) num_units = std::max(num_units, st.unit_end);
  ckpt_bytes_at.assign(num_units + 1, 0);
  for (int s = 1; s < sf; ++s) ckpt_bytes_at[st_[s].unit_begin] = st_[s].input_bytes;
  for (int b = 1; b < sb; ++b) ckpt_bytes_at[bst[b].unit_begin] = bst[b].input_bytes;
  // [unit][mb]: the D2H task that put the unit's input in host memory; fwd_of_unit: the forward
  // compute that produced it.
  std::vector<std::vector<int>> ckpt(num_units + 1, std::vector<int>(mb_, -1));
  std::vector<std::vector<int>> fwd(sf, std::vector<int>(mb_, -1));
  std::vector<int> fstage_of_unit(num_units, 0);

  for (int s = 0; s < sf; ++s) {  // forward passes 0..S_F-1
    const SimStage& st = st_[s];
    for (int u = st.unit_begin; u < st.unit_end; ++u) fstage_of_unit[u] = s;
    const int g = gpu_of_pass(s);
    int slot = -1;
    std::vector<int> w = upload(g, st, s, false, slot);
    for (int mb = 0; mb < mb_; ++mb) {
      std::vector<int> deps = w;
      if (s > 0) {
        deps.push_back(Move(TaskKind::kActivation, gpu_of_pass(s - 1), g, st.input_bytes,
                            fwd[s - 1][mb], ckpt[st.unit_begin][mb], s, mb, false,
                            absl::StrCat("F act s", s - 1, "->", s)));
      }
      fwd[s][mb] = Compute(g, st.forward_seconds + (mb == 0 ? st.overhead_seconds : 0), deps, s, mb,
                           false, absl::StrCat("F s", s, " mb", mb));
      for (int u = st.unit_begin + 1; u <= st.unit_end && u < num_units; ++u) {
        if (ckpt_bytes_at[u] <= 0) continue;
        ckpt[u][mb] = Add(
            Xfer(TaskKind::kCheckpoint, Direction::kD2H, g, ckpt_bytes_at[u], m_.gpus[g].d2h_path,
                 {fwd[s][mb]}, s, mb, false, absl::StrCat("F ckpt u", u, " mb", mb)),
            kClassActivation);
      }
    }
    Hold(slot, w);
    Hold(slot, fwd[s]);
    slots[g].Release({fwd[s][mb_ - 1]});
  }
  std::vector<std::vector<int>> bwd(sb, std::vector<int>(mb_, -1));
  for (int b = sb - 1; b >= 0; --b) {  // backward passes S_F..S_F+S_B-1
    const SimStage& st = bst[b];
    const int g = gpu_of_pass(sf + (sb - 1 - b));
    int slot = -1;
    std::vector<int> w = upload(g, st, b, true, slot);
    for (int mb = 0; mb < mb_; ++mb) {
      std::vector<int> deps = w;
      deps.push_back(fwd[fstage_of_unit[st.unit_end - 1]][mb]);  // its forward happened
      if (st.input_bytes > 0) {
        std::vector<int> src = ckpt[st.unit_begin][mb] >= 0
                                   ? std::vector<int>{ckpt[st.unit_begin][mb]}
                                   : std::vector<int>{};
        deps.push_back(
            Add(Xfer(TaskKind::kCheckpoint, Direction::kH2D, g, st.input_bytes, m_.gpus[g].h2d_path,
                     src, b, mb, true, absl::StrCat("B ckpt s", b, " mb", mb)),
                kClassActivation));
      }
      if (b + 1 < sb) {
        const int q = gpu_of_pass(sf + (sb - 2 - b));
        deps.push_back(Move(TaskKind::kActivation, q, g, bst[b + 1].input_bytes, bwd[b + 1][mb], -1,
                            b, mb, true, absl::StrCat("B grad s", b + 1, "->", b)));
      }
      bwd[b][mb] = Compute(g, st.backward_seconds + (mb == 0 ? st.overhead_seconds : 0), deps, b,
                           mb, true, absl::StrCat("B s", b, " mb", mb));
    }
    std::vector<int> rel = {bwd[b][mb_ - 1]};
    std::vector<int> gr =
        Bulk(TaskKind::kGradientOffload, Direction::kD2H, g, st.gradient_bytes, m_.gpus[g].d2h_path,
             {bwd[b][mb_ - 1]}, b, true, absl::StrCat("grads s", b));
    rel.insert(rel.end(), gr.begin(), gr.end());
    Optimizer(b, st.optimizer_seconds, gr);
    Hold(slot, w);
    Hold(slot, bwd[b]);
    Hold(slot, gr);
    slots[g].Release(rel);
  }
  return std::move(g_);
}

TaskGraph Builder::Zero() {
  bool nvlink_all = n_ > 1;
  for (int a = 0; a < n_; ++a) {
    for (int b = 0; b < n_; ++b) {
      if (a != b && (!m_.p2p[a][b] || m_.gpus[a].nvlink_in < 0)) nvlink_all = false;
    }
  }
  std::vector<int> count(n_, 0);
  for (int mb = 0; mb < mb_; ++mb) ++count[mb % n_];
  std::vector<std::vector<std::vector<int>>> releases(n_);
  std::vector<int> prev(n_, -1);
  std::vector<int> all_grads;
  auto pass = [&](int s, bool back) {
    std::vector<std::vector<int>> shard(n_);
    for (int g = 0; g < n_; ++g) {
      std::vector<int> deps;
      if (releases[g].size() >= 2) deps = releases[g][releases[g].size() - 2];
      const int64_t w = nvlink_all ? st_[s].weight_bytes / n_ : st_[s].weight_bytes;
      shard[g] = Bulk(TaskKind::kWeightUpload, Direction::kH2D, g, w, m_.gpus[g].h2d_path, deps,
                      s, back, absl::StrCat(back ? "B" : "F", " weights s", s));
    }
    std::vector<int> grads_of_stage;
    for (int g = 0; g < n_; ++g) {
      std::vector<int> deps = shard[g];
      if (nvlink_all) {
        std::vector<int> all;
        for (const auto& v : shard) all.insert(all.end(), v.begin(), v.end());
        const int64_t rest = st_[s].weight_bytes - st_[s].weight_bytes / n_;
        deps = {Add(Xfer(TaskKind::kWeightUpload, Direction::kP2P, g, rest,
                         {m_.gpus[g].nvlink_in}, all, s, -1, back, "allgather"),
                    kClassBulk)};
      }
      if (prev[g] >= 0) deps.push_back(prev[g]);
      const double per = back ? st_[s].backward_seconds : st_[s].forward_seconds;
      const int c = Compute(g, count[g] * per + (count[g] > 0 ? st_[s].overhead_seconds : 0),
                            deps, s, -1, back, absl::StrCat(back ? "B" : "F", " s", s));
      prev[g] = c;
      std::vector<int> rel = {c};
      if (back) {
        int src = c;
        int64_t g_bytes = st_[s].gradient_bytes;
        if (nvlink_all) {
          src = Add(Xfer(TaskKind::kGradientOffload, Direction::kP2P, g, g_bytes - g_bytes / n_,
                         {m_.gpus[g].nvlink_out}, {c}, s, -1, true, "reduce-scatter"),
                    kClassBulk);
          g_bytes /= n_;
        }
        std::vector<int> gr = Bulk(TaskKind::kGradientOffload, Direction::kD2H, g, g_bytes,
                                   m_.gpus[g].d2h_path, {src}, s, true, absl::StrCat("grads s", s));
        rel.insert(rel.end(), gr.begin(), gr.end());
        grads_of_stage.insert(grads_of_stage.end(), gr.begin(), gr.end());
      }
      releases[g].push_back(rel);
    }
    if (back) {
      all_grads.insert(all_grads.end(), grads_of_stage.begin(), grads_of_stage.end());
      if (!c_.zero_optimizer_barrier) Optimizer(s, st_[s].optimizer_seconds, grads_of_stage);
    }
  };
  for (int s = 0; s < s_; ++s) pass(s, false);
  for (int s = s_ - 1; s >= 0; --s) pass(s, true);
  if (c_.zero_optimizer_barrier) {
    for (int s = s_ - 1; s >= 0; --s) Optimizer(s, st_[s].optimizer_seconds, all_grads);
  }
  return std::move(g_);
}

}  // namespace

std::vector<SimStage> MakeSimStages(const PartitionProblem& problem, const Partition& partition) {
  return StagesOf(problem, partition.stages);
}

std::vector<SimStage> MakeUnitSimStages(const PartitionProblem& problem) {
  std::vector<StageRange> r;
  for (int u = 0; u < problem.num_units(); ++u) r.push_back({u, u + 1});
  return StagesOf(problem, r);
}

std::vector<SimStage> MakeZeroSimStages(const PartitionProblem& problem,
                                        int64_t gradient_bytes_per_parameter) {
  std::vector<SimStage> stages = MakeUnitSimStages(problem);
  for (SimStage& st : stages) {
    st.gradient_bytes = st.gradient_bytes / std::max<int64_t>(gradient_bytes_per_parameter, 1) * 2;
  }
  return stages;
}

absl::StatusOr<TaskGraph> BuildTaskGraph(const SimMachine& machine,
                                         const std::vector<SimStage>& stages,
                                         const SimConfig& config) {
  if (stages.empty()) return absl::InvalidArgumentError("no stages to simulate");
  if (config.num_microbatches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_microbatches must be >= 1 (got ", config.num_microbatches, ")"));
  }
  if (machine.num_gpus() < 1) return absl::InvalidArgumentError("the machine has no GPU");
  std::vector<int> order;
  if (config.gpu_order.empty()) {
    for (int i = 0; i < machine.num_gpus(); ++i) order.push_back(i);
  } else {
    for (int g : config.gpu_order) {
      const int pos = machine.PositionOf(g);
      if (pos < 0) return absl::InvalidArgumentError(absl::StrCat("GPU ", g, " not in the machine"));
      order.push_back(pos);
    }
  }
  if (config.schedule != Schedule::kRoundRobin) {
    Builder b(machine, stages, config, std::move(order));
    return config.schedule == Schedule::kZeroOffload ? b.Zero() : b.Pipeline();
  }
  // Hand-built stages without unit ranges: one unit each (only meaningful without a separate
  // backward partition).
  std::vector<SimStage> forward = stages;
  bool unnamed = true;
  for (const SimStage& s : forward) unnamed = unnamed && s.unit_end == 0;
  if (unnamed) {
    for (size_t s = 0; s < forward.size(); ++s) {
      forward[s].unit_begin = static_cast<int>(s);
      forward[s].unit_end = static_cast<int>(s) + 1;
    }
  }
  const std::vector<SimStage>& backward =
      config.backward_stages.empty() ? forward : config.backward_stages;
  auto covered = [](const std::vector<SimStage>& v) {
    int next = 0;
    for (const SimStage& s : v) {
      if (s.unit_begin != next || s.unit_end <= s.unit_begin) return -1;
      next = s.unit_end;
    }
    return next;
  };
  const int units = covered(forward);
  if (units < 0 || covered(backward) != units) {
    return absl::InvalidArgumentError(
        "roundrobin: forward and backward stages must each cover the same units contiguously");
  }
  Builder b(machine, forward, config, std::move(order));
  return b.RoundRobin(backward);
}

}  // namespace mobius::planner::sim
