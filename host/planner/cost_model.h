// The planner's cost model: what a stage (a consecutive range of layer units) costs on a GPU of a
// given server, and the pipeline objective every partitioner optimises. docs/planner.md explains
// the model with its formulas; this header is the contract.
//
// Link side (from host/topology/analysis.h):
//   - a GPU's host link runs at dma_efficiency x the narrowest PCIe link between it and its root
//     complex (pinned-memory DMA reaches ~80% of the theoretical rate, design/mobius.md section 3);
//   - when k GPUs of one contention group copy at once, the shared uplink is split fairly:
//       effective = dma_efficiency x min(host_path, uplink / k);
//   - a boundary activation between two GPUs without P2P goes through host memory: D2H over the
//     source's uplink, then H2D over the destination's (the same uplink twice when both sit in one
//     contention group); store-and-forward, so the two times add. With P2P it crosses once.
//   - CPU optimizer: ~0.3 s per billion parameters (design/mobius.md section 3), synchronous after
//     the backward in the Mobius schedule; in LoRA mode (Profile::lora) over the adapter
//     parameters alone.
//   - LoRA mode changes no formula below, only the profile's numbers (lora.h): W = bf16 base +
//     fp32 adapters, G = fp32 adapter gradients, the backward without weight-gradient GEMMs.
//
// Stage model (Mobius schedule: stage s on GPU s mod N, two resident stages per GPU, the next stage
// of a GPU prefetched while the current one computes all M microbatches):
//   per range R, pass forward (F) and backward (B), M microbatches, h = boundary bytes/microbatch:
//     F: compute M * sum fwd;   H2D  W_R + M h;    D2H  M h
//     B: compute M * sum bwd;   H2D  W_R + M h;    D2H  G_R + M h
//        (H2D only M h when the backward reuses the weights, below)
//     tau_F(R) = max(compute_F, H2D_F / h2d, D2H_F / d2h), tau_B(R) likewise,
//     tau(R) = tau_F(R) + tau_B(R)       (the GPU time of one stage slot in a step)
//   Backward uploads (PartitionProblem::backward_uploads): each GPU walks its stages forward
//   ascending, then backward descending, through two weight slots (the runtime's, and the
//   simulator's, sim/schedules.h), so its last two forward stages are still loaded when its
//   backward starts: in a partition into S stages the backward of stage s uploads nothing iff
//   s + 2N >= S, i.e. the LAST min(S, 2N) stages do not (all of them when S <= 2N).
//   kTwoSlotReuse (the default; MakePartitionProblem builds it) charges those stages tau_B without
//   W_R in its H2D term. The rule depends on S: a stage's tau depends on its position from the end,
//   and a partitioner searching over S applies it per candidate S. kEveryStage charges every
//   backward its upload (the paper's model; the MIP of mip/ reproduces it). Round-robin passes
//   (Pass::kForward / kBackward) always upload: their slots hold the same range again only by
//   coincidence (sim/schedules.h), which the cost model does not count. The rule lowers tau_B only
//   where the upload term is its largest: with G_R >= W_R (fp32 gradients) and h2d = d2h (the
//   topology's rates) the gradient offload term is at least as large, so it binds only where H2D
//   is the slower direction (a measured profile) and compute does not dominate.
//   memory (PartitionProblem::memory_model), per GPU; h_u = unit u's input (boundary) bytes:
//   kRuntime (the default: what worker/runtime allocates, pipeline_worker.cc): two weight slots
//     (the computing and the prefetched stage) of W + G for its largest stage, the input of every
//     unit of the stage being run (the backward recomputes them from the stage's checkpoint), and
//     ONE unit's internals at a time in a shared workspace (common/model/unit_workspace.h: the
//     head's logits and the MLP's intermediates by token chunks, so O(tokens x hidden)):
//       stage(R) = 2 (W_R + G_R) + sum over units h_u       (a forward pass: 2 W_R + sum h_u)
//       reserved = margin + max unit workspace + the fixed activation buffers (the stage's input
//                  and output, two fp32 gradient buffers: 6 h; token ids and targets: 8 per token)
//   kTwoSlot (the conservative rule, kept for the published systems' setups, api/published.h):
//     each slot sized for weights + gradients + one microbatch's recompute activations:
//       stage(R) = 2 slot(R), slot(R) = W_R + G_R + sum over units (h_u + saved activation bytes)
//     (a round-robin forward pass with forward_keeps_boundaries_only: W_R + sum of boundaries +
//     the largest unit's saved bytes); reserved = margin + max unit workspace
//   feasible(R)  <=>  stage(R) <= gpu_memory - reserved
//   All per-unit terms are non-negative and additive, so a sub-range of a feasible range is
//   feasible and tau never decreases when a range grows (what the exact partitioner relies on).
//
// Objective (predicted step time) of a partition into S stages on N GPUs with M microbatches:
//     J = K(S) * (max_s tau_s(R_s) + o) + T_opt
//     K(S) = max( ceil(S/N) + (min(S, N) - 1) / M ,  1 + (S - 1) / M )
//   tau_s = tau(R_s), or, for the last min(S, 2N) stages under kTwoSlotReuse, tau(R_s) without
//   the backward upload (EvaluateStage(..., backward_upload = false)).
//   o = per-stage overhead (launches, synchronisation, stage switch; both passes),
//   T_opt = CPU optimizer time of the whole model (a constant of the partition).
//   K counts stage slots on the critical path: each GPU runs ceil(S/N) stages back to back and the
//   last GPU starts (N-1) microbatches after the first (pipeline fill); when M < N the GPUs wait on
//   their predecessors instead and the chain of S stages one microbatch apart dominates. The bubble
//   fraction (N-1)/M / (S/N + (N-1)/M) = N(N-1)/(MS + N(N-1)) is that of design/mobius.md
//   section 3. J is non-decreasing in max tau for a fixed S (the exact partitioner's binary search
//   per S relies on it); K is non-decreasing in S (the MIP's pruning and the round-robin exact
//   partitioner rely on that).
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_PLANNER_COST_MODEL_H_
#define MOBIUS_HOST_PLANNER_COST_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "host/planner/profile.h"
#include "host/topology/analysis.h"

