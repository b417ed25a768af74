// The stage-bound schedules: mobius (stages swapped through two weight slots per GPU, several
// steps with the optimizer's staleness) and resident (weights stay, GPipe or 1F1B order).
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "host/planner/sim/builder.h"

namespace mobius::planner::sim::internal {
namespace {

struct Op {
  bool backward = false;
  int microbatch = 0;
};

// Megatron's non-interleaved 1F1B order for stage s of S with M microbatches: min(S - 1 - s, M)
// warm-up forwards, then one forward and one backward alternately, then the remaining backwards.
std::vector<Op> OneFOneBOrder(int s, int num_stages, int m) {
  const int warm = std::min(num_stages - 1 - s, m);
  std::vector<Op> ops;
  for (int i = 0; i < warm; ++i) ops.push_back({false, i});
  for (int i = 0; i < m - warm; ++i) {
    ops.push_back({false, warm + i});
    ops.push_back({true, i});
  }
  for (int i = m - warm; i < m; ++i) ops.push_back({true, i});
  return ops;
}

// resident + 1F1B, one stage per GPU: each GPU's compute stream gets its stage's ops in 1F1B
// order. Tasks are created stage by stage as far as their inputs exist, which keeps every
// stream's creation order equal to its 1F1B order and every dependency created first.
TaskGraph ResidentOneFOneB(Builder& b, const std::vector<SimStage>& st) {
  const int num_stages = static_cast<int>(st.size());
  auto gpu_of = [&](int s) { return b.order[s % b.n]; };
  std::vector<std::vector<Op>> ops(num_stages);
  for (int s = 0; s < num_stages; ++s) ops[s] = OneFOneBOrder(s, num_stages, b.mb);
  std::vector<std::vector<int>> fwd(num_stages, std::vector<int>(b.mb, -1)), bwd = fwd;
  std::vector<size_t> next(num_stages, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < num_stages; ++s) {
      const int g = gpu_of(s);
      for (; next[s] < ops[s].size(); ++next[s], progress = true) {
        const Op op = ops[s][next[s]];
        const int m = op.microbatch;
        std::vector<int> deps;
        if (!op.backward) {
          if (s > 0 && fwd[s - 1][m] < 0) break;
          if (s > 0) {
            const int p = gpu_of(s - 1);
            deps.push_back(p == g ? fwd[s - 1][m]
                                  : b.Move(TaskKind::kActivation, p, g, st[s].input_bytes,
                                           fwd[s - 1][m], -1, s, m, false,
                                           absl::StrCat("F act s", s - 1, "->", s)));
          }
          fwd[s][m] = b.Compute(g, st[s].forward_seconds + (m == 0 ? st[s].overhead_seconds : 0),
                                deps, s, m, false, absl::StrCat("F s", s, " mb", m));
          continue;
        }
        if (s + 1 < num_stages && bwd[s + 1][m] < 0) break;
        deps.push_back(fwd[s][m]);
        if (s + 1 < num_stages) {
          const int q = gpu_of(s + 1);
          deps.push_back(q == g ? bwd[s + 1][m]
                                : b.Move(TaskKind::kActivation, q, g, st[s + 1].input_bytes,
                                         bwd[s + 1][m], -1, s, m, true,
                                         absl::StrCat("B grad s", s + 1, "->", s)));
        }
        bwd[s][m] = b.Compute(g, st[s].backward_seconds + (m == 0 ? st[s].overhead_seconds : 0),
                              deps, s, m, true, absl::StrCat("B s", s, " mb", m));
      }
    }
  }
  return b.Take();
}

}  // namespace

