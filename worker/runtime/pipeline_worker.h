// PipelineWorker: one rank of a pipeline run (`mobius-worker run`): executes its stages of the
// plan, step after step, against the job's shared host store (host_store.h, store_layout.h).
//
// Per step r (run-local, 1-based), a rank runs its tasks in order: forward of its stages
// ascending, then backward of its stages descending (the Mobius schedule: stage s runs on rank
// stage_rank[s], stages cycling over the GPUs).
//   forward   the stage's weights come from the store into one of two device slots (the next
//             task's stage is prefetched into the other slot on the H2D queue while this one
//             computes); for every microbatch the input (token ids for stage 0, otherwise the
//             previous stage's bf16 boundary activation, waited for in the store) runs through the
//             stage's units; the output activation goes to the store for the next stage (and stays
//             there as the activation checkpoint: offloaded, not kept on the device).
//   backward  per microbatch: the stage input again, the stage interior recomputed, the output
//             gradient from the store, backward through the units (each unit recomputes its own
//             internals too), the input gradient to the store; the stage's fp32 gradients,
//             accumulated over microbatches on the device, go to the store in one D2H copy.
//   optimizer a per-rank thread takes each stage as soon as its gradients are in the store: its
//             share of the global gradient norm, then (after every stage's share is in, when
//             clipping needs the global norm) AdamW over the stage's tensors, writing the bf16 copy
//             the next step uploads; the next step's upload of that stage waits only for it.
//   eval      on eval steps (training.eval_every, and the last step), after the rank's stages
//             are updated: the held-out set (the standalone trainer's microbatches) forward
//             through the stages with the new weights, chunked through the boundary slots; the
//             head's rank reports the eval loss; all ranks meet at the end.
// The arithmetic is the standalone trainer's, op for op and in the same order per unit and
// microbatch, so on the CPU backend a pipeline run reproduces it bit-exactly (losses, gradient norm,
// weights); see docs/runtime.md.
//
// Checkpoint and stop (the daemon's shutdown, preemption): when the launcher sets the store's stop
// request, rank 0 reads it at the end of its step r and names r + 1 as the last step. No rank can
// finish step r + 1 before rank 0 starts it (its forward feeds every later stage), so every rank sees
// the answer by then: all ranks meet, rank 0 writes a checkpoint, and Run() returns ABORTED
// ("stopped after step N, checkpoint DIR"); the worker exits with code 3.
//
// Activations are never queued behind weight copies: weights move on the H2D queue, activations on
// the compute queue.
//
// Thread-safety: one caller; Run() starts and joins the optimizer thread itself.
#ifndef MOBIUS_WORKER_RUNTIME_PIPELINE_WORKER_H_
#define MOBIUS_WORKER_RUNTIME_PIPELINE_WORKER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/runtime/run_config.h"
#include "worker/runtime/step_report.h"

namespace mobius::runtime {


class PipelineWorker {
 public:
  // Loads the model (or the checkpoint when resuming), validates the config against it, maps the
  // store, creates the backend (CPU; with link emulation when the config has links) and allocates
  // both slots and the activation buffers, so a device cap that cannot hold two stages fails here
  // with RESOURCE_EXHAUSTED, before any step.
  static absl::StatusOr<std::unique_ptr<PipelineWorker>> Create(const RunConfig& run, int rank);
  ~PipelineWorker();

  // Fills this rank's part of the store, meets the other ranks, then runs every remaining step,
  // calling `on_step` after each. On an error the store's abort word is set so the other ranks stop
  // too; ABORTED when another rank aborted first.
  absl::Status Run(const std::function<void(const WorkerStepReport&)>& on_step);

  struct State;

 private:
  explicit PipelineWorker(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace mobius::runtime

#endif  // MOBIUS_WORKER_RUNTIME_PIPELINE_WORKER_H_
