// Schedules: one training step of a plan as a task graph (engine.h) on a SimMachine.
//
//   mobius      the paper's schedule. Stage s runs on gpu_order[s mod N] in both passes. Each GPU
//               walks its stage passes in order: forward over its stages ascending, then backward
//               descending, through two weight slots used as the runtime uses them (see "Weight
//               slots" below): its last two forward stages are still loaded when its backward
//               starts, so the backward of stage s uploads nothing iff s + 2N >= S (every stage
//               when S <= 2N); every other pass uploads its stage's weights. All M microbatches of
//               a stage run back to back (GPipe within the stage).
//               Forward: a stage's output for each microbatch goes D2H to host memory (the
//               checkpoint the backward needs) and from there H2D to the next stage's GPU; P2P
//               pairs copy GPU-to-GPU directly (the checkpoint still goes D2H, off the critical
//               path). Backward: reload the input checkpoint (H2D), receive the output gradient
//               from stage s+1 (host-staged or P2P), compute (recompute included), and after the
//               last microbatch offload the gradients (D2H); the CPU optimizer of the stage runs as
//               soon as they are in host memory, or, with paper_barrier, all after the backward.
//   roundrobin  RoundPipe: stages are not bound to GPUs. The S_F forward stage passes (0..S_F-1)
//               and then the S_B backward stage passes (S_B-1..0) form one stream assigned
//               round-robin: pass j -> gpu_order[j mod N] (the next free GPU when passes cost the
//               same). Forward and backward have their own partitions (SimConfig::
//               backward_stages; empty = the forward stages for both). Two weight slots per GPU
//               like mobius, keyed by unit range: a backward pass uploads nothing when a pass over
//               the same units is still in its GPU's slots. With one partition for both passes
//               that happens only for N odd: backward stages S-1-(N-1)/2 (its pass directly
//               follows its forward on that GPU) and S-1-(N-1)/2-N (N = 1: S-1 and S-2); with
//               separate partitions, where ranges coincide. Forward: besides its output,
//               a forward stage offloads (D2H) the activation at every backward-stage boundary
//               inside it, the checkpoint a backward stage starting there recomputes from.
//               Backward stage b reloads its input checkpoint, receives the output gradient from
//               backward stage b+1 (host-staged or P2P), computes (recompute included), offloads
//               its gradients; its CPU optimizer runs as soon as they are in host memory
//               (overlapped). Backward-stage optimizer time is its share of the optimizer's
//               parameters (MakeSimStages).
//   resident    no swapping: weights stay on the GPUs (no uploads, no gradient offload, optimizer
//               on the GPU, not modelled: ~20 ms for 1B parameters at GPU memory speed);
//               checkpoints stay on the GPU; only boundary activations move between GPUs. Order
//               per GPU: all forwards then all backwards (GPipe), or with one_f_one_b Megatron's
//               non-interleaved 1F1B (min(S-1-s, M) warm-up forwards, then one forward and one
//               backward alternately); with equal stages both take (M + S - 1) stage slots.
//   zero        ZeRO-3-offload (data parallel): microbatch m on GPU m mod N, parameters and
//               optimizer state in host memory, gathered layer by layer (pass per-unit stages),
//               double-buffered (a GPU holds two layers' gathered parameters). SimConfig::zero:
//               - the reference (default): every GPU uploads every layer's weights from host in
//                 forward and in backward (~N x 4P bytes of H2D per step), computes all its
//                 microbatches, offloads its full gradient (the host reduces); with NVLink
//                 between every pair, each GPU uploads 1/N and the rest is all-gathered over
//                 NVLink, gradients reduce-scattered over NVLink and 1/N goes D2H;
//               - ZeRO-Infinity on GPUs without P2P (host_staged_collectives): each GPU holds
//                 1/N of the parameters in host memory; a gather = its 1/N H2D, then a ring
//                 all-gather through host memory (each GPU receives (N-1)/N of the layer H2D and
//                 sends as much D2H, on its own ring streams, so both directions of its link are
//                 busy); micro_steps accumulation micro-steps, each gathering every layer
//                 `gathers` times (3: forward, the recompute's forward, backward) and
//                 reduce-scattering the gradients through host memory the same way; each GPU
//                 keeps its 1/N of the gradients and offloads it after the last micro-step.
//               Activations stay on the GPU; CPU optimizer after the backward by default
//               (DeepSpeed), zero_optimizer_barrier.
//
// Several steps (mobius, roundrobin; SimConfig::steps): the steps run back to back in one graph,
// so the next step's passes can overlap the last one's backward and optimizer, and the result is
// the last reported step (its duration = end of its last task - end of the step before's; Simulate
// adds a drain step after it, simulator.h). Between steps:
// - weights: a pass of step k uploads the weights of the update of step k - 1 - staleness
//   (optimizer_staleness 0: the last update; 1: the one before, so the CPU optimizer overlaps the
//   next step, as RoundPipe and the runtime's async mode do: step r computes with the weights
//   after update r - 2). Its upload waits for those optimizer steps of its units. No slot keeps
//   its weights across a step boundary (they are a new version).
// - gradients: one host gradient buffer per stage: step k's gradient offload of a stage waits for
//   the stage's update of step k - 1 (which reads the buffer).
// With staleness 0 and the optimizer after the backward, a second step cannot start before the
// first one's updates, so one step already gives the steady state (the default).
//
// Several nodes (mobius, roundrobin; SimConfig::internode, sim/internode.h; the runtime:
// docs/multinode.md): one node of N identical ones is simulated on its share of the batch; each
// stage's gradients, once offloaded to host memory, are all-reduced across the nodes (ring
// formula, per bucket) on the node's inter-node link, one all-reduce at a time in the order they
// become ready; the stage's optimizer step (and, with paper_barrier, every optimizer step) waits
// for its all-reduce. So an all-reduce overlaps the backward of the stages after it, and the last
// stage's is exposed. A stage without gradients (LoRA's embedding) has none.
//
// Dispatch (roundrobin): static, pass j on gpu_order[j mod N] (RoundPipe's round-robin counter,
// continuing over steps), or pool: a GPU claims the next pass of the stream when it starts
// computing its current pass and prefetches it into its other slot (the runtime's pool mode;
// Simulate finds the assignment, simulator.h).
//
// Weight slots (mobius, roundrobin), as the runtime uses them (worker/runtime/pipeline_worker.cc,
// RunPasses; pipeline_passes.cc, EnsureLoaded / Prefetch): each GPU has two, and a pass whose unit
// range a slot holds (loaded in this step) runs from it without an upload. Any other pass's weights
// are uploaded (chunked, H2D) into the slot used less recently, once that slot's last pass has
// released it (its last compute; backward: also its gradient offload), so a GPU holds at most two
// stages: the computing one and the prefetched next. Assumed: a prefetch whose weights' update is
// not done yet waits for it (several steps show it; the runtime skips such a prefetch and loads
// on demand), and a slot's next upload waits for its gradient offload (the runtime only waits for
// that before zeroing the slot's gradients).
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_PLANNER_SIM_SCHEDULES_H_
#define MOBIUS_HOST_PLANNER_SIM_SCHEDULES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/run/schedule.h"
#include "host/planner/cost_model.h"
#include "host/planner/partition.h"
#include "host/planner/sim/engine.h"
#include "host/planner/sim/internode.h"
#include "host/planner/sim/machine.h"

