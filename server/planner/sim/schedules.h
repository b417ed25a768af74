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
//               (overlapped). Backward-stage optimizer time is its share of weight bytes.
//   resident    no swapping: weights stay on the GPUs (no uploads, no gradient offload, optimizer
//               on the GPU, not modelled); checkpoints stay on the GPU; only boundary activations
//               move between GPUs.
//   zero        ZeRO-3-offload reference (data parallel): microbatch m on GPU m mod N; every GPU
//               uploads every stage's weights in forward and in backward (~N x 4P bytes of H2D per
//               step, double-buffered; no slot reuse: ZeRO-3 gathers a layer's parameters again
//               for its backward), computes its microbatches, offloads its gradients; the
//               host reduces them and runs the optimizer (after the backward by default, like
//               DeepSpeed). When every pair has NVLink, each GPU uploads 1/N and the rest is
//               all-gathered over NVLink; gradients are reduce-scattered over NVLink and 1/N goes
//               D2H. Activations stay on the GPU. Pass per-unit stages for layer granularity.
//
// Weight slots (mobius, roundrobin), as the runtime uses them (worker/runtime/pipeline_worker.cc,
// RunPasses; pipeline_passes.cc, EnsureLoaded / Prefetch): each GPU has two, and a pass whose unit
// range a slot holds (loaded in this step) runs from it without an upload. Any other pass's weights
// are uploaded (chunked, H2D) into the slot used less recently, once that slot's last pass has
// released it (its last compute; backward: also its gradient offload), so a GPU holds at most two
// stages: the computing one and the prefetched next. Assumed: the runtime always prefetches (it
// skips a prefetch whose weights' update from the previous step is not done yet, which a single
// simulated step cannot show), and a slot's next upload waits for its gradient offload (the
// runtime only waits for that before zeroing the slot's gradients).
//
// Pure; thread-safe.
#ifndef MOBIUS_SERVER_PLANNER_SIM_SCHEDULES_H_
#define MOBIUS_SERVER_PLANNER_SIM_SCHEDULES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/run/schedule.h"
#include "server/planner/cost_model.h"
#include "server/planner/partition.h"
#include "server/planner/sim/engine.h"
#include "server/planner/sim/machine.h"

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
  int64_t weight_bytes = 0;     // bf16, uploaded once per pass
  int64_t gradient_bytes = 0;   // bf16, offloaded once per step
  int64_t input_bytes = 0;      // per microbatch: activation entering the stage (and its gradient)
  double optimizer_seconds = 0; // CPU Adam for the stage's parameters
  int unit_begin = 0;           // the stage's layer units [unit_begin, unit_end) (roundrobin
  int unit_end = 0;             // matches checkpoints to backward stages by unit)
};

// Stages of a partition: sums over units; input_bytes = problem.boundary_bytes except stage 0
// (token ids, taken as 0); overhead = stage_overhead_seconds / 2 per pass; optimizer time split in
// proportion to weight bytes.
std::vector<SimStage> MakeSimStages(const PartitionProblem& problem, const Partition& partition);
// One stage per unit (the ZeRO model's layer granularity).
std::vector<SimStage> MakeUnitSimStages(const PartitionProblem& problem);
// The ZeRO-offload reference's stages: one per unit, with the gradients DeepSpeed moves to the
// host in bf16 (2 bytes/parameter) whatever the problem's gradient dtype
// (`gradient_bytes_per_parameter`, Profile's: 4 for our runtime's fp32 gradients).
std::vector<SimStage> MakeZeroSimStages(const PartitionProblem& problem,
                                        int64_t gradient_bytes_per_parameter);

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
};

// INVALID_ARGUMENT for no stages, M < 1, a gpu_order entry not in the machine, or backward stages
// that do not cover the forward stages' units.
absl::StatusOr<TaskGraph> BuildTaskGraph(const SimMachine& machine,
                                         const std::vector<SimStage>& stages,
                                         const SimConfig& config);

}  // namespace mobius::planner::sim

#endif  // MOBIUS_SERVER_PLANNER_SIM_SCHEDULES_H_