namespace mobius::planner {

struct CostOptions {
  double dma_efficiency = 0.8;            // achieved / theoretical PCIe rate, pinned memory
  double stage_overhead_seconds = 0.002;  // o: per stage slot per step (both passes)
  double optimizer_seconds_per_billion_params = 0.3;
  int64_t memory_margin_bytes = int64_t{1} << 30;  // CUDA context, allocator slack
  // PartitionProblem::forward_keeps_boundaries_only.
  bool forward_keeps_boundaries_only = false;
  MemoryModel memory_model = MemoryModel::kRuntime;  // PartitionProblem::memory_model
};

// ---- Links
// ---------------------------------------------------------------------------------------

// How many of `gpus` sit in `gpu`'s contention group (gpu itself included; >= 1).
int GpusInContentionGroup(const topology::TopologyFacts& facts, const std::vector<int>& gpus,
                          int gpu);

// GB/s one direction a GPU gets to/from host memory while `concurrent` GPUs of its contention group
// (itself included) copy in that direction: dma_efficiency * min(host_path, uplink / concurrent).
double EffectiveHostGBytesPerSecond(const topology::TopologyFacts& facts, int gpu, int concurrent,
                                    double dma_efficiency);

// Seconds to move `bytes` of boundary activations from GPU src to GPU dst; src_concurrent /
// dst_concurrent as above. P2P pairs: one crossing at the narrower of the two links (NVLink pairs
// at the NVLink rate when the topology has it). Otherwise D2H then H2D through host memory.
double BoundaryTransferSeconds(const topology::Topology& topology,
                               const topology::TopologyFacts& facts, int src, int dst,
                               int64_t bytes, int src_concurrent, int dst_concurrent,
                               double dma_efficiency);

double OptimizerSeconds(int64_t parameters, double seconds_per_billion);

// ---- Stages and the objective
// --------------------------------------------------------------------

// One unit, one microbatch.
struct UnitCost {
  double forward_seconds = 0;
  double backward_seconds = 0;   // with recompute
  int64_t weight_bytes = 0;      // W: uploaded once per pass
  int64_t gradient_bytes = 0;    // G: offloaded once per step
  // Resident during the stage's backward: kRuntime the unit's input (its internals are in the
  // shared workspace, reserved); kTwoSlot its input + saved activations.
  int64_t activation_bytes = 0;
  int64_t boundary_bytes = 0;    // the unit's input (part of activation_bytes)
  // What the CPU optimizer updates for the unit: its bf16 weights' parameters (weight_bytes / 2)
  // in full fine-tuning, its adapter parameters in LoRA mode (lora.h). The simulator splits the
  // optimizer's time and DRAM traffic by it (sim/schedules.h).
  int64_t optimizer_parameters = 0;
};

// Whether the backward pass of a Mobius stage (Pass::kBoth) uploads its weights (see above).
enum class BackwardUploads {
  kTwoSlotReuse,  // the runtime: the backward of the last min(S, 2N) stages uploads nothing
  kEveryStage,    // the paper's model: every backward uploads W_R again
};

// Which passes a stage runs. kBoth: the Mobius schedule (a stage is one range in both passes; tau
// = tau_F + tau_B, slot = W + G + A). The round-robin schedule partitions each pass on its own
// (partition.h, RoundRobinPartition): kForward: tau = tau_F, slot = W + A (no gradients on the
// GPU); kBackward: tau = tau_B, slot = W + G + A. Memory stays "2 x slot <= budget" in every case.
enum class Pass { kBoth, kForward, kBackward };

// Everything a partitioner needs, as plain numbers (tests build random ones directly).
struct PartitionProblem {
  std::vector<UnitCost> units;
  Pass pass = Pass::kBoth;
  BackwardUploads backward_uploads = BackwardUploads::kTwoSlotReuse;
  int num_gpus = 1;            // N
  int num_microbatches = 1;    // M
  double h2d_bytes_per_s = 1;  // per GPU, under contention (the slowest GPU of the plan)
  double d2h_bytes_per_s = 1;
  int64_t boundary_bytes = 0;  // h: activation crossing a stage boundary, per microbatch
  double stage_overhead_seconds = 0;
  double optimizer_seconds = 0;
  int64_t gpu_memory_bytes = 0;  // capacity of the smallest GPU of the plan
  int64_t reserved_bytes = 0;    // margin + max unit workspace
  // Pass::kForward under recompute: a forward pass keeps no activations for a backward (it
  // recomputes them), only the stage's interior boundaries and one unit's transient activations
  // at a time: slot = W + sum of boundary bytes + max over units of (activation - boundary).
  // RoundPipe's forward stages (5-6 Llama-8B layers of 26K tokens) fit only so. false: the
  // conservative sum of every unit's activations, as for a backward.
  bool forward_keeps_boundaries_only = false;
  MemoryModel memory_model = MemoryModel::kRuntime;
  // Our runtime's forward passes stop before the LM head (the last unit): the head's backward
  // recomputes its forward anyway and gives the loss (worker/runtime/pipeline_passes.cc), so a
  // forward pass holding the head never runs it. MakePartitionProblem sets it under kRuntime;
  // false: every forward pass runs all its units (the published systems' setups).
  bool forward_skips_head = false;

