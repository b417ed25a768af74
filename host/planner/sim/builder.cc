#include "host/planner/sim/builder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mobius::planner::sim::internal {

SlotPair::Use SlotPair::Take(std::pair<int, int> range) {
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

Builder::Builder(const SimMachine& machine, const SimConfig& config, std::vector<int> gpu_order)
    : m(machine), c(config), order(std::move(gpu_order)), n(static_cast<int>(order.size())),
      mb(config.num_microbatches) {
  for (int i = 0; i < m.num_gpus(); ++i) {
    const int t = m.gpus[i].topology_gpu;
    g_.AddStream({absl::StrCat("gpu", t, ".compute"), StreamKind::kCompute, i, true, 1});
    g_.AddStream({absl::StrCat("gpu", t, ".h2d"), StreamKind::kH2D, i, false, 1});
    g_.AddStream({absl::StrCat("gpu", t, ".d2h"), StreamKind::kD2H, i, false, 1});
  }
  cpu_ = g_.AddStream({"cpu.optimizer", StreamKind::kCpu, -1, false, m.cpu_optimizer_threads});
  // One all-reduce at a time, the ready one created first (list-scheduled: a stage whose
  // gradients land early does not wait behind one created earlier but not ready).
  if (c.internode.enabled()) {
    net_ = g_.AddStream({"net.allreduce", StreamKind::kNetwork, -1, false, 1});
  }
}

int Builder::Add(Task t, int64_t cls) {
  t.priority = cls + static_cast<int64_t>(g_.tasks.size());
  t.step = step_;
  return g_.Add(std::move(t));
}

Task Builder::Xfer(TaskKind kind, Direction dir, int gpu, int64_t bytes, std::vector<int> path,
                   std::vector<int> deps, int stage, int microbatch, bool bwd,
                   std::string label) const {
  Task t;
  t.kind = kind;
  t.direction = dir;
  t.stream = dir == Direction::kH2D ? H2D(gpu) : D2H(gpu);
  t.bytes = bytes;
  t.path = std::move(path);
  t.deps = std::move(deps);
  t.gpu = gpu;
  t.stage = stage;
  t.microbatch = microbatch;
  t.backward = bwd;
  t.label = std::move(label);
  return t;
}

std::vector<int> Builder::Bulk(TaskKind kind, Direction dir, int gpu, int64_t bytes,
                               const std::vector<int>& path, const std::vector<int>& deps,
                               int stage, bool bwd, const std::string& label) {
  std::vector<int> ids;
  const int64_t chunk = c.chunk_bytes > 0 ? c.chunk_bytes : std::max<int64_t>(bytes, 1);
  int64_t left = bytes;
  do {
    const int64_t b = std::min(left, chunk);
    ids.push_back(Add(Xfer(kind, dir, gpu, b, path, deps, stage, -1, bwd, label), kClassBulk));
    left -= b;
  } while (left > 0);
  return ids;
}

int Builder::Move(TaskKind kind, int a, int b, int64_t bytes, int src_task, int host_copy,
                  int stage, int microbatch, bool bwd, const std::string& what) {
  if (bytes <= 0) return src_task;
  if (a != b && m.p2p[a][b]) {
    return Add(Xfer(kind, Direction::kP2P, a, bytes, m.P2pPath(a, b), {src_task}, stage,
                    microbatch, bwd, what + " p2p"),
               kClassActivation);
  }
  if (host_copy < 0) {
    host_copy = Add(Xfer(kind, Direction::kD2H, a, bytes, m.gpus[a].d2h_path, {src_task}, stage,
                         microbatch, bwd, what + " d2h"),
                    kClassActivation);
  }
  return Add(Xfer(kind, Direction::kH2D, b, bytes, m.gpus[b].h2d_path, {host_copy}, stage,
                  microbatch, bwd, what + " h2d"),
             kClassActivation);
}

int Builder::Compute(int gpu, double seconds, std::vector<int> deps, int stage, int microbatch,
                     bool bwd, std::string label) {
  Task t;
  t.kind = TaskKind::kCompute;
  t.stream = Comp(gpu);
  t.seconds = seconds;
  t.deps = std::move(deps);
  t.gpu = gpu;
  t.stage = stage;
  t.microbatch = microbatch;
  t.backward = bwd;
  t.label = std::move(label);
  return Add(std::move(t), 0);
}

int Builder::Optimizer(int stage, const SimStage& st, std::vector<int> deps) {
  Task t;
  t.kind = TaskKind::kOptimizer;
  t.stream = cpu_;
  t.seconds = st.optimizer_seconds;
  t.deps = std::move(deps);
  t.stage = stage;
  t.backward = true;
  t.label = absl::StrCat("adam s", stage);
  if (m.optimizer_bytes_per_s > 0 && st.parameters > 0) {
    const double bytes = static_cast<double>(st.parameters) * m.optimizer_bytes_per_param;
    if (m.host_memory_link >= 0) {
      t.seconds = 0;
      t.bytes = static_cast<int64_t>(bytes);
      t.path = {m.host_memory_link};
      t.max_bytes_per_s = m.optimizer_bytes_per_s;
    } else {
      t.seconds = bytes / m.optimizer_bytes_per_s;
    }
  }
  return Add(std::move(t), 0);
}

std::vector<int> Builder::AllReduce(int stage, int64_t bytes, const std::vector<int>& offload) {
  const std::vector<int64_t> buckets = AllReduceBuckets(bytes, c.internode.bucket_bytes);
  if (!c.internode.enabled() || buckets.empty()) return offload;
  // Offload chunk j holds bytes [j x chunk, (j + 1) x chunk) of the stage's gradients.
  const int64_t chunk = c.chunk_bytes > 0 ? c.chunk_bytes : std::max<int64_t>(bytes, 1);
  const int last_chunk = static_cast<int>(offload.size()) - 1;
  std::vector<int> ids;
  int64_t begin = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    const int64_t end = begin + buckets[i];
    Task t;
    t.kind = TaskKind::kAllReduce;
    t.stream = net_;
    t.seconds = RingAllReduceSeconds(buckets[i], c.internode.nodes, c.internode.link);
    t.bytes = buckets[i];
    for (int64_t j = begin / chunk; j <= (end - 1) / chunk; ++j) {
      t.deps.push_back(offload[std::min<int64_t>(j, last_chunk)]);
    }
    t.stage = stage;
    t.backward = true;
    t.label = buckets.size() > 1 ? absl::StrCat("allreduce s", stage, " b", i)
                                 : absl::StrCat("allreduce s", stage);
    ids.push_back(Add(std::move(t), kClassBulk));
    begin = end;
  }
  return ids;
}

void Builder::Hold(int slot, const std::vector<int>& ids) {
  for (int id : ids) g_.tasks[id].slot = slot;
}

}  // namespace mobius::planner::sim::internal