TaskGraph BuildPipeline(Builder& b, const std::vector<SimStage>& st) {
  const SimConfig& c = b.c;
  const bool resident = c.schedule == Schedule::kResident;
  const int num_stages = static_cast<int>(st.size());
  if (resident && c.one_f_one_b && num_stages <= b.n) return ResidentOneFOneB(b, st);
  const int mb = b.mb;
  auto gpu_of = [&](int s) { return b.order[s % b.n]; };
  std::vector<SlotPair> slots(b.m.num_gpus());
  const int steps = resident ? 1 : std::max(1, c.steps);
  std::vector<std::vector<int>> opt(steps, std::vector<int>(num_stages, -1));

  for (int k = 0; k < steps; ++k) {
    b.set_step(k);
    for (SlotPair& p : slots) p.NewVersion();
    // This step computes with the weights after the update of step `wk` (staleness 1: two back).
    const int wk = k - 1 - c.optimizer_staleness;
    std::vector<std::vector<int>> fwd(num_stages, std::vector<int>(mb, -1)), bwd = fwd, ckpt = fwd;

    // Stage s's weights for a pass on `gpu` (one partition in both passes: the stage index names
    // the units); no upload when a slot still holds them (a GPU's last two forward stages, in
    // backward). Returns the upload's chunks and sets `slot` (Task::slot).
    auto upload = [&](int gpu, int stage, bool back, int& slot) -> std::vector<int> {
      if (resident) return {};
      SlotPair::Use use = slots[gpu].Take({stage, stage + 1});
      slot = use.occupancy;
      if (!use.load) return {};
      if (wk >= 0 && opt[wk][stage] >= 0) use.after.push_back(opt[wk][stage]);
      return b.Bulk(TaskKind::kWeightUpload, Direction::kH2D, gpu, st[stage].weight_bytes,
                    b.m.gpus[gpu].h2d_path, use.after, stage, back,
                    absl::StrCat(back ? "B" : "F", " weights s", stage));
    };

    for (int s = 0; s < num_stages; ++s) {  // forward
      const int g = gpu_of(s);
      int slot = -1;
      std::vector<int> w = upload(g, s, false, slot);
      for (int m = 0; m < mb; ++m) {
        std::vector<int> deps = w;
        if (s == 0) {
          if (!resident && st[0].input_bytes > 0) {
            deps.push_back(b.Add(b.Xfer(TaskKind::kCheckpoint, Direction::kH2D, g,
                                        st[0].input_bytes, b.m.gpus[g].h2d_path, {}, 0, m, false,
                                        "input h2d"),
                                 kClassActivation));
          }
        } else {
          const int p = gpu_of(s - 1);
          if (resident && p == g) {
            deps.push_back(fwd[s - 1][m]);
          } else {
            deps.push_back(b.Move(TaskKind::kActivation, p, g, st[s].input_bytes, fwd[s - 1][m],
                                  resident ? -1 : ckpt[s - 1][m], s, m, false,
                                  absl::StrCat("F act s", s - 1, "->", s)));
          }
        }
        fwd[s][m] = b.Compute(g, st[s].forward_seconds + (m == 0 ? st[s].overhead_seconds : 0),
                              deps, s, m, false, absl::StrCat("F s", s, " mb", m));
        if (!resident && s + 1 < num_stages && st[s + 1].input_bytes > 0) {
          ckpt[s][m] = b.Add(b.Xfer(TaskKind::kCheckpoint, Direction::kD2H, g,
                                    st[s + 1].input_bytes, b.m.gpus[g].d2h_path, {fwd[s][m]}, s,
                                    m, false, absl::StrCat("F ckpt s", s, " mb", m)),
                             kClassActivation);
        }
      }
      b.Hold(slot, w);
      b.Hold(slot, fwd[s]);
      if (!resident) slots[g].Release({fwd[s][mb - 1]});
    }
    std::vector<int> all_grads;
    for (int s = num_stages - 1; s >= 0; --s) {  // backward
      const int g = gpu_of(s);
      int slot = -1;
      std::vector<int> w = upload(g, s, true, slot);
      for (int m = 0; m < mb; ++m) {
        std::vector<int> deps = w;
        deps.push_back(fwd[s][m]);  // the forward happened (resident: its input is still here)
        if (!resident && st[s].input_bytes > 0) {
          std::vector<int> src = s > 0 && ckpt[s - 1][m] >= 0 ? std::vector<int>{ckpt[s - 1][m]}
                                                              : std::vector<int>{};
          deps.push_back(b.Add(b.Xfer(TaskKind::kCheckpoint, Direction::kH2D, g,
                                      st[s].input_bytes, b.m.gpus[g].h2d_path, src, s, m, true,
                                      absl::StrCat("B ckpt s", s, " mb", m)),
                               kClassActivation));
        }
        if (s + 1 < num_stages) {
          const int q = gpu_of(s + 1);
          if (resident && q == g) {
            deps.push_back(bwd[s + 1][m]);
          } else {
            deps.push_back(b.Move(TaskKind::kActivation, q, g, st[s + 1].input_bytes,
                                  bwd[s + 1][m], -1, s, m, true,
                                  absl::StrCat("B grad s", s + 1, "->", s)));
          }
        }
        bwd[s][m] = b.Compute(g, st[s].backward_seconds + (m == 0 ? st[s].overhead_seconds : 0),
                              deps, s, m, true, absl::StrCat("B s", s, " mb", m));
      }
      if (resident) continue;
      // One host gradient buffer per stage: this step's gradients land after the last step's
      // update of the stage has read the buffer.
      std::vector<int> after = {bwd[s][mb - 1]};
      if (k >= 1 && opt[k - 1][s] >= 0) after.push_back(opt[k - 1][s]);
      std::vector<int> gr = b.Bulk(TaskKind::kGradientOffload, Direction::kD2H, g,
                                   st[s].gradient_bytes, b.m.gpus[g].d2h_path, after, s, true,
                                   absl::StrCat("grads s", s));
      std::vector<int> rel = {bwd[s][mb - 1]};
      rel.insert(rel.end(), gr.begin(), gr.end());
      // Several nodes: the optimizer waits for the stage's all-reduce instead.
      const std::vector<int> ready = b.AllReduce(s, st[s].gradient_bytes, gr);
      all_grads.insert(all_grads.end(), ready.begin(), ready.end());
      if (!c.paper_barrier) opt[k][s] = b.Optimizer(s, st[s], ready);
      b.Hold(slot, w);
      b.Hold(slot, bwd[s]);
      b.Hold(slot, gr);
      slots[g].Release(rel);
    }
    if (!resident && c.paper_barrier) {
      for (int s = num_stages - 1; s >= 0; --s) opt[k][s] = b.Optimizer(s, st[s], all_grads);
    }
  }
  return b.Take();
}

}  // namespace mobius::planner::sim::internal