  int num_units() const { return static_cast<int>(units.size()); }
  // What a forward pass spends on unit u per microbatch (0 for a skipped head).
  double ForwardPassSeconds(int u) const {
    return forward_skips_head && u == num_units() - 1 ? 0.0 : units[u].forward_seconds;
  }
  int64_t stage_memory_budget_bytes() const { return gpu_memory_bytes - reserved_bytes; }
};

struct StageCost {
  double forward_compute_seconds = 0;  // M microbatches
  double backward_compute_seconds = 0;
  double load_seconds = 0;      // W_R over H2D (once per uploading pass)
  bool backward_upload = true;  // false: tau_B charges no weight upload (the slots hold W_R)
  double forward_seconds = 0;   // tau_F
  double backward_seconds = 0;  // tau_B (with or without the upload, as backward_upload says)
  double slot_seconds = 0;      // tau = tau_F + tau_B (kForward: tau_F; kBackward: tau_B)
  // kTwoSlot: W + G + activations (kForward: W + activations); kRuntime: memory_bytes / 2.
  int64_t slot_bytes = 0;
  int64_t memory_bytes = 0;     // stage(R) of the header (compare with the stage budget)
  int64_t weight_bytes = 0;     // W_R, G_R (0 for kForward), activations as counted
  int64_t gradient_bytes = 0;
  int64_t activation_bytes = 0;
};

// kRuntime's fixed activation buffers of a GPU (pipeline_worker.cc Allocate): the stage's input
// and output hidden states, two fp32 gradient buffers (6 x the largest boundary) and the token ids
// and targets (8 bytes per token of a microbatch).
int64_t RuntimeActivationBufferBytes(const Profile& profile);

// The additive memory of one unit in a stage (kForward with forward_keeps_boundaries_only under
// kTwoSlot excepted, which is not additive): MemoryBytes() of a range is the sum over its units.
int64_t UnitStageMemoryBytes(const PartitionProblem& p, int unit);

// Running sums over a range that grows one unit at a time (the exact partitioner's inner loop);
// EvaluateStage is Add() over [begin, end) then Cost(), so both give bit-identical numbers.
// Cost(false): the backward pass charged without its weight upload (H2D = M h only).
class StageAccumulator {
 public:
  explicit StageAccumulator(const PartitionProblem& problem) : problem_(&problem) {}
  void Add(int unit);
  StageCost Cost(bool backward_upload = true) const;
  int64_t MemoryBytes() const {
    const int64_t g = GradientBytes();
    if (problem_->memory_model == MemoryModel::kRuntime) {
      return 2 * (weight_bytes_ + g) + activation_bytes_;
    }
    return 2 * (weight_bytes_ + g + ActivationBytes());
  }
  int64_t GradientBytes() const { return problem_->pass == Pass::kForward ? 0 : gradient_bytes_; }
  int64_t ActivationBytes() const {
    if (problem_->memory_model == MemoryModel::kRuntime) return activation_bytes_;
    return problem_->pass == Pass::kForward && problem_->forward_keeps_boundaries_only
               ? boundary_bytes_ + max_transient_bytes_
               : activation_bytes_;
  }

