// PipelineWorker: one rank of a pipeline run (`mobius-worker run`): executes its stages of the
// plan, step after step, against the job's shared host store (host_store.h, store_layout.h).
//
// Per step r (run-local, 1-based), a rank runs its passes in order (run_config.h, PassesOfRank):
//   mobius      the forward of its stages ascending, then their backward descending (stage s on
//               rank stage_rank[s], stages cycling over the GPUs; one partition for both passes);
//   roundrobin  its positions j of the pass stream (forward stages 0 .. S_F-1, then backward
//               stages S_B-1 .. 0, pass j on rank pass_rank[j] = j mod N), over separate forward
//               and backward partitions; with dispatch "pool" a rank instead claims the next pass
//               of the stream from a ticket counter in the store whenever it is ready for one
//               (RunPoolPasses): the pass goes to the next free GPU;
//   resident    (S == G) mobius's passes over its one stage, which stays on the device with its
//               optimizer state for the whole run: no weight uploads, no gradient offload, AdamW
//               on the device (pipeline_state.h, ResidentUpdate); the device state is copied back
//               to the store before every checkpoint. Otherwise as below.
//   weights   a pass's weights come from the store into one of two device slots (the next pass's
//             weights are prefetched into the other slot on the H2D queue while this one
//             computes); a forward and a backward pass over the same units share the slot. Step r
//             computes with W_k, the weights after the run's k-th update: k = r - 1, or with
//             training.optimizer_staleness 1, k = r - 2 except after a sync step (ComputeIndex;
//             the store then keeps two bf16 copies, W_k in copy k mod 2).
//   forward   (forward stage f) for every microbatch the input (token ids for unit 0, otherwise
//             the activation checkpoint at its first unit, waited for in the store) runs through
//             the stage's units; every unit output that is the input of a checkpoint unit (one
//             that starts a forward or a backward stage) goes to the store: the stage's output for
//             the next forward stage and, in roundrobin, interior units where a backward stage
//             starts. Checkpoints are offloaded, never kept on the device. Then forward_done.
//   backward  (backward stage b) per microbatch: the checkpoint at its first unit, the stage
//             interior recomputed, the output gradient from backward stage b+1 (or the loss),
//             backward through the units (each unit recomputes its own internals too), the input
//             gradient to the store; the stage's fp32 gradients, accumulated over microbatches on
//             the device, go to the store in one D2H copy.
//   optimizer a per-rank thread takes each backward stage this rank ran as soon as its gradients
//             are in the store: its share of the global gradient norm (whoever publishes a step's last
//             share sums the norm into the store), then (with clipping, once the main thread has
//             handed over the step and the norm is summed) AdamW over the tensors its units own,
//             writing W_r's bf16 copy, once every forward pass of step r that reads the copy it
//             overwrites is done (forward_done). An upload of W_k waits for the k-th update of
//             every backward stage the range's weights come from (and of the embedding's, for a
//             tied head); a stage's step-r gradient lands in the store only after its step r-1
//             update (one gradient buffer per stage).
//   eval      on eval steps (training.eval_every, and the last step), after the rank's backward
//             stages are updated: the held-out set (the standalone trainer's microbatches) forward
//             through the forward stages with the new weights, chunked through the checkpoint slots
//             at forward stage boundaries; the head's rank reports the eval loss; all ranks meet.
// The arithmetic is the standalone trainer's, op for op and in the same order per unit and
// microbatch, so on the CPU backend a pipeline run reproduces it bit-exactly (losses, gradient norm,
// weights); see docs/runtime.md.
//
//   step end  a rank's step r ends when its own backward stages (those it fills and checkpoints)
//             have their step-r update; with staleness, outside sync steps, at once, so step r's
//             updates overlap step r+1. Its report of step r goes out once its optimizer thread
//             is through step r (with staleness usually at the end of step r+1), with the
//             gradient norm if this rank summed it.
//
// Checkpoint and stop (the daemon's shutdown, preemption): when the launcher sets the store's stop
// request, rank 0 reads it at the end of its step r, names r + 1 as the last step and publishes
// that step r is decided (decided_word); every other rank waits for step r-1's decision before it
// ends step r, so all ranks see the answer by the end of step r + 1 (with pool dispatch rank 0
// need not run the next step's first pass): all ranks meet, rank 0 writes a checkpoint, and Run()
// returns ABORTED ("stopped after step N, checkpoint DIR"); the worker exits with code 3. With
// staleness the stop's checkpoint step is a sync step, which an uninterrupted run would not have
// had: the resumed run differs from it from that step on (scheduled checkpoints do not).
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
#include "common/run/run_config.h"
#include "common/run/step_report.h"

namespace mobius::runtime {


class PipelineWorker {
 public:
  // Loads the model (or the checkpoint when resuming), validates the config against it, maps the
  // store, creates the backend (CPU; with link emulation when the config has links) and allocates
  // both slots and the activation buffers, so a device cap that cannot hold two stages fails here
  // with RESOURCE_EXHAUSTED, before any step. Resident: one slot plus the stage's master weights
  // and Adam moments (~18 bytes per parameter); RESOURCE_EXHAUSTED names the bytes needed.
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
