// MakePlan: the planner's front door. Turns a model, a server topology and a job shape into a Plan
// (stages, stage -> GPU mapping, predicted step time, memory) plus everything `mobius plan` shows:
// the simulated step (host/planner/sim), traffic per link, and a comparison table of the
// alternatives on the same cost model. The daemon will serve the same call as a dry-run RPC.
//
//   ModelDescription + Topology/Facts + JobShape + PlanOptions
//     -> PlanOptions::profile (a measured profile, measured_profile.h) or AnalyticProfile (device
//        spec from the GPU name, or PlanOptions::device); PlanReport::profile_source says which
//     -> MakePartitionProblem (granted GPUs; memory cap override)
//     -> partitioner (exact | mip | uniform) -> mapper (cross | sequential)
//     -> Simulate(schedule) -> EstimateMemory -> host RAM check -> alternatives
//
// Schedules and their stages: mobius uses the partitioner's stages and the mapper's GPU order;
// roundrobin gets separate forward and backward partitions (Plan::round_robin, documented in
// host/planner/plan.h: the pass stream, GPU of each pass, checkpoints; exact: the J_rr optimum
// of partition.h, uniform: per pass, mip or a fixed stage count: one partition for both) and the
// mapper's order over its pass stream (pass j -> gpu_order[j mod N]); resident uses min(N, L)
// uniform stages, one per GPU, and must fit with the optimizer state on the GPU (18 bytes/parameter
// with fp32 gradients + activations); zero (ZeRO-3-offload reference) runs at layer-unit
// granularity, microbatch m on GPU m mod N.
//
// Errors (one line each, with the numbers and what would make it fit):
//   INVALID_ARGUMENT     non-positive shape, global batch not a multiple of the microbatch, a
//                        sequence longer than the model's positions, unknown dtype/partitioner/
//                        mapper/dispatch, fp16_accumulate without fp16, staleness other than 0
//                        or 1 or with resident/zero, pool dispatch without roundrobin, LoRA
//                        with staleness 1, a LoRA target or rank the model cannot take,
//                        granted GPU out of range or duplicated, GPU without a known
//                        device spec (analytic profile), a given profile for another model or
//                        microbatch shape, a bad internode config (sim::ValidateInterNode) or
//                        nodes > 1 with the resident or zero schedule;
//   FAILED_PRECONDITION  no GPUs in the topology (a GPU plan needs one), a unit that does not fit
//                        one GPU alone, host RAM (sum of the NUMA nodes, or the override) smaller
//                        than the plan needs, `resident` chosen but the model does not fit, `mip`
//                        chosen in a build without COIN-OR CBC.
//
// Pure (no I/O); thread-safe.
#ifndef MOBIUS_HOST_PLANNER_API_MAKE_PLAN_H_
#define MOBIUS_HOST_PLANNER_API_MAKE_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/layer_units.h"
#include "common/run/trainer_options.h"
#include "common/run/schedule.h"
#include "host/planner/cost_model.h"
#include "host/planner/host_spec.h"
#include "host/planner/lora.h"
#include "host/planner/plan.h"
#include "host/planner/profile.h"
#include "host/planner/sim/internode.h"
#include "host/planner/sim/machine.h"
#include "host/planner/sim/schedules.h"
#include "host/topology/analysis.h"
#include "host/topology/topology.h"

