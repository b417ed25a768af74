// The discrete-event engine of the pipeline simulator: runs a task graph (compute kernels, copies,
// CPU optimizer steps with their dependencies) on streams and shared links.
//
// Streams: a GPU's compute stream (FIFO, in task-creation order, like a CUDA stream), its H2D and
// D2H copy engines and the host CPU optimizer (list-scheduled: when free they start the ready task
// of the lowest `priority`, so activations can overtake queued weight prefetches). A stream runs
// `capacity` tasks at once (1 for GPU streams, the optimizer thread count for the CPU).
//
// Links: one direction of a PCIe (or NVLink) link, or the host's DRAM (both directions and the CPU
// optimizer together: no reverse), with a capacity in bytes/s. A transfer crosses the links of
// its `path`; the rates are the max-min fair allocation (progressive filling: all transfers'
// rates rise together; a transfer stops rising when a link it crosses is full or it reaches its
// own `max_bytes_per_s`; the others share what is left), recomputed at every event. When both
// directions of a physical link are busy, each direction's capacity is multiplied by the
// full-duplex factor (1 = ideal full duplex; 0.54 on PCIe Gen4 RTX 4090 hosts, design/mobius.md
// section 3). A CPU optimizer step can be a "transfer" too: its bytes are the DRAM traffic of the
// update, over the DRAM link, capped by its threads' rate (sim/machine.h).
//
// Deadlock-free when every task's dependencies were created before it (the schedules do so): FIFO
// edges then follow creation order and list-scheduled streams take any ready task.
//
// Pure; thread-compatible.
#ifndef MOBIUS_HOST_PLANNER_SIM_ENGINE_H_
#define MOBIUS_HOST_PLANNER_SIM_ENGINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mobius::planner::sim {

struct SimLink {
  std::string name;         // "gpu3.h2d", "uplink0.d2h", "gpu1.nvlink_in"
  double bytes_per_s = 0;   // capacity, one direction
  int reverse = -1;         // the other direction of the same physical link, -1 if none
};

// kNetwork: the node's inter-node link (SimConfig::internode), one all-reduce at a time.
enum class StreamKind { kCompute, kH2D, kD2H, kCpu, kNetwork };

struct Stream {
  std::string name;
  StreamKind kind = StreamKind::kCompute;
  int gpu = -1;  // machine GPU position; -1 for the CPU
  bool fifo = true;
  int capacity = 1;
};

enum class TaskKind {
  kCompute,          // forward or backward of one microbatch (or all of a GPU's, ZeRO model)
  kWeightUpload,     // bf16 weights (or a chunk), host -> GPU
  kActivation,       // boundary activation or its gradient between stages
  kCheckpoint,       // stage-boundary activation to/from host memory for the backward
  kGradientOffload,  // bf16 gradients (or a chunk) GPU -> host
  kOptimizer,        // CPU Adam for a stage (fixed seconds, or DRAM bytes at a capped rate)
  kCollective,       // one GPU's share of a collective through host memory (ZeRO gathers)
  kAllReduce,        // a bucket of a stage's gradients all-reduced across nodes (fixed seconds:
                     // the ring formula, sim/internode.h; `bytes` = the bucket, no path)
};
const char* TaskKindName(TaskKind kind);

enum class Direction { kNone, kH2D, kD2H, kP2P };

struct Task {
  TaskKind kind = TaskKind::kCompute;
  int stream = 0;
  double seconds = 0;     // compute / optimizer tasks
  int64_t bytes = 0;      // transfers (path non-empty)
  Direction direction = Direction::kNone;
  std::vector<int> path;  // link ids
  std::vector<int> deps;  // task ids, all < this task's id
  int64_t priority = 0;   // list-scheduled streams: lower first
  double max_bytes_per_s = 0;  // transfers: > 0 caps this task's own rate (CPU optimizer threads)
  int gpu = -1, stage = -1, microbatch = -1;
  bool backward = false;
  int step = 0;  // which of the simulated steps it belongs to (SimConfig::steps)
  // mobius / roundrobin: which load of a weight slot on `gpu` (numbered per GPU in load order) a
  // weight upload, compute or gradient offload belongs to; a pass that reuses a loaded slot
  // (schedules.h) shares its number. -1: none (other tasks; the resident and zero schedules).
  int slot = -1;
  std::string label;

  bool is_transfer() const { return !path.empty(); }
};

struct TaskGraph {
  std::vector<Stream> streams;
  std::vector<Task> tasks;

  int AddStream(Stream s) {
    streams.push_back(std::move(s));
    return static_cast<int>(streams.size()) - 1;
  }
  int Add(Task t) {
    tasks.push_back(std::move(t));
    return static_cast<int>(tasks.size()) - 1;
  }
};

struct TaskTiming {
  double start = 0;
  double end = 0;
};

struct LinkUsage {
  int64_t bytes = 0;        // sum of the bytes of the transfers that crossed it
  double busy_seconds = 0;  // time with at least one transfer on it
};

struct EngineResult {
  std::vector<TaskTiming> timings;  // per task
  std::vector<LinkUsage> links;     // per link
  double makespan = 0;
  int64_t events = 0;
};

// INVALID_ARGUMENT for a dependency on a later or unknown task, an unknown stream or link, or a
// transfer over a link without capacity; INTERNAL if the graph cannot finish (a cycle through
// FIFO order).
absl::StatusOr<EngineResult> RunEngine(const TaskGraph& graph, const std::vector<SimLink>& links,
                                       double duplex_factor);

}  // namespace mobius::planner::sim

#endif  // MOBIUS_HOST_PLANNER_SIM_ENGINE_H_
