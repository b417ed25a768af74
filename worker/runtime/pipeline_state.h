// Internal to the pipeline worker (pipeline_worker.h): one rank's state and the pieces that run
// it, split by concern:
//   pipeline_passes.cc     the two weight slots (upload, prefetch) and the stage passes: the
//                          forward of a forward stage, the backward of a backward stage;
//   pipeline_eval.cc       the eval pass (forward only, through the forward stages);
//   pipeline_optimizer.cc  the optimizer thread (norm partials, clipping, AdamW per backward
//                          stage);
//   pipeline_resident.cc   the resident schedule's device-side model state and optimizer;
//   store_fill.cc          the rank's share of the store, from the model or the resume checkpoint;
//   pipeline_checkpoint.cc the checkpoint writer thread (streamed from the store);
//   pipeline_worker.cc     creation and the step loop.
//
// Schedule-independent: a rank runs a list of passes (run_config.h: PassesOfRank), each the
// forward of a forward stage or the backward of a backward stage. For the mobius schedule both
// partitions are the same and a rank's passes are its stages' forwards ascending, then their
// backwards descending; for roundrobin they are its positions of the pass stream.
//
// Threads: the main thread owns everything except the members marked "guarded by mu", which the
// optimizer thread shares; the optimizer thread reads the immutable members (run, layout, ranges).
#ifndef MOBIUS_WORKER_RUNTIME_PIPELINE_STATE_H_
#define MOBIUS_WORKER_RUNTIME_PIPELINE_STATE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/model/adapter.h"
#include "worker/model/unit_runner.h"
#include "worker/optim/adamw.h"
#include "common/run/host_store.h"
#include "worker/runtime/link_emulator.h"
#include "worker/runtime/node_collective.h"
#include "worker/runtime/peer_transport.h"
#include "worker/runtime/pipeline_worker.h"
#include "common/run/run_config.h"
#include "common/run/step_report.h"
#include "common/run/store_layout.h"
#include "worker/train/lora_setup.h"
#include "worker/train/loss_scaler.h"
#include "worker/train/training_setup.h"

namespace mobius::runtime {

using Clock = std::chrono::steady_clock;

inline double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A device slot for one pass's weights (and, for a backward pass, its gradients). A slot is
// identified by the unit range and the weights it holds (W_k: after the run's k-th update), so a
// forward and a backward pass over the same units share it (mobius: the first backward stages of
// a rank need no upload).
//
// One allocation per slot (`arena`), sized for the largest pass of the rank: max over its ranges
// of W + A + G (G only for a range whose backward the rank runs), not max W + max G; a forward
// stage with many units and a backward stage with few then share it (what the planner's kRuntime
// memory model counts, host/planner/estimator.cc). CarveSlot lays a range out in it: weights at
// 0, adapters after them, gradients at the END (so that a range's new weights rarely overlap the
// previous range's gradients still on their way to the store; Upload waits for them where they
// do).
struct Slot {
  backend::DeviceBuffer arena;
  backend::DeviceBuffer weights;   // views into arena: 16-bit weights of `range`
  backend::DeviceBuffer grads;     // fp32 (LoRA: the adapters' gradients); empty: no backward
  backend::DeviceBuffer adapters;  // LoRA: the pass's fp32 adapters (uploaded with the weights)
  StageRange range{-1, -1};
  uint32_t index = 0;  // k of the W_k it holds (ComputeIndex)
  std::unique_ptr<backend::Event> loaded;  // recorded after the weight upload
  std::unique_ptr<backend::Event> saved;   // recorded after the gradient download

  uint64_t used = 0;  // State::slot_clock when last loaded or used: EnsureLoaded evicts the older

