// The ZeRO-3-offload schedule (data parallel, parameters and optimizer state in host memory):
// the reference model and the ZeRO-Infinity model of SimConfig::zero (schedules.h).
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "host/planner/sim/builder.h"

namespace mobius::planner::sim::internal {
namespace {

class ZeroBuilder {
 public:
  explicit ZeroBuilder(Builder& b)
      : b_(b), z_(b.c.zero), n_(b.m.num_gpus()), releases_(n_), prev_(n_, -1) {
    nvlink_all_ = n_ > 1;
    for (int a = 0; a < n_; ++a) {
      for (int c = 0; c < n_; ++c) {
        if (a != c && (!b.m.p2p[a][c] || b.m.gpus[a].nvlink_in < 0)) nvlink_all_ = false;
      }
    }
    ring_ = z_.host_staged_collectives && !nvlink_all_ && n_ > 1;
    if (ring_) {
      for (int g = 0; g < n_; ++g) {
        const int t = b.m.gpus[g].topology_gpu;
        ring_in_.push_back(b.AddStream({absl::StrCat("gpu", t, ".ring_in"), StreamKind::kH2D, g,
                                        true, 1}));
        ring_out_.push_back(b.AddStream({absl::StrCat("gpu", t, ".ring_out"), StreamKind::kD2H,
                                         g, true, 1}));
      }
    }
  }

  TaskGraph Build(const std::vector<SimStage>& st);

 private:
  // One GPU's share of a ring collective through host memory: the bytes it receives (H2D) or
  // sends (D2H), (N-1)/N of the tensor, on its ring stream (NCCL runs collectives in order).
  int Ring(bool in, int g, int64_t bytes, std::vector<int> deps, int stage, bool back,
           const char* what) {
    Task t = b_.Xfer(TaskKind::kCollective, in ? Direction::kH2D : Direction::kD2H, g, bytes,
                     in ? b_.m.gpus[g].h2d_path : b_.m.gpus[g].d2h_path, std::move(deps), stage,
                     -1, back, absl::StrCat(what, in ? " in s" : " out s", stage));
    t.stream = in ? ring_in_[g] : ring_out_[g];
    return b_.Add(std::move(t), kClassBulk);
  }

  // Gathers stage s's parameters on every GPU; returns per GPU the tasks its compute waits for.
  // Each gather takes a parameter buffer; a GPU has two (the one computing, the one prefetching).
  std::vector<std::vector<int>> Gather(const SimStage& st, int s, bool back);

