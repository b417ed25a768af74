// A plan: how one job runs on its GPUs. The planner produces it; the simulator scores it, the
// daemon stores it (and admits the job by its memory estimate), the workers execute it.
//
//   stages       consecutive layer-unit ranges [begin, end), in execution order (forward);
//   mapping      stage s runs on mapping.GpuOfStage(s) = gpu_order[s mod N] (Mobius schedule);
//   predicted    the simulated step time (partition.objective_seconds: the cost model's J);
//   memory       what estimator.h says the plan needs per GPU and on the host.
//
// The round-robin (RoundPipe) schedule (schedule == "roundrobin") is described by `round_robin`,
// which the runtime will consume; `partition` then equals round_robin->forward:
//
//   round_robin->forward.stages   S_F unit ranges, ascending, covering [0, L): the forward pass's
//                                 stages, run in order 0 .. S_F-1.
//   round_robin->backward.stages  S_B unit ranges, ascending, covering [0, L): the backward
//                                 pass's stages (with recompute), run in order S_B-1 .. 0. They are
//                                 a separate partition: backward costs ~3x forward, so S_B >= S_F
//                                 typically and backward stages hold fewer units.
//   pass stream                   j = 0 .. S_F+S_B-1; PassAt(j): j < S_F is forward stage j, else
//                                 backward stage S_F+S_B-1-j. Stages are not bound to GPUs: pass j
//                                 runs on GpuOfPass(j) = mapping.gpu_order[j mod N] (the next GPU
//                                 in round-robin order); a GPU prefetches pass j+N's weights
//                                 while it computes pass j (two passes resident per GPU).
//   checkpoints                   CheckpointUnits(): during the forward the input of every unit
//                                 that starts a forward or a backward stage (unit 0 excepted) goes
//                                 to host memory for all M microbatches; backward stage b reloads
//                                 the one at its first unit and recomputes from it.
//   gradients / optimizer         each backward stage offloads its gradients after its last
//                                 microbatch; the CPU optimizer of its units runs as soon as they
//                                 are in host memory (overlapped with the remaining backward).
//   costs                         forward.costs[s]: tau_F, slot W + A; backward.costs[b]: tau_B,
//                                 slot W + G + A (cost_model.h, Pass); objective_seconds = J_rr.
//
// Value type; thread-compatible.
#ifndef MOBIUS_HOST_PLANNER_PLAN_H_
#define MOBIUS_HOST_PLANNER_PLAN_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/run/schedule.h"
#include "host/planner/cost_model.h"
#include "host/planner/mapping.h"
#include "host/planner/partition.h"
#include "host/planner/profile.h"

namespace mobius::planner {

struct MemoryEstimate {
  // Per entry of Mapping::gpu_order: margin + max unit workspace + 2 x the largest stage slot
  // (weights + gradients + one microbatch's activations; LoRA: the bf16 base + fp32 adapters +
  // their gradients, no base gradients) among the stages it runs; 0 if none.
  std::vector<int64_t> gpu_bytes;
  int64_t max_gpu_bytes = 0;
  int64_t gpu_capacity_bytes = 0;  // the smallest GPU of the plan
  // Host: what all of the job's processes use together (estimator.h has the model). The shared
  // store: model state (bytes_per_param x parameters, tied tensors once; LoRA: the bf16 base once +
  // 16 bytes per adapter parameter + the adapters' grad-norm partials), activation checkpoints
  // (every stage's input, for all M microbatches, kept from forward to backward) and the fp32
  // activation gradients crossing backward stage boundaries; per worker process its fixed
  // footprint; and, when the GPUs are emulated on the CPU backend, their memory too (it is host
  // memory then): every GPU's working set less the CUDA margin, plus the CPU GEMM's fp32 copy of
  // its largest weight (in pieces of at most max(16 MiB, 4 x 64 x K) bytes: estimator.h).
  int64_t host_model_state_bytes = 0;
  int64_t host_activation_bytes = 0;
  int64_t host_activation_grad_bytes = 0;
  int64_t host_process_bytes = 0;
  int64_t host_emulated_device_bytes = 0;  // 0 unless EstimatorOptions::devices_in_host_memory
  int64_t host_bytes = 0;                  // the sum of the five above
  // Pinned (page-locked, what DMA touches): bf16 weights + gradients + activation checkpoints.
  int64_t pinned_bytes = 0;
};

// One entry of the round-robin pass stream.
struct PassRef {
  bool backward = false;
  int stage = 0;  // index into round_robin->forward or ->backward
};

struct Plan {
  MicrobatchShape shape;
  int num_microbatches = 1;         // M per step (global batch = M x microbatch_size)
  std::string partitioner;          // "exact", "uniform" (later "mip")
  std::string mapper;               // "sequential", "cross"
  runtime::Schedule schedule = runtime::Schedule::kMobius;  // runtime::ScheduleName for its name
  Partition partition;              // stages, per-stage costs, bottleneck, objective
  std::optional<RoundRobinPartition> round_robin;  // schedule "roundrobin" only (see above)
  Mapping mapping;
  double predicted_step_seconds = 0;
  MemoryEstimate memory;

  int num_stages() const { return partition.num_stages(); }
  int GpuOfStage(int stage) const { return mapping.GpuOfStage(stage); }

  // Round-robin pass stream (REQUIRES: round_robin). Mobius plans have 2S passes, not described
  // here: stage s runs both its passes on GpuOfStage(s).
  int num_passes() const { return round_robin->num_passes(); }
  PassRef PassAt(int pass) const {
    const int sf = round_robin->forward.num_stages();
    return pass < sf ? PassRef{false, pass} : PassRef{true, num_passes() - 1 - pass};
  }
  int GpuOfPass(int pass) const { return mapping.GpuOfStage(pass); }
  // Units whose input is checkpointed to host memory in the forward, ascending (unit 0 excluded).
  std::vector<int> CheckpointUnits() const {
    std::vector<int> units;
    for (const Partition* p : {&round_robin->forward, &round_robin->backward}) {
      for (const StageRange& r : p->stages) {
        if (r.begin > 0) units.push_back(r.begin);
      }
    }
    std::sort(units.begin(), units.end());
    units.erase(std::unique(units.begin(), units.end()), units.end());
    return units;
  }
};

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_PLAN_H_
