// Internal to mobius::planner_sim: the task-graph builder the schedules share (schedules.h says
// what each schedule does). One Builder builds one graph; the schedule functions below add their
// tasks through it. Not thread-safe (one builder per graph).
#ifndef MOBIUS_HOST_PLANNER_SIM_BUILDER_H_
#define MOBIUS_HOST_PLANNER_SIM_BUILDER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "host/planner/sim/engine.h"
#include "host/planner/sim/machine.h"
#include "host/planner/sim/schedules.h"

namespace mobius::planner::sim::internal {

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
  Use Take(std::pair<int, int> range);
  // The tasks that end the pass just taken (its last compute; backward: its gradient offload).
  void Release(std::vector<int> tasks) { slot_[mru_].release = std::move(tasks); }
  // New weights (a new step): no slot holds a usable range any more; releases stay.
  void NewVersion() {
    for (Entry& e : slot_) e.range = {-1, -1};
  }

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

// List-scheduling classes of the copy engines: activations before bulk weights and gradients.
inline constexpr int64_t kClassActivation = 0;
inline constexpr int64_t kClassBulk = int64_t{1} << 40;

class Builder {
 public:
  // `order`: machine positions, Mapping::gpu_order resolved.
  Builder(const SimMachine& m, const SimConfig& c, std::vector<int> order);

  const SimMachine& m;
  const SimConfig& c;
  const std::vector<int> order;
  const int n;   // GPUs of the order
  const int mb;  // microbatches per step

  // Tasks added from now on belong to step `k` (Task::step).
  void set_step(int k) { step_ = k; }

  int Comp(int gpu) const { return 3 * gpu; }
  int H2D(int gpu) const { return 3 * gpu + 1; }
  int D2H(int gpu) const { return 3 * gpu + 2; }

  int Add(Task t, int64_t cls);
  Task Xfer(TaskKind kind, Direction dir, int gpu, int64_t bytes, std::vector<int> path,
            std::vector<int> deps, int stage, int mb, bool bwd, std::string label) const;
  // Bulk copy (weights or gradients) in chunks of SimConfig::chunk_bytes; returns the chunk ids.
  std::vector<int> Bulk(TaskKind kind, Direction dir, int gpu, int64_t bytes,
                        const std::vector<int>& path, const std::vector<int>& deps, int stage,
                        bool bwd, const std::string& label);
  // Moves `bytes` produced by task `src_task` on GPU a to GPU b; returns the task b waits for.
  // Host-staged unless P2P; `host_copy` is an existing D2H copy of the data on a (or -1).
  int Move(TaskKind kind, int a, int b, int64_t bytes, int src_task, int host_copy, int stage,
           int mb, bool bwd, const std::string& what);
  int Compute(int gpu, double seconds, std::vector<int> deps, int stage, int mb, bool bwd,
              std::string label);
  // The CPU optimizer step of `st` (SimMachine: fixed seconds, or its DRAM traffic at a capped
  // rate over host.memory).
  int Optimizer(int stage, const SimStage& st, std::vector<int> deps);
  // The all-reduce of stage `stage`'s gradients (`bytes`) across nodes (SimConfig::internode): one
  // task per bucket on the inter-node stream, each after the chunks of `offload` (the stage's
  // gradient offload, chunks of SimConfig::chunk_bytes in order) that hold its bytes. Returns what
  // the stage's optimizer waits for: the buckets, or `offload` itself on one node or without bytes.
  std::vector<int> AllReduce(int stage, int64_t bytes, const std::vector<int>& offload);
  // Marks the tasks as held in weight slot occupancy `slot` (Task::slot).
  void Hold(int slot, const std::vector<int>& ids);
  int AddStream(Stream s) { return g_.AddStream(std::move(s)); }

  TaskGraph Take() { return std::move(g_); }

 private:
  TaskGraph g_;
  int cpu_ = 0;
  int net_ = -1;  // the inter-node stream (only with SimConfig::internode enabled)
  int step_ = 0;
};

// The schedules (schedules.h). `stages` are validated by BuildTaskGraph.
TaskGraph BuildPipeline(Builder& b, const std::vector<SimStage>& stages);  // mobius, resident
// pass_positions: the machine position of every pass of every step in stream order (pool
// dispatch); empty: pass j on order[j mod n].
TaskGraph BuildRoundRobin(Builder& b, const std::vector<SimStage>& forward,
                          const std::vector<SimStage>& backward,
                          const std::vector<int>& pass_positions);
TaskGraph BuildZero(Builder& b, const std::vector<SimStage>& stages);

}  // namespace mobius::planner::sim::internal

#endif  // MOBIUS_HOST_PLANNER_SIM_BUILDER_H_
