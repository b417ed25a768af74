// Streamed checkpoints (pipeline_state.h, docs/runtime.md "Checkpoints"): every rank writes its
// own stages' master weights, moments and bf16 weights from the store straight into the
// checkpoint's files (checkpoint_writer.h), on a writer thread of its own, while training goes on;
// rank 0 creates the files first and, once every rank has written its share, makes the checkpoint
// durable and complete. The optimizer's next update of a stage waits until the stage is written,
// so a checkpoint of step r holds exactly the state after step r.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "worker/checkpoint/adapter_checkpoint.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/runtime/pipeline_state.h"

namespace mobius::runtime {

using State = PipelineWorker::State;

namespace {

std::string Tag(const State& s) { return absl::StrCat(s.store->creator_pid()); }

// This rank's share of checkpoint `job`: its backward stages, the last one first (the next step's
// backward updates them in that order), each published to the optimizer once written.
// LoRA: only the mark that its stages hold step r's state (rank 0 writes the small adapters).
absl::Status WriteShare(State& s, const CheckpointJob& job) {
  if (s.lora) {
    s.store->Publish(s.layout.checkpoint_written_word(s.rank), job.r);
    return absl::OkStatus();
  }
  const Clock::time_point start = Clock::now();
  CheckpointWriterState& w = *s.checkpoints;
  const std::string& root = s.run.training.checkpoint_dir;
  if (s.rank == 0) {
    MOBIUS_RETURN_IF_ERROR(
        checkpoint::CreateCheckpointFiles(root, w.plan, job.global_step, Tag(s)));
    s.store->Publish(s.layout.checkpoint_files_word(), job.r);
  } else {
    MOBIUS_RETURN_IF_ERROR(s.store->WaitAtLeast(s.layout.checkpoint_files_word(), job.r));
  }
  MOBIUS_ASSIGN_OR_RETURN(
      std::unique_ptr<checkpoint::CheckpointTensorWriter> writer,
      checkpoint::CheckpointTensorWriter::Open(
          checkpoint::PartialCheckpointDir(root, job.global_step, Tag(s)), w.plan));
  for (auto b = s.backward_stages.rbegin(); b != s.backward_stages.rend(); ++b) {
    for (const TensorSlot* t : OwnedTensors(s, *b)) {
      MOBIUS_RETURN_IF_ERROR(writer->WriteTensor(t->name, s.store->at<float>(t->master),
                                                 s.store->at<float>(t->m),
                                                 s.store->at<float>(t->v)));
    }
    s.store->Publish(s.layout.stage_written_word(*b), job.r);
  }
  s.store->Publish(s.layout.checkpoint_written_word(s.rank), job.r);
  const double seconds = Since(start);
  LOG(INFO) << absl::StrFormat(
      "rank %d: wrote its share of the step-%d checkpoint: %.1f MB in %.2f s (%.0f MB/s)", s.rank,
      job.global_step, writer->bytes_written() / 1e6, seconds,
      seconds > 0 ? writer->bytes_written() / 1e6 / seconds : 0.0);
  return absl::OkStatus();
}

// LoRA, rank 0, once every rank's stages hold step r's state: copies every adapter's values and
// moments out of the store, lets the optimizers go on (stage_written), and writes the PEFT
// adapter checkpoint (adapter_checkpoint.h) from the copy.
absl::Status FinishLora(State& s, const CheckpointJob& job) {
  const Clock::time_point start = Clock::now();
  reference::Parameters master, m, v;
  for (const auto& [name, shape] : s.lora->shapes) {
    const TensorSlot& t = s.layout.tensors.at(name);
    const size_t n = static_cast<size_t>(t.num_elements);
    for (auto [set, offset] : {std::pair{&master, t.master}, {&m, t.m}, {&v, t.v}}) {
      reference::Tensor& copy = set->tensors[name];
      copy.shape = shape;
      const float* from = s.store->at<float>(offset);
      copy.data.assign(from, from + n);
    }
  }
  for (int b = 0; b < s.layout.num_backward_stages; ++b) {
    s.store->Publish(s.layout.stage_written_word(b), job.r);
  }
  const train::TrainerOptions& o = s.run.training;
  MOBIUS_ASSIGN_OR_RETURN(
      std::string dir,
      checkpoint::SaveAdapterCheckpoint(
          o.checkpoint_dir, s.lora->info, s.lora->shapes, {&master, &m, &v},
          train::CheckpointState(o, job.global_step, job.position, job.loss_scale,
                                 job.loss_scale_good_steps),
          s.checkpoints->options.copy_files, o.checkpoint_keep_last));
  LOG(INFO) << absl::StrFormat("checkpoint %s complete (adapters, %.2f s)", dir, Since(start));
  CheckpointWriterState& w = *s.checkpoints;
  std::lock_guard<std::mutex> lock(w.mu);
  w.finished = {dir, job.global_step};
  return absl::OkStatus();
}

// Rank 0, after its own share: waits for every rank's, then completes the checkpoint.
absl::Status Finish(State& s, const CheckpointJob& job) {
  CheckpointWriterState& w = *s.checkpoints;
  for (int rank = 0; rank < s.run.num_workers; ++rank) {
    MOBIUS_RETURN_IF_ERROR(s.store->WaitAtLeast(s.layout.checkpoint_written_word(rank), job.r));
  }
  if (s.lora) return FinishLora(s, job);
  const train::TrainerOptions& o = s.run.training;
  const Clock::time_point start = Clock::now();
  MOBIUS_ASSIGN_OR_RETURN(
      std::string dir,
      checkpoint::FinishCheckpoint(o.checkpoint_dir, s.start.config, w.plan,
                                   train::CheckpointState(o, job.global_step, job.position, job.loss_scale,
                                 job.loss_scale_good_steps),
                                   w.options, Tag(s)));
  LOG(INFO) << absl::StrFormat("checkpoint %s complete (%.1f MB; fsync, checksums, rename %.2f s)",
                               dir, w.plan.total_bytes() / 1e6, Since(start));
  std::lock_guard<std::mutex> lock(w.mu);
  w.finished = {dir, job.global_step};
  return absl::OkStatus();
}

void WriterLoop(State& s) {
  CheckpointWriterState& w = *s.checkpoints;
  while (true) {
    CheckpointJob job;
    {
      std::unique_lock<std::mutex> lock(w.mu);
      w.cv.wait(lock, [&] { return w.stop || !w.jobs.empty(); });
      if (w.jobs.empty()) return;
      job = w.jobs.front();
    }
    absl::Status st = WriteShare(s, job);
    if (st.ok() && s.rank == 0) st = Finish(s, job);
    {
      std::lock_guard<std::mutex> lock(w.mu);
      w.jobs.pop_front();
      if (st.ok()) w.done = job.r;
      if (!st.ok() && w.error.ok()) w.error = st;
    }
    w.cv.notify_all();
    if (!st.ok()) {
      // Every rank stops now (no peer waits on a share that will not come); the main thread
      // reports this error rather than the ABORTED waits it causes.
      if (!absl::IsAborted(st)) LOG(ERROR) << "rank " << s.rank << ": checkpoint: " << st;
      s.store->Abort(3);
      return;
    }
  }
}

}  // namespace

absl::Status StartCheckpointWriter(State& s) {
  const train::TrainerOptions& o = s.run.training;
  // Several nodes: node 0 writes (every node holds the same state after each update).
  if (o.checkpoint_dir.empty() || s.run.nodes.rank != 0) return absl::OkStatus();
  auto w = std::make_unique<CheckpointWriterState>();
  w->options = train::CheckpointSaveOptions(o, s.start.config_json);
  if (!s.lora) {  // LoRA: the adapters are written whole by rank 0 (FinishLora)
    MOBIUS_ASSIGN_OR_RETURN(w->plan, checkpoint::PlanCheckpoint(s.start.config, w->options,
                                                                /*has_optimizer_state=*/true));
  }
  s.checkpoints = std::move(w);
  s.checkpoints->thread = std::thread([&s] { WriterLoop(s); });
  return absl::OkStatus();
}

void RequestCheckpoint(State& s, uint32_t r, int64_t global_step, data::LoaderPosition position) {
  CheckpointWriterState& w = *s.checkpoints;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    // fp16: the scaler after step r (its norm is summed: the step's updates are done).
    const train::LossScaler scaler = ScalerAfter(s, r);
    w.jobs.push_back({r, global_step, position, scaler.enabled() ? scaler.scale() : 0.0,
                      scaler.good_steps()});
    w.requested = r;
  }
  w.cv.notify_all();
}