  bool Holds(const StageRange& r, uint32_t k) const {
    return range.begin == r.begin && range.end == r.end && index == k;
  }
};

// The resident schedule's model state on the device (pipeline_resident.cc). A resident rank runs
// exactly one stage; its bf16 weights and fp32 gradients live in slots[0] for the whole run (the
// slot's index is always that of the weights the next step computes with), the fp32 master
// weights and Adam moments of the tensors the stage owns live here. The store's copy of that state
// is stale between checkpoints (ResidentWriteBack refreshes it).
struct ResidentStage {
  int stage = 0;  // the rank's stage (forward and backward partition alike)
  // A byte-for-byte mirror of the store's optimizer-state region of the stage's owned tensors
  // (store_layout.h: master, m, v per tensor, grouped by owning unit, so one contiguous range):
  // [optimizer_offset, optimizer_offset + optimizer.size_bytes()) of the store. fp32.
  uint64_t optimizer_offset = 0;
  backend::DeviceBuffer optimizer;
  backend::DeviceBuffer norm;  // [owned chunks] double: the stage's norm partials
  // Tied embeddings with the head on another rank, on the embedding's rank only: the head's fp32
  // gradient of the shared matrix [V, C], received through the store each step.
  backend::DeviceBuffer head_grad;
};

// The boundary-gradient transport of a rank (pipeline_transport.cc, peer_transport.h): gradients
// sent to another rank are first copied (compute queue) into a ring of staging buffers and sent
// from there on `comm`, so a send waiting for its receiver never holds up the compute queue; a
// slot is reused after its previous send completed (event `sent`).
inline constexpr int kTransportRingSlots = 4;
struct TransportState {
  std::unique_ptr<PeerTransport> peer;
  std::unique_ptr<backend::Queue> comm;       // null on a rank that only receives
  std::vector<backend::DeviceBuffer> ring;    // fp32 [mb, T, C] each
  std::vector<std::unique_ptr<backend::Event>> ready, sent;
  uint64_t next = 0;                          // sends so far (ring position)
};

// The checkpoint writer of a rank (pipeline_checkpoint.cc): one job per checkpoint, handled in
// order on its own thread.
struct CheckpointJob {
  uint32_t r = 0;           // run-local step after which it is taken
  int64_t global_step = 0;  // names the directory
  data::LoaderPosition position;
  double loss_scale = 0;    // fp16: the loss scaler after step r (0: none)
  int64_t loss_scale_good_steps = 0;
};
struct CheckpointWriterState {
  checkpoint::CheckpointPlan plan;  // immutable once the thread runs
  checkpoint::SaveOptions options;
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<CheckpointJob> jobs;  // guarded by mu
  uint32_t requested = 0;          // guarded by mu: r of the newest job
  uint32_t done = 0;               // guarded by mu: r of the newest job finished on this rank
  absl::Status error;              // guarded by mu: the first failure (the store is then aborted)
  bool stop = false;               // guarded by mu
  // guarded by mu; rank 0: the newest completed checkpoint (directory, step) not yet reported.
  std::optional<std::pair<std::string, int64_t>> finished;
};

// A backward stage's gradients on their way to the store, or (end_of_step) the mark that the rank
// has handed over every task of step r: with clipping, the held updates of step r may then wait
// for the global norm without blocking a partial sum this thread still owes.
struct OptimizerTask {
  int stage = 0;  // backward stage
  uint32_t r = 0;
  Slot* slot = nullptr;
  bool end_of_step = false;
};

// A step report waiting for its gradient norm (with optimizer staleness the report of step r
// goes out at the end of step r + 1, when the rank no longer waits for step r's updates).
struct PendingReport {
  uint32_t r = 0;
  WorkerStepReport report;
};

struct PipelineWorker::State {
  RunConfig run;
  int rank = 0;
  // This rank's passes in execution order (pool dispatch: every pass of the stream, any of which
  // it may claim).
  std::vector<Pass> passes;
  // The stages this rank owns: it fills and checkpoints the backward stages' model state and runs
  // the eval pass through the forward stages (with static dispatch: the stages of its passes).
  std::vector<int> forward_stages;   // ascending
  std::vector<int> backward_stages;  // ascending
  bool pool = false;                 // PoolDispatch(run)
  uint64_t pool_claim = UINT64_MAX;  // pool: the ticket claimed and not yet run (UINT64_MAX: none)
  bool ran_head = false;             // this step: this rank ran the head's backward (the loss)
  int passes_run = 0;                // this step: passes this rank ran (the report's `passes`)
  train::TrainingStart start;
  // The weights' and activations' 16-bit format (run.training.precision) and, fp16, the loss
  // scaler the run starts with (train/loss_scaler.h); the store's loss_scales carry it on.
  backend::DType half = backend::DType::kBf16;
  train::LossScaler initial_scaler;
  StoreLayout layout;
  std::unique_ptr<HostStore> store;
  std::unique_ptr<LinkEmulator> links;
  std::unique_ptr<backend::Backend> backend;  // rank_backend.h: CPU or CUDA
  std::vector<std::unique_ptr<units::UnitRunner>> runners;  // [unit]; null for units not run here
  // LoRA runs (run.training.adapter): the adapted modules, the adapter tensors and
  // adapter_config.json's facts; the base is frozen (store_layout.h).
  std::optional<train::LoraRun> lora;
  // LoRA dropout of the microbatch being run (MicroBatch in unit_runner.h): the step's key (0: no
  // dropout, as in eval passes) and its first token row in the batch. Main thread.
  uint64_t dropout_key = 0;
  int64_t row_offset = 0;
  std::unique_ptr<backend::Queue> compute, h2d, d2h;
  Slot slots[2];
  int64_t mb = 0, t = 0;
  int head_forward = 0, head_backward = 0;  // the stages holding the head unit
  bool tied = false;
  backend::DeviceBuffer tokens, targets, loss, stage_in, out, workspace;
  std::vector<backend::DeviceBuffer> hidden;  // [j] input of the pass's unit begin + 1 + j
  backend::DeviceBuffer dh[2];                // fp32 boundary gradients, ping-pong
  std::unique_ptr<ResidentStage> resident;    // schedule "resident" only
  std::unique_ptr<TransportState> transport;  // null: every boundary host-staged
  uint64_t slot_clock = 0;
  // A prefetch that could not start when it was asked for (the weights' update was not in the
  // store yet): RetryPrefetch starts it between microbatches of the running pass once the update
  // is there, into slots[slot] (the slot the running pass does not use). Dropped when that slot
  // is loaded with something else or the pass it was for loads (on demand) itself.
  struct DeferredPrefetch {
    StageRange range;
    uint32_t k = 0;
    int slot = 0;
  };
  std::optional<DeferredPrefetch> deferred;
  std::unique_ptr<optim::CpuAdamW> adamw;
  std::optional<optim::LrSchedule> schedule;
  std::unique_ptr<CheckpointWriterState> checkpoints;  // null without a checkpoint directory