  Builder& b_;
  const ZeroConfig& z_;
  const int n_;
  bool nvlink_all_ = false;
  bool ring_ = false;
  std::vector<int> ring_in_, ring_out_;
  std::vector<std::vector<std::vector<int>>> releases_;  // per GPU, per buffer use
  std::vector<int> prev_;                                // per GPU, its last compute
};

std::vector<std::vector<int>> ZeroBuilder::Gather(const SimStage& st, int s, bool back) {
  std::vector<std::vector<int>> shard(n_), ready(n_);
  const int64_t w = st.weight_bytes;
  for (int g = 0; g < n_; ++g) {
    std::vector<int> deps;
    if (releases_[g].size() >= 2) deps = releases_[g][releases_[g].size() - 2];
    shard[g] = b_.Bulk(TaskKind::kWeightUpload, Direction::kH2D, g,
                       nvlink_all_ || ring_ ? w / n_ : w, b_.m.gpus[g].h2d_path, deps, s, back,
                       absl::StrCat(back ? "B" : "F", " weights s", s));
  }
  for (int g = 0; g < n_; ++g) {
    if (nvlink_all_) {
      std::vector<int> all;
      for (const auto& v : shard) all.insert(all.end(), v.begin(), v.end());
      ready[g] = {b_.Add(b_.Xfer(TaskKind::kWeightUpload, Direction::kP2P, g, w - w / n_,
                                 {b_.m.gpus[g].nvlink_in}, all, s, -1, back, "allgather"),
                         kClassBulk)};
    } else if (ring_) {
      std::vector<int> all;
      for (const auto& v : shard) all.insert(all.end(), v.begin(), v.end());
      ready[g] = {Ring(true, g, w - w / n_, all, s, back, "allgather"),
                  Ring(false, g, w - w / n_, shard[g], s, back, "allgather")};
    } else {
      ready[g] = shard[g];
    }
  }
  return ready;
}

TaskGraph ZeroBuilder::Build(const std::vector<SimStage>& st) {
  const SimConfig& c = b_.c;
  const int num_stages = static_cast<int>(st.size());
  const int micro_steps = std::max(1, z_.micro_steps);
  std::vector<int> count(n_, 0);  // microbatches per GPU per step: microbatch m on GPU m mod N
  for (int m = 0; m < b_.mb; ++m) ++count[m % n_];
  auto in_micro_step = [&](int g, int u) {
    return count[g] / micro_steps + (u < count[g] % micro_steps ? 1 : 0);
  };
  std::vector<int> all_grads;
  for (int u = 0; u < micro_steps; ++u) {
    const bool last = u + 1 == micro_steps;
    for (int s = 0; s < num_stages; ++s) {  // forward
      const std::vector<std::vector<int>> ready = Gather(st[s], s, false);
      for (int g = 0; g < n_; ++g) {
        std::vector<int> deps = ready[g];
        if (prev_[g] >= 0) deps.push_back(prev_[g]);
        const int k = in_micro_step(g, u);
        prev_[g] = b_.Compute(g, k * st[s].forward_seconds + (k > 0 ? st[s].overhead_seconds : 0),
                              deps, s, -1, false, absl::StrCat("F s", s, " u", u));
        releases_[g].push_back({prev_[g]});
      }
    }
    for (int s = num_stages - 1; s >= 0; --s) {  // backward (recompute included)
      // Three gathers: the recompute's forward gathers its own copy, then the backward another.
      const bool split = z_.gathers >= 3;
      if (split) {
        const std::vector<std::vector<int>> ready = Gather(st[s], s, true);
        for (int g = 0; g < n_; ++g) {
          std::vector<int> deps = ready[g];
          if (prev_[g] >= 0) deps.push_back(prev_[g]);
          prev_[g] = b_.Compute(g, in_micro_step(g, u) * st[s].forward_seconds, deps, s, -1, true,
                                absl::StrCat("R s", s, " u", u));
          releases_[g].push_back({prev_[g]});
        }
      }
      const std::vector<std::vector<int>> ready = Gather(st[s], s, true);
      std::vector<int> computes(n_);
      for (int g = 0; g < n_; ++g) {
        std::vector<int> deps = ready[g];
        if (prev_[g] >= 0) deps.push_back(prev_[g]);
        const int k = in_micro_step(g, u);
        // The backward counts its recompute; split out, the rest. A measured profile's noise (or
        // LoRA's scaling of it) can put a unit's backward under its forward: that rest is then 0.
        const double per =
            std::max(0.0, st[s].backward_seconds - (split ? st[s].forward_seconds : 0.0));
        computes[g] = prev_[g] = b_.Compute(g, k * per + (k > 0 ? st[s].overhead_seconds : 0),
                                            deps, s, -1, true, absl::StrCat("B s", s, " u", u));
      }
      std::vector<int> grads_of_stage;
      const int64_t gb = st[s].gradient_bytes;
      for (int g = 0; g < n_; ++g) {
        std::vector<int> rel = {computes[g]};
        std::vector<int> src = {computes[g]};
        int64_t offload = gb;
        if (nvlink_all_) {
          src = {b_.Add(b_.Xfer(TaskKind::kGradientOffload, Direction::kP2P, g, gb - gb / n_,
                                {b_.m.gpus[g].nvlink_out}, {computes[g]}, s, -1, true,
                                "reduce-scatter"),
                        kClassBulk)};
          offload = gb / n_;
        } else if (ring_) {
          // Every micro-step: reduce-scatter through host memory; the GPU keeps (accumulates)
          // its 1/N of the gradients and offloads it after the last micro-step.
          src = {Ring(true, g, gb - gb / n_, computes, s, true, "reduce-scatter"),
                 Ring(false, g, gb - gb / n_, {computes[g]}, s, true, "reduce-scatter")};
          rel.insert(rel.end(), src.begin(), src.end());
          offload = last ? gb / n_ : 0;
        }
        if (offload > 0) {
          std::vector<int> gr = b_.Bulk(TaskKind::kGradientOffload, Direction::kD2H, g, offload,
                                        b_.m.gpus[g].d2h_path, src, s, true,
                                        absl::StrCat("grads s", s));
          rel.insert(rel.end(), gr.begin(), gr.end());
          grads_of_stage.insert(grads_of_stage.end(), gr.begin(), gr.end());
        }
        releases_[g].push_back(rel);
      }
      if (!last) continue;
      all_grads.insert(all_grads.end(), grads_of_stage.begin(), grads_of_stage.end());
      if (!c.zero_optimizer_barrier) b_.Optimizer(s, st[s], grads_of_stage);
    }
  }
  if (c.zero_optimizer_barrier) {
    for (int s = num_stages - 1; s >= 0; --s) b_.Optimizer(s, st[s], all_grads);
  }
  return b_.Take();
}

}  // namespace

TaskGraph BuildZero(Builder& b, const std::vector<SimStage>& stages) {
  ZeroBuilder z(b);
  return z.Build(stages);
}

}  // namespace mobius::planner::sim::internal
