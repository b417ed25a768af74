// A plan: how one job runs on its GPUs. The planner produces it; the simulator scores it, the
// daemon stores it (and admits the job by its memory estimate), the workers execute it.
//
//   stages       consecutive layer-unit ranges [begin, end), in execution order (forward);
//   mapping      stage s runs on mapping.GpuOfStage(s) = gpu_order[s mod N] (Mobius schedule);
//   predicted    the analytic step time J of cost_model.h (the simulator will refine it);
//   memory       what estimator.h says the plan needs per GPU and on the host.
//
// Value type; thread-compatible.
#ifndef MOBIUS_SERVER_PLANNER_PLAN_H_
#define MOBIUS_SERVER_PLANNER_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "server/planner/cost_model.h"
#include "server/planner/mapping.h"
#include "server/planner/partition.h"
#include "server/planner/profile.h"

namespace mobius::planner {

struct MemoryEstimate {
  // Per entry of Mapping::gpu_order: margin + max unit workspace + 2 x the largest stage slot
  // (weights + gradients + one microbatch's activations) among the stages it runs; 0 if none.
  std::vector<int64_t> gpu_bytes;
  int64_t max_gpu_bytes = 0;
  int64_t gpu_capacity_bytes = 0;  // the smallest GPU of the plan
  // Host: model state (bytes_per_param x parameters, tied tensors once) + activation checkpoints
  // (every stage's input, for all M microbatches, offloaded between forward and backward).
  int64_t host_model_state_bytes = 0;
  int64_t host_activation_bytes = 0;
  int64_t host_bytes = 0;
  // Pinned (page-locked, what DMA touches): bf16 weights + bf16 gradients + activation checkpoints.
  int64_t pinned_bytes = 0;
};

struct Plan {
  MicrobatchShape shape;
  int num_microbatches = 1;         // M per step (global batch = M x microbatch_size)
  std::string partitioner;          // "exact", "uniform" (later "mip")
  std::string mapper;               // "sequential", "cross"
  std::string schedule = "mobius";  // later also "roundrobin", "resident"
  Partition partition;              // stages, per-stage costs, bottleneck, objective
  Mapping mapping;
  double predicted_step_seconds = 0;
  MemoryEstimate memory;

  int num_stages() const { return partition.num_stages(); }
  int GpuOfStage(int stage) const { return mapping.GpuOfStage(stage); }
};

}  // namespace mobius::planner

#endif  // MOBIUS_SERVER_PLANNER_PLAN_H_