  uint32_t eval_seq = 0;  // eval microbatches passed over the run (store_layout.h eval words)

  // Several nodes (RunConfig::nodes): this rank's group with rank `rank` of every other node
  // (null on one node). Its gradients channel is the optimizer thread's, its control channel the
  // main thread's. This node runs microbatches [first_microbatch, + num_microbatches) of every
  // global batch.
  std::unique_ptr<NodeCollective> nodes;
  int64_t first_microbatch = 0;
  uint64_t internode_reported = 0;  // main thread: nodes->sent_bytes() at the last report

  // Per-step accounting (main thread). The byte counters run from one step report to the next, so
  // copies before step 1 (resident's one-time upload) count in step 1's.
  double stall = 0, compute_wait = 0;
  int uploads_on_demand = 0;  // EnsureLoaded found no slot holding the pass's weights
  uint64_t h2d_bytes = 0, d2h_bytes = 0;
  uint64_t peer_bytes = 0;  // activation gradients sent or received over the PeerTransport

  std::deque<PendingReport> reports;  // main thread: not yet sent, in step order
  double optimizer_reported = 0;      // main thread: optimizer_seconds at the last report

  // Optimizer thread.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<OptimizerTask> tasks;  // guarded by mu
  bool stop = false;                // guarded by mu
  absl::Status optimizer_error;     // guarded by mu
  double optimizer_seconds = 0;     // guarded by mu
  // guarded by mu: the global norms this rank summed (it published the last partials of that
  // step; resident: every rank), by run-local step, until reported.
  std::map<uint32_t, double> summed_norms;
  // guarded by mu, fp16: the loss scale and skip of the steps whose norm this rank summed.
  std::map<uint32_t, std::pair<float, bool>> summed_scales;
  uint32_t steps_handed = 0;        // guarded by mu: the newest step whose end_of_step is done

