// The round-robin (RoundPipe) schedule: forward and backward stage passes as one stream over the
// GPUs, several steps with the optimizer's staleness, static or pool dispatch.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "host/planner/sim/builder.h"

namespace mobius::planner::sim::internal {

TaskGraph BuildRoundRobin(Builder& b, const std::vector<SimStage>& st,
                          const std::vector<SimStage>& bst, const std::vector<int>& pass_positions) {
  const SimConfig& c = b.c;
  const int sf = static_cast<int>(st.size()), sb = static_cast<int>(bst.size());
  const int passes = sf + sb;  // per step
  const int mb = b.mb;
  // Global pass index over the steps: the stream (and the round-robin counter) continues.
  auto gpu_of_pass = [&](int j) {
    return pass_positions.empty() ? b.order[j % b.n] : pass_positions[j];
  };
  std::vector<SlotPair> slots(b.m.num_gpus());
  // A pass's weights, unless a slot of its GPU still holds its unit range (the runtime keys slots
  // by range, so a backward pass may run from a forward pass's slot). Sets `slot` (Task::slot).
  auto upload = [&](int gpu, const SimStage& s, int stage, bool back, std::vector<int> after,
                    int& slot) {
    SlotPair::Use use = slots[gpu].Take({s.unit_begin, s.unit_end});
    slot = use.occupancy;
    if (!use.load) return std::vector<int>{};
    use.after.insert(use.after.end(), after.begin(), after.end());
    return b.Bulk(TaskKind::kWeightUpload, Direction::kH2D, gpu, s.weight_bytes,
                  b.m.gpus[gpu].h2d_path, use.after, stage, back,
                  absl::StrCat(back ? "B" : "F", " weights s", stage));
  };
  // Units where a checkpoint is needed: the input of every backward stage but the first (and of
  // every forward stage, which the next forward stage receives through it).
  int num_units = 0;
  for (const SimStage& s : st) num_units = std::max(num_units, s.unit_end);
  std::vector<int64_t> ckpt_bytes_at(num_units + 1, 0);  // by unit; 0 = no checkpoint there
  for (int s = 1; s < sf; ++s) ckpt_bytes_at[st[s].unit_begin] = st[s].input_bytes;
  for (int k = 1; k < sb; ++k) ckpt_bytes_at[bst[k].unit_begin] = bst[k].input_bytes;
  std::vector<int> fstage_of_unit(num_units, 0), bstage_of_unit(num_units, 0);
  for (int s = 0; s < sf; ++s) {
    for (int u = st[s].unit_begin; u < st[s].unit_end; ++u) fstage_of_unit[u] = s;
  }
  for (int k = 0; k < sb; ++k) {
    for (int u = bst[k].unit_begin; u < bst[k].unit_end; ++u) bstage_of_unit[u] = k;
  }
  const int steps = std::max(1, c.steps);
  std::vector<std::vector<int>> opt(steps, std::vector<int>(sb, -1));  // per backward stage

  for (int step = 0; step < steps; ++step) {
    b.set_step(step);
    for (SlotPair& p : slots) p.NewVersion();
    const int wk = step - 1 - c.optimizer_staleness;  // the update this step computes with
    // The optimizer steps of update wk covering units [begin, end).
    auto updated = [&](int begin, int end) {
      std::vector<int> ids;
      if (wk < 0) return ids;
      for (int k = bstage_of_unit[begin]; k <= bstage_of_unit[end - 1]; ++k) {
        if (opt[wk][k] >= 0) ids.push_back(opt[wk][k]);
      }
      return ids;
    };
    // [unit][mb]: the D2H task that put the unit's input in host memory.
    std::vector<std::vector<int>> ckpt(num_units + 1, std::vector<int>(mb, -1));
    std::vector<std::vector<int>> fwd(sf, std::vector<int>(mb, -1));
    const int first = step * passes;

    for (int s = 0; s < sf; ++s) {  // forward passes 0..S_F-1
      const SimStage& cur = st[s];
      const int g = gpu_of_pass(first + s);
      int slot = -1;
      std::vector<int> w =
          upload(g, cur, s, false, updated(cur.unit_begin, cur.unit_end), slot);
      for (int m = 0; m < mb; ++m) {
        std::vector<int> deps = w;
        if (s > 0) {
          deps.push_back(b.Move(TaskKind::kActivation, gpu_of_pass(first + s - 1), g,
                                cur.input_bytes, fwd[s - 1][m], ckpt[cur.unit_begin][m], s, m,
                                false, absl::StrCat("F act s", s - 1, "->", s)));
        }
        fwd[s][m] = b.Compute(g, cur.forward_seconds + (m == 0 ? cur.overhead_seconds : 0), deps,
                              s, m, false, absl::StrCat("F s", s, " mb", m));
        for (int u = cur.unit_begin + 1; u <= cur.unit_end && u < num_units; ++u) {
          if (ckpt_bytes_at[u] <= 0) continue;
          ckpt[u][m] = b.Add(b.Xfer(TaskKind::kCheckpoint, Direction::kD2H, g, ckpt_bytes_at[u],
                                    b.m.gpus[g].d2h_path, {fwd[s][m]}, s, m, false,
                                    absl::StrCat("F ckpt u", u, " mb", m)),
                             kClassActivation);
        }
      }
      b.Hold(slot, w);
      b.Hold(slot, fwd[s]);
      slots[g].Release({fwd[s][mb - 1]});
    }
    std::vector<std::vector<int>> bwd(sb, std::vector<int>(mb, -1));
    std::vector<int> all_grads;
    for (int k = sb - 1; k >= 0; --k) {  // backward passes S_F..S_F+S_B-1
      const SimStage& cur = bst[k];
      const int j = first + sf + (sb - 1 - k);
      const int g = gpu_of_pass(j);
      int slot = -1;
      std::vector<int> w =
          upload(g, cur, k, true, wk >= 0 && opt[wk][k] >= 0 ? std::vector<int>{opt[wk][k]}
                                                                : std::vector<int>{},
                 slot);
      for (int m = 0; m < mb; ++m) {
        std::vector<int> deps = w;
        deps.push_back(fwd[fstage_of_unit[cur.unit_end - 1]][m]);  // its forward happened
        if (cur.input_bytes > 0) {
          std::vector<int> src = ckpt[cur.unit_begin][m] >= 0
                                     ? std::vector<int>{ckpt[cur.unit_begin][m]}
                                     : std::vector<int>{};
          deps.push_back(b.Add(b.Xfer(TaskKind::kCheckpoint, Direction::kH2D, g, cur.input_bytes,
                                      b.m.gpus[g].h2d_path, src, k, m, true,
                                      absl::StrCat("B ckpt s", k, " mb", m)),
                               kClassActivation));
        }
        if (k + 1 < sb) {
          deps.push_back(b.Move(TaskKind::kActivation, gpu_of_pass(j - 1), g,
                                bst[k + 1].input_bytes, bwd[k + 1][m], -1, k, m, true,
                                absl::StrCat("B grad s", k + 1, "->", k)));
        }
        bwd[k][m] = b.Compute(g, cur.backward_seconds + (m == 0 ? cur.overhead_seconds : 0), deps,
                              k, m, true, absl::StrCat("B s", k, " mb", m));
      }
      // One host gradient buffer per stage (see the mobius schedule).
      std::vector<int> after = {bwd[k][mb - 1]};
      if (step >= 1 && opt[step - 1][k] >= 0) after.push_back(opt[step - 1][k]);
      std::vector<int> gr =
          b.Bulk(TaskKind::kGradientOffload, Direction::kD2H, g, cur.gradient_bytes,
                 b.m.gpus[g].d2h_path, after, k, true, absl::StrCat("grads s", k));
      std::vector<int> rel = {bwd[k][mb - 1]};
      rel.insert(rel.end(), gr.begin(), gr.end());
      // Several nodes: the optimizer waits for the stage's all-reduce instead.
      const std::vector<int> ready = b.AllReduce(k, cur.gradient_bytes, gr);
      all_grads.insert(all_grads.end(), ready.begin(), ready.end());
      if (!c.paper_barrier) opt[step][k] = b.Optimizer(k, cur, ready);
      b.Hold(slot, w);
      b.Hold(slot, bwd[k]);
      b.Hold(slot, gr);
      slots[g].Release(rel);
    }
    if (c.paper_barrier) {
      for (int k = sb - 1; k >= 0; --k) opt[step][k] = b.Optimizer(k, bst[k], all_grads);
    }
  }
  return b.Take();
}

}  // namespace mobius::planner::sim::internal