namespace mobius::planner::sim {

// The schedules and their names: common/run/schedule.h.
using runtime::ParseSchedule;
using runtime::Schedule;
using runtime::ScheduleName;

// One stage, per microbatch where it says so.
struct SimStage {
  double forward_seconds = 0;   // per microbatch
  double backward_seconds = 0;  // per microbatch, recompute included
  double overhead_seconds = 0;  // per pass, added to the pass's first microbatch
  int64_t weight_bytes = 0;     // uploaded once per pass (bf16; LoRA: + fp32 adapters)
  int64_t gradient_bytes = 0;   // offloaded once per step (the profile's dtype; LoRA: adapters')
  int64_t input_bytes = 0;      // per microbatch: activation entering the stage (and its gradient)
  double optimizer_seconds = 0; // CPU Adam for the stage's parameters
  int unit_begin = 0;           // the stage's layer units [unit_begin, unit_end) (roundrobin
  int unit_end = 0;             // matches checkpoints to backward stages by unit)
  int64_t parameters = 0;       // what its CPU optimizer updates (DRAM traffic, SimMachine)
};

// Stages of a partition: sums over units; input_bytes = problem.boundary_bytes except stage 0
// (token ids, taken as 0); overhead = stage_overhead_seconds / 2 per pass; parameters = the units'
// UnitCost::optimizer_parameters (a hand-built problem without them: weight_bytes / 2, the bf16
// weights'), the optimizer time split in proportion to them (full fine-tuning: to weight bytes;
// LoRA: to adapter parameters). forward_seconds is what the stage's forward pass runs
// (PartitionProblem::ForwardPassSeconds: without a skipped head).
std::vector<SimStage> MakeSimStages(const PartitionProblem& problem, const Partition& partition);
// One stage per unit (the ZeRO model's layer granularity), every unit's whole forward.
std::vector<SimStage> MakeUnitSimStages(const PartitionProblem& problem);
// The ZeRO-offload reference's stages: one per unit, with the gradients DeepSpeed moves to the
// host in bf16 (2 bytes/parameter) whatever the problem's gradient dtype
// (`gradient_bytes_per_parameter`, Profile's: 4 for our runtime's fp32 gradients).
std::vector<SimStage> MakeZeroSimStages(const PartitionProblem& problem,
                                        int64_t gradient_bytes_per_parameter);

struct ZeroConfig {
  int micro_steps = 1;   // accumulation micro-steps per step (each GPU: M / (N x micro_steps) each)
  int gathers = 2;       // parameter gathers per layer per micro-step: 2 or 3 (recompute's own)
  bool host_staged_collectives = false;  // ZeRO-Infinity's collectives through host memory
};

enum class Dispatch { kStatic, kPool };
absl::StatusOr<Dispatch> ParseDispatch(const std::string& name);

struct SimConfig {
  Schedule schedule = Schedule::kMobius;
  int num_microbatches = 1;     // M
  std::vector<int> gpu_order;   // topology GPU indices (Mapping::gpu_order); empty: machine order
  bool paper_barrier = false;   // mobius/roundrobin: optimizer after the whole backward
  bool zero_optimizer_barrier = true;  // zero: optimizer after the backward (DeepSpeed)
  int64_t chunk_bytes = int64_t{256} << 20;  // weight/gradient copies in chunks; 0 = whole
  // roundrobin only: the backward partition's stages (MakeSimStages of it), covering the same
  // units as the forward stages. Empty: the forward stages in both passes.
  std::vector<SimStage> backward_stages;
  int steps = 1;                // consecutive steps (mobius, roundrobin; above); resident, zero: 1
  // Steps simulated after the reported ones and not reported. Simulate sets 1 for several steps
  // (simulator.h, "the drain"); callers leave it 0.
  int drain_steps = 0;
  int optimizer_staleness = 0;  // 0 | 1 (mobius, roundrobin)
  Dispatch dispatch = Dispatch::kStatic;  // roundrobin
  // roundrobin: the GPU (topology index) of every pass of every step in stream order; empty:
  // gpu_order[j mod N]. Simulate fills it for pool dispatch.
  std::vector<int> pass_gpus;
  bool one_f_one_b = false;     // resident: 1F1B order (one stage per GPU)
  ZeroConfig zero;
  InterNodeConfig internode;    // mobius, roundrobin: nodes > 1 adds the all-reduces (above)
};

// INVALID_ARGUMENT for no stages, M < 1, a gpu_order or pass_gpus entry not in the machine,
// pass_gpus of the wrong length, backward stages that do not cover the forward stages' units,
// steps outside [1, 64], staleness other than 0 or 1, a bad ZeroConfig, a bad InterNodeConfig
// (ValidateInterNode) or nodes > 1 with the resident or zero schedule.
absl::StatusOr<TaskGraph> BuildTaskGraph(const SimMachine& machine,
                                         const std::vector<SimStage>& stages,
                                         const SimConfig& config);

}  // namespace mobius::planner::sim

#endif  // MOBIUS_HOST_PLANNER_SIM_SCHEDULES_H_