namespace mobius::planner {

struct JobShape {
  int64_t global_batch = 8;  // sequences per optimizer step (= M x microbatch)
  int64_t microbatch = 1;    // sequences per microbatch
  int64_t seq_len = 1024;    // tokens per sequence
  // Weights/activations: "bf16" (our runtime: fp32 accumulation) or "fp16" (the published
  // GeForce baselines). fp16_accumulate (fp16 only): GEMMs accumulate in fp16, the device's
  // fp16-accumulate peak (2x on GeForce); the precision picks the peak (DeviceSpec).
  std::string dtype = "bf16";
  bool fp16_accumulate = false;
};

inline constexpr int64_t kEmulatedMemoryMarginBytes = int64_t{64} << 20;

struct PlanOptions {
  // The pipeline schedule (common/run/schedule.h; names are parsed where they enter: the job
  // spec's plan.schedule, `mobius plan --schedule`).
  runtime::Schedule schedule = runtime::Schedule::kMobius;
  std::string partitioner = "exact";   // exact | mip | uniform
  std::string mapper = "cross";        // cross | sequential
  std::vector<int> gpus;               // granted subset (Topology::gpus indices); empty: all
  int num_stages = 0;                  // > 0: exactly this many uniform stages (a user's override;
                                       // the partitioner is then "uniform")
  int64_t gpu_memory_bytes = 0;        // > 0: cap every GPU at this (else topology / spec)
  int64_t host_memory_bytes = 0;       // > 0: host RAM available (else sum of NUMA nodes)
  // The GPUs are emulated by the CPU backend, so their memory is host memory: the host estimate
  // includes it (estimator.h), and each GPU keeps only kEmulatedMemoryMarginBytes free instead of
  // CostOptions::memory_margin_bytes (no CUDA context there).
  bool devices_in_host_memory = false;
  double efficiency = 0.5;             // fraction of peak FLOP/s (analytic profile)
  std::optional<DeviceSpec> device;    // overrides the spec looked up from the GPU name
  // A measured profile (measured_profile.h: MeasuredToProfile) used instead of the analytic one;
  // it must have the model's unit count and the job's microbatch shape (INVALID_ARGUMENT).
  // The device spec still gives the GPU memory when the topology lacks it.
  std::optional<Profile> profile;
  int64_t gradient_bytes_per_parameter = 4;  // analytic profile: 4 = fp32 (the runtime), 2 = bf16
  // Analytic profile: the device's calibrated kernel model when it has one (profile.h; the RTX
  // 4090 preset); false: the flat `efficiency` model for every device.
  bool use_kernel_model = true;
  CostOptions cost;
  // Simulator: full-duplex degradation of the host links (sim/engine.h); 0: the device spec's
  // host_link_duplex_factor (0.54 for the RTX 4090 preset, 1 for the others).
  double duplex_factor = 0;
  // The host (host_spec.h): when set, its DRAM is a link every host copy and the CPU optimizer
  // share, and the CPU optimizer runs at its AdamW rate (replacing
  // cost.optimizer_seconds_per_billion_params). HostSpecForTopology gives the preset of the
  // topology's CPU. Unset: neither is modelled (the optimizer at 0.3 s per billion parameters).
  std::optional<HostSpec> host;
  // The runtime's optimizer modes (mobius, roundrobin): staleness 0 (step r computes with the
  // weights after update r - 1) or 1 (after update r - 2, r - 1 for r = 1, and after a sync step,
  // checkpoint or eval, the newest: the CPU optimizer overlaps the next step; the host keeps a
  // second bf16 weight copy, +2 bytes/parameter in the estimate). With staleness 1 the simulator
  // runs simulated_steps consecutive steps and reports the last (0: 3 with staleness 1, else 1).
  int optimizer_staleness = 0;
  int simulated_steps = 0;
  // mobius, roundrobin: every CPU optimizer step after the whole backward (the paper's Mobius);
  // false: each stage's as soon as its gradients are in host memory.
  bool optimizer_after_backward = false;
  std::string dispatch = "static";     // roundrobin: static (pass j on GPU j mod N) | pool
  // LoRA (lora.h): the base frozen in bf16 (or its linears in NF4: lora.base_nf4), only the
  // adapters (rank, target modules; empty: the
  // family's PEFT default) trained. Every schedule plans it: the profile's W, G and backward
  // (analytic, or a measured full fine-tuning profile converted: LoraFromMeasuredProfile), the
  // optimizer over the adapters, the host estimate (estimator.h); resident keeps the adapters'
  // Adam state on the GPU (16 bytes/adapter parameter + the bf16 base); zero is DeepSpeed ZeRO-3
  // with a PEFT model (the frozen base still partitioned and gathered, only the adapters'
  // gradients reduced). Needs optimizer_staleness 0 (the runtime keeps no second base copy).
  // LoraFromAdapterOptions converts a job's train::AdapterOptions.
  LoraOptions lora;
  // resident: Megatron's pipeline instead of ours: decoder blocks split evenly with the
  // embedding on the first stage and the head on the last, 1F1B order, per-layer recompute (one
  // layer's activations live) and min(S - s, M) checkpoints in flight on stage s.
  bool megatron_resident = false;
  // resident: FAILED_PRECONDITION when a stage does not fit (false: plan and simulate anyway, for
  // timing a system whose real footprint our rule over-counts; the caller reports the fit).
  bool resident_memory_check = true;
  // Analytic profile: bytes per logit the head's elementwise passes touch (the cross-entropy's
  // reads and its gradient's writes; kernel_model.h charges them as passes over the unit's saved
  // bytes). -1: our runtime's logit type, 2 where its fp16 head writes fp16 logits (fp16 full
  // fine-tuning, worker/model/unit_runner.cc LogitsType), else 4 (fp32); 0: a fused or chunked
  // loss charged nothing there, RoundPipe's chunked linear + cross-entropy as calibrated.
  int64_t logits_bytes = -1;
  // The zero schedule (the comparison table's ZeRO-3 offload row). With zero_as_deepspeed_runs_it
  // (the default), the job as DeepSpeed ZeRO-3 with CPU offload would run it: one microbatch per
  // GPU per accumulation micro-step (M / N micro-steps), each gathering every layer's parameters
  // three times (forward, the activation checkpointing's recompute, backward), its collectives
  // staged through host memory when the GPUs have no P2P (GeForce). Otherwise `zero` as given
  // (its default: the older reference model, one micro-step, two gathers).
  bool zero_as_deepspeed_runs_it = true;
  sim::ZeroConfig zero;
  // Several nodes (docs/planner.md, "Several nodes"; the runtime: docs/multinode.md):
  // internode.nodes > 1 plans ONE node of that many identical ones, the job's global_batch being
  // that node's share; each stage's gradients are all-reduced across the nodes before its
  // optimizer step (sim/internode.h), in the simulation that chooses the stage count too.
  // mobius and roundrobin only (INVALID_ARGUMENT otherwise); the comparison table's resident and
  // zero rows say "not modelled across nodes". PlanReport::internode has the all-reduce's numbers.
  // planner_nodes (host/planner/nodes/nodes.h) splits a global batch and compares with one node.
  sim::InterNodeConfig internode;
  double mip_time_limit_seconds = 10;  // all MIP solves together (the plan still comes back)
  // exact partitioner, mobius schedule: the best `simulation_candidates` stage counts by J (only
  // S >= N when the memory allows) are simulated and the fastest simulated wins; false: the
  // J-optimal partition alone (J ignores schedule dependencies and idle GPUs, so the two differ).
  bool choose_by_simulation = true;
  int simulation_candidates = 6;
  bool compare = true;                 // fill PlanReport::alternatives
  bool trace = false;                  // fill PlanReport::chrome_trace_json
};

// True when this build links the COIN-OR CBC partitioner (host/planner/mip).
bool MipAvailable();

// One row of the comparison table: the chosen plan with one dimension swapped.
struct Alternative {
  std::string dimension;  // "partitioner", "mapper", "schedule"
  std::string name;       // "exact", "cross", "zero", ...
  bool chosen = false;    // the plan's own choice
  bool available = true;  // false: not built (mip) or does not fit (resident); see note
  std::string note;       // why unavailable, MIP status and gap, ...
  int num_stages = 0;
  double objective_seconds = 0;  // the cost model's J (partitioners, mappers; 0 for others)
  double contention_score = 0;   // mappers
  double step_seconds = 0;       // simulated
  double tokens_per_second = 0;
  int64_t h2d_bytes = 0;         // host -> GPU per step, all GPUs
  int64_t d2h_bytes = 0;
  int64_t weight_upload_bytes = 0;
};

// Where the plan's stages run, per entry of Mapping::gpu_order.
struct GpuPlacement {
  int gpu = -1;               // Topology::gpus index
  std::string name;
  int root_complex = -1;      // TopologyFacts::root_complexes index
  int package = -1;
  int numa_node = -1;
  int contention_group = -1;  // TopologyFacts::contention_groups index
  std::vector<int> stages;    // stage indices it runs (roundrobin: forward stages)
  std::vector<int> backward_stages;  // roundrobin: backward stage indices it runs
  int64_t memory_bytes = 0;   // estimator's GPU memory
};

struct LinkTraffic {
  std::string name;  // simulator link name, e.g. "uplink0.h2d"
  double capacity_bytes_per_s = 0;
  int64_t bytes = 0;  // one step
  double busy_seconds = 0;
};

// One stage's all-reduce in the simulated step (roundrobin: a backward stage's). Times are
// absolute, as sim::StageTiming's.
struct StageAllReduce {
  int stage = 0;
  int64_t bytes = 0;             // its gradients (0: none, e.g. LoRA's embedding)
  double seconds = 0;            // the ring formula over its buckets
  double backward_end = 0;       // its last backward compute
  double start = 0, end = 0;     // on the inter-node link (0, 0 without bytes)
  double optimizer_end = 0;
};

// PlanOptions::internode.nodes > 1: what the all-reduce costs one node per step.
struct InterNodeReport {
  int nodes = 1;
  sim::InterNodeLink link;
  int64_t bucket_bytes = 0;
  int64_t allreduce_bytes = 0;   // gradient bytes all-reduced per step (every stage's)
  int64_t sent_bytes = 0;        // sent (and received) by each node: 2 (N - 1) / N x that
  double allreduce_seconds = 0;  // the inter-node link's busy time per step (ring times summed)
  // The same plan and batch simulated without the all-reduces, and what they add to the step:
  // the communication the backward (and, with staleness 1, the next step) does not hide.
  double step_without_allreduce_seconds = 0;
  double exposed_seconds = 0;    // step_seconds - step_without_allreduce_seconds
  std::vector<StageAllReduce> stages;
};

struct PlanReport {
  Plan plan;  // predicted_step_seconds = the simulated step; partition.objective_seconds = J
  std::string device;          // the profile's device (DeviceSpec name or measured device)
  std::string profile_source;  // "analytic" or "measured"
  int64_t gradient_bytes_per_parameter = 4;  // the profile's gradient dtype (4 = fp32)
  int64_t parameters = 0;
  int num_gpus = 0;
  // LoRA (PlanOptions::lora): the rank, the target modules (the family's default filled in) and
  // the adapter parameters; 0 / empty in full fine-tuning.
  int64_t lora_rank = 0;
  std::vector<std::string> lora_targets;
  int64_t adapter_parameters = 0;
  bool lora_base_nf4 = false;  // the frozen base's linears in NF4 (LoraOptions::base_nf4)
  // Per stage, the bytes a pass uploads: bf16 weights (LoRA: + fp32 adapters) (roundrobin:
  // forward stages).
  std::vector<int64_t> stage_parameter_bytes;
  std::vector<int64_t> backward_stage_parameter_bytes;  // roundrobin: per backward stage
  std::vector<GpuPlacement> placements;
  double objective_seconds = 0;     // J of cost_model.h (roundrobin: J_rr)
  double step_seconds = 0;          // simulated
  double tokens_per_second = 0;     // global_batch x seq_len / step
  double bubble_fraction = 0;
  int64_t h2d_bytes = 0, d2h_bytes = 0, p2p_bytes = 0, weight_upload_bytes = 0;
  int64_t host_memory_available_bytes = 0;  // 0: unknown (check skipped)
  std::vector<LinkTraffic> links;
  std::vector<Alternative> alternatives;
  std::string partitioner_note;     // MIP status/gap
  std::string chrome_trace_json;    // when PlanOptions::trace
  InterNodeReport internode;        // nodes = 1: nothing else filled
};

// A job's adapter options (train::AdapterOptions, the trainer's and the job spec's) as the
// planner takes them: type "" -> full fine-tuning (rank 0), "lora" -> rank and target modules.
// INVALID_ARGUMENT ("adapter.type") for another type.
absl::StatusOr<LoraOptions> LoraFromAdapterOptions(const train::AdapterOptions& adapter);

absl::StatusOr<PlanReport> MakePlan(const model::ModelDescription& model,
                                    const topology::Topology& topology,
                                    const topology::TopologyFacts& facts, const JobShape& job,
                                    const PlanOptions& options = {});

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_API_MAKE_PLAN_H_