 private:
  const PartitionProblem* problem_;
  double forward_seconds_ = 0;
  double backward_seconds_ = 0;
  int64_t weight_bytes_ = 0;
  int64_t gradient_bytes_ = 0;
  int64_t activation_bytes_ = 0;
  int64_t boundary_bytes_ = 0;
  int64_t max_transient_bytes_ = 0;
};

// The range [begin, end) as one stage; backward_upload = false charges its backward no weight
// upload. REQUIRES: 0 <= begin < end <= problem.num_units().
StageCost EvaluateStage(const PartitionProblem& problem, int begin, int end,
                        bool backward_upload = true);

// How many stages, the last ones, of a partition into num_stages run their backward from the
// weights still in their GPU's slots: min(S, 2N) for kTwoSlotReuse and Pass::kBoth, else 0.
// Stage s uploads in backward iff s < num_stages - ReusedBackwardStages(problem, num_stages).
int ReusedBackwardStages(const PartitionProblem& problem, int num_stages);

// K(S) above. REQUIRES: num_stages, num_gpus, num_microbatches >= 1.
double PipelineSlots(int num_stages, int num_gpus, int num_microbatches);

// J above; max_slot_seconds is the bottleneck of the taus as charged (max_s tau_s).
double Objective(const PartitionProblem& problem, int num_stages, double max_slot_seconds);

// The round-robin schedule's counterpart of K: stage passes (forward stages, then backward stages)
// form one stream, pass j on GPU j mod N. With every pass taking one time unit, pass j starts at
//   start(j) = max(start(j-1) + 1/M,  start(j-N) + 1)      (start(0) = 0; the second term only
//                                                           for j >= N)
// (its first microbatch needs the previous pass's first microbatch; its GPU is free once pass j-N
// ended), and the stream ends at start(P-1) + 1 = K_rr(P). Non-decreasing in P.
// REQUIRES: num_passes, num_gpus, num_microbatches >= 1.
double RoundRobinSlots(int num_passes, int num_gpus, int num_microbatches);

// J_rr = K_rr(S_F + S_B) * (max pass tau + o/2) + T_opt (o is per stage slot, both passes: o/2 per
// pass). T_opt is kept as the constant tail for comparability with J, although the round-robin
// schedule overlaps the optimizer with the backward.
double RoundRobinObjective(const PartitionProblem& problem, int num_passes,
                           double max_pass_seconds);

// `problem` restricted to one pass (pass = kForward or kBackward; everything else equal).
PartitionProblem PassProblem(const PartitionProblem& problem, Pass pass);

// Builds the problem for a job on `gpus` (indices into topology.gpus, all of them prefetching at
// once in the steady state, so k = GpusInContentionGroup) with the smallest GPU memory among them
// (`gpu_memory_bytes` when the topology does not know it). INVALID_ARGUMENT for an empty or
// out-of-range GPU list, num_microbatches < 1, or no memory size.
absl::StatusOr<PartitionProblem> MakePartitionProblem(
    const Profile& profile, const model::ModelDescription& model,
    const topology::Topology& topology, const topology::TopologyFacts& facts,
    const std::vector<int>& gpus, int num_microbatches, int64_t gpu_memory_bytes,
    const CostOptions& options = {});

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_COST_MODEL_H_