  const StageRange& fwd(int f) const { return ForwardStages(run)[f]; }
  const StageRange& bwd(int b) const { return BackwardStages(run)[b]; }
  const StageRange& range(const Pass& p) const { return p.backward ? bwd(p.stage) : fwd(p.stage); }
  int64_t num_units() const { return static_cast<int64_t>(layout.units.size()); }
  bool runs_head_forward() const;  // whether this rank computes the loss
};

// ---- pipeline_transport.cc (main thread) ----

// Resolves RunConfig::transport with the other ranks (a blocking vote through the store; NCCL
// communicators are made here) and, if a PeerTransport is used, sets up s.transport.
absl::Status SetUpTransport(PipelineWorker::State& s);
// Whether the gradient from backward stage `from_stage` to `to_stage` in step r goes over
// s.transport (set up, and the two stages on different ranks in that step).
bool GradientOverTransport(const PipelineWorker::State& s, int from_stage, int to_stage,
                           uint32_t r);
// Backward stage b's input gradient in `src` to the rank of stage b - 1 in step r (enqueued).
absl::Status SendGradient(PipelineWorker::State& s, int b, uint32_t r,
                          const backend::DeviceBuffer& src);
// Backward stage b's output gradient from the rank of stage b + 1 in step r into `dst` (enqueued
// on compute).
absl::Status ReceiveGradient(PipelineWorker::State& s, int b, uint32_t r,
                             const backend::DeviceBuffer& dst);
// Waits until every send enqueued so far completed (end of a step; errors of the comm queue).
absl::Status DrainTransport(PipelineWorker::State& s);

// ---- pipeline_passes.cc (main thread) ----

// Which weights step r (run-local) computes with: k of W_k, the weights after the run's k-th
// update. r - 1 without optimizer staleness; with staleness 1, r - 2, except for step 1 and after
// a sync step (train::IsSyncStep): r - 1.
uint32_t ComputeIndex(const PipelineWorker::State& s, uint32_t r);
// Waits for a control word, counting the time as stall.
absl::Status Await(PipelineWorker::State& s, int64_t word, uint32_t value);
absl::Status SyncCompute(PipelineWorker::State& s);
// The bytes of a slot that holds `range` (CarveSlot's layout, 256-byte aligned parts).
uint64_t SlotBytes(const PipelineWorker::State& s, const StageRange& range);
// Points slot.weights, .adapters and .grads at `range`'s parts of slot.arena (REQUIRES:
// SlotBytes(range) <= the arena's size).
void CarveSlot(const PipelineWorker::State& s, Slot& slot, const StageRange& range);
// The backward stages whose updates of step r-1 the weights of `range` at step r depend on: those
// overlapping it, and backward stage 0 (the embedding's owner) for a tied head.
std::vector<int> WeightSources(const PipelineWorker::State& s, const StageRange& range);
// The slot holding `range`'s weights W_k, uploading them (after waiting for the k-th update of
// every backward stage they come from) if needed; the compute queue waits for the upload.
absl::StatusOr<Slot*> EnsureLoaded(PipelineWorker::State& s, const StageRange& range, uint32_t k);
// Prefetches `next`'s weights W_k into the slot not used by `current`: now if their update is in
// the store, else as soon as it is (State::deferred, RetryPrefetch).
absl::Status Prefetch(PipelineWorker::State& s, const Slot* current, const StageRange& next,
                      uint32_t k);
// Starts the deferred prefetch if its weights' update has reached the store (a few atomic loads
// when it has not). Called between the microbatches of a pass, on the main thread.
absl::Status RetryPrefetch(PipelineWorker::State& s);
// The forward of forward stage f for every microbatch (activation checkpoints to the store),
// then forward_done. It stops before the head: the head's backward recomputes the head's forward
// anyway, so running it here would only compute the loss twice (a stage of the head alone runs
// nothing).
absl::Status ForwardPass(PipelineWorker::State& s, int f, uint32_t r, const data::Batch& batch);
// The backward of backward stage b for every microbatch (recompute from its checkpoint); its
// gradients go to the store and the stage to the optimizer thread (resident: they stay on the
// device for ResidentUpdate). The head's stage writes each microbatch's loss to `losses` (from the
// head's recomputed forward) and sets ran_head.
absl::Status BackwardPass(PipelineWorker::State& s, int b, uint32_t r, const data::Batch& batch,
                          const std::vector<float>& shares, std::vector<float>& losses);
// LoRA: unit u's adapters in `slot` (its values and gradients), for the unit runner; nullptr
// without LoRA or for a unit without adapters. `views` holds the device views it points to.
struct AdapterViews {
  backend::DeviceBuffer params, grads;
  units::AdapterBuffers buffers;
};
const units::AdapterBuffers* UnitAdapters(const PipelineWorker::State& s, const Slot& slot,
                                          int64_t unit, AdapterViews& views);
// Runs the units of a forward range on one microbatch whose input is already on the device
// (tokens or stage_in; targets for the head); the last unit's output goes to `out` (the loss for
// the head). Calls `after_unit(u, output)` after each unit is enqueued. `moe_stats`: where the
// microbatch's MoE blocks write their routing statistics (the store's, StoreLayout::moe_stats;
// nullptr: not written, as in eval passes).
absl::Status ForwardUnits(
    PipelineWorker::State& s, const StageRange& range, const Slot& slot,
    const std::function<absl::Status(int64_t, const backend::DeviceBuffer&)>& after_unit,
    float* moe_stats = nullptr);

// ---- store_fill.cc (main thread, before the first barrier) ----

// Writes this rank's share of the model state into the store: the master weights (and, resuming,
// the moments) of the tensors its backward stages own, their bf16 upload copies and, for a tied
// model whose embedding it owns, the head's bf16 copy; converted tensor by tensor from the
// memory-mapped model directory (any dtype) or resume checkpoint, whose checksums the ranks verify
// between them. The backward stages of all ranks cover every tensor once.
absl::Status FillStore(PipelineWorker::State& s);

// ---- pipeline_checkpoint.cc ----
//
// Consistency rule: the checkpoint of step r holds every stage's state right after its step-r
// update. Each rank writes its own stages from the store on its writer thread while the next steps
// run and publishes each stage's share (StoreLayout::stage_written_word); the optimizer's next
// update of a stage, on whichever rank runs it, first waits until that share is written
// (AwaitStageWritten), so the state cannot change under the writer; resident ranks copy their
// device state back only once the previous checkpoint is written (AwaitCheckpoints).

// Plans the checkpoint files and starts the writer thread (no-op without a checkpoint directory).
absl::Status StartCheckpointWriter(PipelineWorker::State& s);
// Main thread, after step r's updates of this rank's stages: queue the checkpoint of step r.
void RequestCheckpoint(PipelineWorker::State& s, uint32_t r, int64_t global_step,
                       data::LoaderPosition position);
// Until this rank's writer has finished every requested checkpoint (rank 0: completed it). The
// writer's error, if any.
absl::Status AwaitCheckpoints(PipelineWorker::State& s);
// Optimizer thread, before the update of step r rewrites backward stage b's state: until the
// stage's share of the newest scheduled checkpoint before step r (checkpoint_every; the last
// step's and a stop's checkpoints have no update after them) is written.
absl::Status AwaitStageWritten(PipelineWorker::State& s, int b, uint32_t r);
absl::Status CheckpointError(PipelineWorker::State& s);  // the writer's error so far
// Rank 0: the checkpoint completed since the last call, as (directory, step).
std::optional<std::pair<std::string, int64_t>> TakeFinishedCheckpoint(PipelineWorker::State& s);
// Lets the writer finish its queue and joins it.
void StopCheckpointWriter(PipelineWorker::State& s);

// ---- pipeline_eval.cc (main thread) ----

// Held-out loss with the weights step r left; every rank calls it, ends with a barrier. Returns
// the loss on the rank running the head's forward.
absl::StatusOr<std::optional<float>> EvalPass(PipelineWorker::State& s, uint32_t r);

// ---- pipeline_optimizer.cc ----

// The optimizer thread's body: takes OptimizerTasks until stop (pipeline_worker.h).
void OptimizerLoop(PipelineWorker::State& s);
// Main thread: hands the end of step r to the optimizer thread (after the step's last task).
void HandOverStep(PipelineWorker::State& s, uint32_t r);
// Store addresses of a parameter of `unit`: its fp32 gradient; its bf16 weights W_k.
float* GradOf(const PipelineWorker::State& s, const std::string& name, int64_t unit);
uint16_t* WeightOf(const PipelineWorker::State& s, const std::string& name, int64_t unit,
                   uint32_t k);
// The tensors whose optimizer state backward stage `stage` owns, in HF-name order.
std::vector<const TensorSlot*> OwnedTensors(const PipelineWorker::State& s, int stage);
// The global gradient norm of step r from every tensor's chunk partials in the store, added in
// the standalone trainer's order. REQUIRES: every backward stage published its partials for r.
double GlobalNorm(const PipelineWorker::State& s, uint32_t r);
// fp16 (train/loss_scaler.h). The loss scaler after run-local step r (r = 0: the run's initial
// one), from the store; REQUIRES: step r's norm summed and step r+2's not. Without fp16 a
// disabled scaler.
train::LossScaler ScalerAfter(const PipelineWorker::State& s, uint32_t r);
// The loss scale step r's backward uses (LossScaler's rule: the scaler after step r-1, or r-2
// with optimizer staleness unless step r-1 was a sync step), once that step's norm is summed;
// 1 without fp16. Called by the head's backward (before step r's norm can be summed).
absl::StatusOr<float> StepLossScale(PipelineWorker::State& s, uint32_t r);
// Writes the initial scaler into the store (rank 0, before the ranks' first barrier).
void InitLossScales(PipelineWorker::State& s);

// ---- pipeline_resident.cc (main thread; schedule "resident", s.resident set) ----
//
// Per step r: the passes run from slots[0] (no weight upload); BackwardPass leaves the gradients
// on the device; ResidentUpdate then, on the device: folds in the tied head's gradient of the
// embedding, computes the stage's norm partials (SumSquares per 64 Ki-element chunk, the store's
// partials), combines them with the other ranks' through the store, clips, runs AdamW per owned
// tensor writing the bf16 weights in place in the slot, and (tied) forwards the new bf16 embedding
// to the head's rank. Per step only boundary activations and their gradients, tokens, targets,
// the loss, the norm partials and, for a tied model split across ranks, the shared matrix's head
// gradient (fp32) and new bf16 weights cross the host link.

// Device bytes of the rank's resident model state: the stage's bf16 weights and fp32 gradients
// (the slot; with a tied head's copy of the embedding), the fp32 master, m and v of its owned
// tensors, the norm partials and the head-gradient buffer: ~18 bytes per parameter.
uint64_t ResidentStateBytes(const PipelineWorker::State& s);
// RESOURCE_EXHAUSTED, naming the bytes needed, unless the state plus `activation_bytes` (buffers,
// workspace) fit the device's free memory. Called before anything is allocated.
absl::Status CheckResidentFits(const PipelineWorker::State& s, uint64_t activation_bytes);
// Allocates the optimizer mirror, norm partials and head-gradient buffer (slots[0] is allocated by
// the worker, sized for the stage).
absl::Status ResidentAllocate(PipelineWorker::State& s);
// Once, after the store is filled (from the model or a checkpoint): uploads the stage's bf16
// weights into slots[0] (for step 1) and its optimizer state into the mirror.
absl::Status ResidentLoad(PipelineWorker::State& s);
// After the passes of step r: the device optimizer (above). Publishes grads_ready, norm_ready and
// updated for the stage, records the norm in summed_norms and adds the optimizer's device time to
// optimizer_seconds; afterwards slots[0] holds the weights of step r + 1.
absl::Status ResidentUpdate(PipelineWorker::State& s, uint32_t r);
// Copies the device's master weights, moments and bf16 weights back to the store (before every
// checkpoint), so checkpoints are the mobius schedule's bit for bit.
absl::Status ResidentWriteBack(PipelineWorker::State& s);

}  // namespace mobius::runtime

#endif  // MOBIUS_WORKER_RUNTIME_PIPELINE_STATE_H_
