// Predictions of the pipeline benchmark (pipeline_bench.cc): the plan the runtime will execute and
// the simulator's step time for the same emulated machine, for one schedule (mobius, roundrobin,
// resident) and mapper.
//
// Both predictions use the calibrated DeviceSpec (bench_setup.h; efficiency 1, so the analytic
// profile's seconds are FLOPs / the measured FLOP/s) and the emulation's link scale:
//   plan         MakePlan (host/planner/api/make_plan.h) with cost.dma_efficiency = DMA
//                efficiency x link scale, so every simulator link runs at exactly the bandwidth
//                BuildRunConfig gives the emulated link; its predicted_step_seconds is what
//                `mobius plan` would print for that machine.
//   runtime sim  the same partition and mapping simulated again with what the runtime actually
//                moves and computes (pipeline_worker.h; the planner already counts fp32 gradients
//                and, like the runtime, runs the backward of a rank's last two stages from the
//                slots their forward loaded): the stage interior recomputed once more in backward
//                (the planner counts one recompute per unit), 4 MiB copy chunks, one CPU
//                optimizer thread per rank. roundrobin: the same on its backward partition;
//                resident: the planner's simulator as is (it does not model the on-device
//                optimizer the runtime runs after the backward).
// The difference between the two is model mismatch between planner and runtime; the difference
// between either and the measurement is the emulation's (and this machine's) doing.
//
// Memory cap: with units_per_stage > 0 the GPUs are capped (PlanOptions::gpu_memory_bytes) so
// that two stage slots of units_per_stage consecutive units fit, the largest such window
// included; the model then needs more stages than GPUs, as on the paper's testbed. The partitioner
// picks the stages under that cap, identically for both mappers (the mapper does not change the
// partition). num_stages > 0 instead asks MakePlan for exactly that many uniform stages.
//
// Schedules. mobius: as above. roundrobin: MakePlan's roundrobin plan; with roundrobin_partitioner
// "exact" or "uniform" (num_stages ignored) separate forward and backward partitions
// (partition.h, RoundRobinPartition), with "shared" the mobius stages (num_stages or the
// partitioner's) for both passes; the mapper orders the pass stream. resident: min(N, L) uniform
// stages, one per GPU (FAILED_PRECONDITION from MakePlan when the state does not fit the cap).
//
// Pure; thread-safe.
#ifndef MOBIUS_BENCH_PIPELINE_BENCH_PREDICT_H_
#define MOBIUS_BENCH_PIPELINE_BENCH_PREDICT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/layer_units.h"
#include "host/planner/api/make_plan.h"
#include "host/planner/lora.h"
#include "host/planner/sim/simulator.h"
#include "host/topology/analysis.h"
#include "host/topology/topology.h"

namespace mobius::bench {

struct PredictOptions {
  std::string partitioner = "exact";
  int units_per_stage = 0;  // memory cap as above; 0: the GPUs' own memory
  int num_stages = 0;       // > 0: exactly this many uniform stages (PlanOptions)
  double link_scale = 1e-3;
  double dma_efficiency = 0.8;       // launch::EmulationOptions' and the simulator's default
  double effective_flops_per_s = 0;  // calibrated
  double nf4_dequantize_values_per_s = 0;  // calibrated (MeasureNf4DequantizeRate); 0: not run
  double optimizer_seconds_per_billion_params = 0.3;
  std::string roundrobin_partitioner = "exact";  // exact | uniform | shared (see above)
  std::vector<int> gpus;  // the job's GPUs (Topology::gpus indices, ascending); empty: all
  // The runtime's optimizer and dispatch modes (PlanOptions): staleness 0 | 1; roundrobin's
  // dispatch static | pool; the optimizer after the whole backward (what the runtime does with
  // gradient clipping, which needs the global norm first). Both predictions simulate `steps`
  // consecutive steps (+ the drain) and report the mean of the steady ones (simulator.h): 6 give
  // 4 steady steps with staleness 1, where a single simulated step of this link-bound testbed
  // varied by +-10% from one step to the next.
  int optimizer_staleness = 0;
  std::string dispatch = "static";
  bool optimizer_after_backward = false;
  int steps = 6;
  planner::LoraOptions lora;  // enabled(): the job trains LoRA adapters (PlanOptions::lora)
  // nodes > 1: one node of several, its stages' gradients all-reduced across the nodes on this
  // (already scaled) link in both predictions (PlanOptions::internode, SimConfig::internode).
  planner::sim::InterNodeConfig internode;
};

// The runtime-matched simulation's numbers.
struct RuntimeSim {
  double step_seconds = 0;                     // makespan, optimizer included
  double max_busy_seconds = 0;                 // the busiest GPU's compute time
  double forward_end_seconds = 0;              // the last forward pass's end (the rest: backward)
  std::vector<planner::sim::LinkStats> links;  // bytes per simulator link
};

struct Prediction {
  std::string name;      // the variant's label in the report (the mapper or the schedule)
  std::string schedule;  // mobius | roundrobin | resident
  int optimizer_staleness = 0;     // what the run uses (PredictOptions)
  std::string dispatch = "static";
  planner::LoraOptions lora;       // what the run trains (PredictOptions)
  std::string precision = "bf16";  // the job's dtype: training.precision of the run
  std::string mapper;
  int64_t gpu_memory_cap_bytes = 0;  // 0: none
  planner::PlanReport report;        // the plan and its simulated step (links scaled)
  RuntimeSim runtime_sim;
};

// INVALID_ARGUMENT / FAILED_PRECONDITION from MakePlan, with its message.
absl::StatusOr<Prediction> Predict(const model::ModelDescription& model,
                                   const topology::Topology& topology,
                                   const topology::TopologyFacts& facts,
                                   const planner::JobShape& job, const PredictOptions& options,
                                   const std::string& schedule, const std::string& mapper);

}  // namespace mobius::bench

#endif  // MOBIUS_BENCH_PIPELINE_BENCH_PREDICT_H_