absl::Status AwaitCheckpoints(State& s) {
  if (s.checkpoints == nullptr) return absl::OkStatus();
  CheckpointWriterState& w = *s.checkpoints;
  std::unique_lock<std::mutex> lock(w.mu);
  w.cv.wait(lock, [&] { return w.done >= w.requested || !w.error.ok(); });
  return w.error;
}

absl::Status AwaitStageWritten(State& s, int b, uint32_t r) {
  const train::TrainerOptions& o = s.run.training;
  if (o.checkpoint_dir.empty() || o.checkpoint_every <= 0 || s.checkpoints == nullptr) {
    return absl::OkStatus();
  }
  // The newest multiple of checkpoint_every before the update's (global) step, if in this run.
  const int64_t global = s.start.step + r;
  const int64_t newest = (global - 1) / o.checkpoint_every * o.checkpoint_every;
  if (newest <= s.start.step) return absl::OkStatus();
  return s.store->WaitAtLeast(s.layout.stage_written_word(b),
                              static_cast<uint32_t>(newest - s.start.step));
}

absl::Status CheckpointError(State& s) {
  if (s.checkpoints == nullptr) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(s.checkpoints->mu);
  return s.checkpoints->error;
}

std::optional<std::pair<std::string, int64_t>> TakeFinishedCheckpoint(State& s) {
  if (s.checkpoints == nullptr) return std::nullopt;
  std::lock_guard<std::mutex> lock(s.checkpoints->mu);
  return std::exchange(s.checkpoints->finished, std::nullopt);
}

void StopCheckpointWriter(State& s) {
  if (s.checkpoints == nullptr || !s.checkpoints->thread.joinable()) return;
  CheckpointWriterState& w = *s.checkpoints;
  {
    std::lock_guard<std::mutex> lock(w.mu);
    w.stop = true;
  }
  w.cv.notify_all();
  w.thread.join();
}

}  // namespace mobius::runtime
