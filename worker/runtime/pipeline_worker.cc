#include "worker/runtime/pipeline_worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/numeric/bf16.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/model/unit_runner.h"
#include "worker/optim/adamw.h"
#include "worker/runtime/host_store.h"
#include "worker/runtime/link_emulator.h"
#include "worker/runtime/numa_affinity.h"
#include "worker/runtime/store_layout.h"
#include "worker/train/training_setup.h"

namespace mobius::runtime {

using backend::DeviceBuffer;
using Clock = std::chrono::steady_clock;

namespace {

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Slot {
  DeviceBuffer weights;  // bf16, the largest stage of this rank
  DeviceBuffer grads;    // fp32
  int stage = -1;
  uint32_t version = 0;  // run-local step whose weights it holds
  std::unique_ptr<backend::Event> loaded;  // recorded after the weight upload
  std::unique_ptr<backend::Event> saved;   // recorded after the gradient download
};

struct OptimizerTask {
  int stage = 0;
  uint32_t r = 0;
  Slot* slot = nullptr;
};

}  // namespace

struct PipelineWorker::State {
  RunConfig run;
  int rank = 0;
  std::vector<int> stages;  // this rank's, ascending
  train::TrainingStart start;
  StoreLayout layout;
  std::unique_ptr<HostStore> store;
  std::unique_ptr<LinkEmulator> links;
  std::unique_ptr<backend::CpuBackend> backend;
  std::vector<std::unique_ptr<units::UnitRunner>> runners;  // [unit]; null for other ranks' units
  std::unique_ptr<backend::Queue> compute, h2d, d2h;
  Slot slots[2];
  int64_t mb = 0, t = 0;
  int head_stage = 0, embedding_stage = 0;
  bool tied = false;
  DeviceBuffer tokens, targets, loss, stage_in, out, workspace;
  std::vector<DeviceBuffer> hidden;  // [j] input of the stage's unit begin + 1 + j
  DeviceBuffer dh[2];                // fp32 boundary gradients, ping-pong
  std::unique_ptr<optim::CpuAdamW> adamw;
  std::optional<optim::LrSchedule> schedule;

  uint32_t eval_seq = 0;  // eval microbatches passed over the run (store_layout.h eval words)

  // Per-step accounting (main thread).
  double stall = 0, compute_wait = 0;
  uint64_t h2d_bytes = 0, d2h_bytes = 0;

  // Optimizer thread.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<OptimizerTask> tasks;
  bool stop = false;
  absl::Status optimizer_error;
  double optimizer_seconds = 0;  // guarded by mu
  double grad_norm = 0;          // guarded by mu
  uint32_t norm_step = 0;        // guarded by mu: the run-local step grad_norm belongs to

  const StageRange& range(int s) const { return run.stages[s]; }
  int units_in(int s) const { return static_cast<int>(range(s).end - range(s).begin); }
};

namespace {

using State = PipelineWorker::State;

// Waits for a control word, counting the time as stall.
absl::Status Await(State& s, int64_t word, uint32_t value) {
  if (s.store->Load(word) >= value) return absl::OkStatus();
  const Clock::time_point t0 = Clock::now();
  absl::Status st = s.store->WaitAtLeast(word, value);
  s.stall += Since(t0);
  return st;
}

absl::Status SyncCompute(State& s) {
  const Clock::time_point t0 = Clock::now();
  absl::Status st = s.backend->Synchronize(*s.compute);
  s.compute_wait += Since(t0);
  return st;
}

// Stages whose updates the weights of stage `st` depend on (its own, and the embedding's for a
// tied head).
std::vector<int> WeightSources(const State& s, int st) {
  std::vector<int> out = {st};
  if (s.tied && st == s.head_stage && s.embedding_stage != st) out.push_back(s.embedding_stage);
  return out;
}

bool WeightsReady(const State& s, int st, uint32_t r) {
  for (int src : WeightSources(s, st)) {
    if (s.store->Load(s.layout.updated_word(src)) < r - 1) return false;
  }
  return true;
}

// Starts the upload of stage `st`'s weights for step r into `slot` on the H2D queue.
absl::Status Upload(State& s, Slot& slot, int st, uint32_t r) {
  const StageRange& range = s.range(st);
  const uint64_t bytes = s.layout.stage_weight_bytes(range);
  // The slot's gradients may still be on their way to the store; the weights may be overwritten
  // only after the compute queue is done with them (the caller synchronised it).
  MOBIUS_RETURN_IF_ERROR(s.backend->CopyToDevice(
      *s.h2d, s.store->at<uint8_t>(s.layout.unit_weights[range.begin]), slot.weights, 0, bytes));
  MOBIUS_RETURN_IF_ERROR(s.backend->Record(*s.h2d, *slot.loaded));
  s.h2d_bytes += bytes;
  slot.stage = st;
  slot.version = r;
  return absl::OkStatus();
}

// The slot holding stage `st` at step r, uploading it (after waiting for its update) if needed.
// `keep` is the slot of the task running now, which must not be overwritten.
absl::StatusOr<Slot*> EnsureLoaded(State& s, int st, uint32_t r) {
  for (Slot& slot : s.slots) {
    if (slot.stage == st && slot.version == r) {
      MOBIUS_RETURN_IF_ERROR(s.backend->Wait(*s.compute, *slot.loaded));
      return &slot;
    }
  }
  for (int src : WeightSources(s, st)) {
    MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.updated_word(src), r - 1));
  }
  // Replace the slot least recently loaded (the other one may hold a prefetch for later).
  Slot& slot = s.slots[0].version <= s.slots[1].version ? s.slots[0] : s.slots[1];
  MOBIUS_RETURN_IF_ERROR(Upload(s, slot, st, r));
  MOBIUS_RETURN_IF_ERROR(s.backend->Wait(*s.compute, *slot.loaded));
  return &slot;
}

// Prefetches the next task's stage into the slot not used by `current`, if its weights are ready.
absl::Status Prefetch(State& s, const Slot* current, int next_stage, uint32_t r) {
  for (const Slot& slot : s.slots) {
    if (slot.stage == next_stage && slot.version == r) return absl::OkStatus();
  }
  if (!WeightsReady(s, next_stage, r)) return absl::OkStatus();  // loaded on demand later
  Slot& other = current == &s.slots[0] ? s.slots[1] : s.slots[0];
  return Upload(s, other, next_stage, r);
}

DeviceBuffer UnitWeights(const State& s, const Slot& slot, int64_t unit) {
  const int64_t begin = s.range(slot.stage).begin;
  return backend::DeviceView(slot.weights, s.layout.unit_weights[unit] - s.layout.unit_weights[begin],
                             s.layout.units[unit].weight_bytes());
}

DeviceBuffer UnitGrads(const State& s, const Slot& slot, int64_t unit) {
  const int64_t begin = s.range(slot.stage).begin;
  return backend::DeviceView(slot.grads, s.layout.unit_grads[unit] - s.layout.unit_grads[begin],
                             s.layout.units[unit].grad_bytes());
}

// Puts microbatch m's stage input (and the head's targets) on the device.
absl::Status UploadInput(State& s, int st, int m, uint32_t r, const data::Batch& batch) {
  const uint64_t n = static_cast<uint64_t>(s.mb * s.t);
  if (st == 0) {
    MOBIUS_RETURN_IF_ERROR(
        s.backend->CopyToDevice(*s.compute, batch.tokens.data() + m * n, s.tokens, 0, 4 * n));
    s.h2d_bytes += 4 * n;
  } else {
    MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.act_ready_word(st - 1, m), r));
    const uint64_t bytes = 2 * s.layout.boundary_elements;
    MOBIUS_RETURN_IF_ERROR(s.backend->CopyToDevice(
        *s.compute, s.store->at<uint8_t>(s.layout.activation_offset(st - 1, m)), s.stage_in, 0,
        bytes));
    s.h2d_bytes += bytes;
  }
  if (st == s.head_stage) {
    MOBIUS_RETURN_IF_ERROR(
        s.backend->CopyToDevice(*s.compute, batch.targets.data() + m * n, s.targets, 0, 4 * n));
    s.h2d_bytes += 4 * n;
  }
  return absl::OkStatus();
}

units::MicroBatch Micro(const State& s, int st, int64_t unit) {
  const int64_t begin = s.range(st).begin;
  const void* input = unit == 0       ? s.tokens.data()
                      : unit == begin ? s.stage_in.data()
                                      : s.hidden[unit - begin - 1].data();
  const bool head = unit == static_cast<int64_t>(s.layout.units.size()) - 1;
  return {s.mb, s.t, input, head ? static_cast<const int32_t*>(s.targets.data()) : nullptr};
}

absl::Status ForwardStage(State& s, int st, uint32_t r, const data::Batch& batch,
                          std::vector<float>& losses) {
  const StageRange range = s.range(st);
  MOBIUS_ASSIGN_OR_RETURN(Slot * slot, EnsureLoaded(s, st, r));
  const int num_units = static_cast<int>(s.layout.units.size());
  for (int m = 0; m < s.layout.num_microbatches; ++m) {
    MOBIUS_RETURN_IF_ERROR(UploadInput(s, st, m, r, batch));
    for (int64_t u = range.begin; u < range.end; ++u) {
      void* out = u == num_units - 1    ? s.loss.data()
                  : u == range.end - 1 ? s.out.data()
                                       : s.hidden[u - range.begin].data();
      MOBIUS_RETURN_IF_ERROR(
          s.runners[u]->Forward(*s.compute, Micro(s, st, u), UnitWeights(s, *slot, u), out,
                                s.workspace));
    }
    if (st == s.head_stage) {
      MOBIUS_RETURN_IF_ERROR(s.backend->CopyToHost(*s.compute, s.loss, 0, &losses[m], 4));
      MOBIUS_RETURN_IF_ERROR(SyncCompute(s));
    } else {
      const uint64_t bytes = 2 * s.layout.boundary_elements;
      MOBIUS_RETURN_IF_ERROR(s.backend->CopyToHost(
          *s.compute, s.out, 0, s.store->at<uint8_t>(s.layout.activation_offset(st, m)), bytes));
      s.d2h_bytes += bytes;
      MOBIUS_RETURN_IF_ERROR(SyncCompute(s));
      s.store->Publish(s.layout.act_ready_word(st, m), r);
    }
  }
  return absl::OkStatus();
}

absl::Status BackwardStage(State& s, int st, uint32_t r, const data::Batch& batch,
                           const std::vector<float>& shares) {
  const StageRange range = s.range(st);
  MOBIUS_ASSIGN_OR_RETURN(Slot * slot, EnsureLoaded(s, st, r));
  // The slot's previous gradients must have reached the store before they are zeroed.
  MOBIUS_RETURN_IF_ERROR(s.backend->Wait(*s.compute, *slot->saved));
  MOBIUS_RETURN_IF_ERROR(s.backend->Zero(
      *s.compute, {.dst = slot->grads.data(), .bytes = s.layout.stage_grad_bytes(range)}));
  const int num_units = static_cast<int>(s.layout.units.size());
  const uint64_t hidden_bytes = 4 * s.layout.boundary_elements;
  for (int m = 0; m < s.layout.num_microbatches; ++m) {
    MOBIUS_RETURN_IF_ERROR(UploadInput(s, st, m, r, batch));
    // Recompute the stage interior: the inputs of units begin+1 .. end-1.
    for (int64_t u = range.begin; u + 1 < range.end; ++u) {
      MOBIUS_RETURN_IF_ERROR(s.runners[u]->Forward(*s.compute, Micro(s, st, u),
                                                   UnitWeights(s, *slot, u),
                                                   s.hidden[u - range.begin].data(), s.workspace));
    }
    int cur = 0;  // dh[cur] holds d(loss)/d(output) of the unit about to run backward
    if (st != s.head_stage) {
      MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.dgrad_ready_word(st, m), r));
      MOBIUS_RETURN_IF_ERROR(s.backend->CopyToDevice(
          *s.compute, s.store->at<uint8_t>(s.layout.dgrad_offset(st, m)), s.dh[cur], 0,
          hidden_bytes));
      s.h2d_bytes += hidden_bytes;
    }
    for (int64_t u = range.end - 1; u >= range.begin; --u) {
      const float* dout =
          u == num_units - 1 ? nullptr : static_cast<const float*>(s.dh[cur].data());
      float* dinp = u > 0 ? static_cast<float*>(s.dh[1 - cur].data()) : nullptr;
      MOBIUS_RETURN_IF_ERROR(s.runners[u]->Backward(
          *s.compute, Micro(s, st, u), UnitWeights(s, *slot, u), UnitGrads(s, *slot, u), dout,
          dinp, shares[m], s.workspace, /*recompute=*/true));
      cur = 1 - cur;
    }
    if (st > 0) {
      MOBIUS_RETURN_IF_ERROR(s.backend->CopyToHost(
          *s.compute, s.dh[cur], 0, s.store->at<uint8_t>(s.layout.dgrad_offset(st - 1, m)),
          hidden_bytes));
      s.d2h_bytes += hidden_bytes;
      MOBIUS_RETURN_IF_ERROR(SyncCompute(s));
      s.store->Publish(s.layout.dgrad_ready_word(st - 1, m), r);
    }
  }
  MOBIUS_RETURN_IF_ERROR(SyncCompute(s));
  // Gradients to the store on the D2H queue; the optimizer thread waits for the copy.
  std::unique_ptr<backend::Event> done;
  MOBIUS_ASSIGN_OR_RETURN(done, s.backend->CreateEvent());
  MOBIUS_RETURN_IF_ERROR(s.backend->Record(*s.compute, *done));
  MOBIUS_RETURN_IF_ERROR(s.backend->Wait(*s.d2h, *done));
  const uint64_t bytes = s.layout.stage_grad_bytes(range);
  MOBIUS_RETURN_IF_ERROR(s.backend->CopyToHost(
      *s.d2h, slot->grads, 0, s.store->at<uint8_t>(s.layout.unit_grads[range.begin]), bytes));
  MOBIUS_RETURN_IF_ERROR(s.backend->Record(*s.d2h, *slot->saved));
  s.d2h_bytes += bytes;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.tasks.push_back({st, r, slot});
  }
  s.cv.notify_one();
  return absl::OkStatus();
}

// The eval set as the standalone trainer evaluates it (StandaloneTrainer::EvalLoss): microbatches
// of exactly MB rows, a short tail padded with ignored rows, those without a target skipped.
struct EvalMicrobatch {
  std::vector<int32_t> tokens, targets;
  int64_t count = 0;  // counted targets
};

absl::StatusOr<std::vector<EvalMicrobatch>> EvalMicrobatches(const State& s) {
  MOBIUS_ASSIGN_OR_RETURN(std::vector<data::Batch> batches, s.start.loader->EvalBatches());
  std::vector<EvalMicrobatch> out;
  const int64_t mb = s.mb, t = s.t;
  for (const data::Batch& b : batches) {
    for (int64_t row = 0; row < b.b; row += mb) {
      const int64_t rows = std::min(mb, b.b - row);
      EvalMicrobatch e;
      e.tokens.assign(static_cast<size_t>(mb * t), 0);
      e.targets.assign(e.tokens.size(), data::kIgnoreIndex);
      std::copy_n(b.tokens.begin() + row * t, rows * t, e.tokens.begin());
      std::copy_n(b.targets.begin() + row * t, rows * t, e.targets.begin());
      for (int32_t x : e.targets) e.count += x != data::kIgnoreIndex;
      if (e.count > 0) out.push_back(std::move(e));
    }
  }
  return out;
}

// Held-out loss with the weights step r left (forward only, stages in order, every rank the same
// list). Eval microbatches go through the boundary activations in chunks of num_microbatches slots:
// a producer reuses slot j only after its consumer read the previous chunk's item (eval_free_word),
// so a chunk never waits on a later one and ranks holding several stages cannot deadlock. The
// stage weights loaded here are the ones step r + 1 starts with. Ends with a barrier: training
// reuses the boundary slots only after every eval read. Returns the loss on the head's rank.
absl::StatusOr<std::optional<float>> EvalPass(State& s, uint32_t r) {
  MOBIUS_ASSIGN_OR_RETURN(std::vector<EvalMicrobatch> micro, EvalMicrobatches(s));
  const int K = s.layout.num_microbatches;
  const int num_units = static_cast<int>(s.layout.units.size());
  const uint64_t n = static_cast<uint64_t>(s.mb * s.t);
  const uint64_t act_bytes = 2 * s.layout.boundary_elements;
  double sum = 0;
  int64_t count = 0;
  for (size_t c = 0; c < micro.size(); c += K) {
    const int chunk = static_cast<int>(std::min<size_t>(K, micro.size() - c));
    for (int st : s.stages) {
      const StageRange range = s.range(st);
      MOBIUS_ASSIGN_OR_RETURN(Slot * slot, EnsureLoaded(s, st, r + 1));
      for (int j = 0; j < chunk; ++j) {
        const EvalMicrobatch& e = micro[c + j];
        const uint32_t seq = s.eval_seq + static_cast<uint32_t>(c + j) + 1;
        if (st == 0) {
          MOBIUS_RETURN_IF_ERROR(
              s.backend->CopyToDevice(*s.compute, e.tokens.data(), s.tokens, 0, 4 * n));
        } else {
          MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.eval_ready_word(st - 1, j), seq));
          MOBIUS_RETURN_IF_ERROR(s.backend->CopyToDevice(
              *s.compute, s.store->at<uint8_t>(s.layout.activation_offset(st - 1, j)), s.stage_in,
              0, act_bytes));
          s.h2d_bytes += act_bytes;
          MOBIUS_RETURN_IF_ERROR(SyncCompute(s));
          s.store->Publish(s.layout.eval_free_word(st - 1, j), seq);
        }
        if (st == s.head_stage) {
          MOBIUS_RETURN_IF_ERROR(
              s.backend->CopyToDevice(*s.compute, e.targets.data(), s.targets, 0, 4 * n));
        }
        for (int64_t u = range.begin; u < range.end; ++u) {
          void* out = u == num_units - 1    ? s.loss.data()
                      : u == range.end - 1 ? s.out.data()
                                           : s.hidden[u - range.begin].data();
          MOBIUS_RETURN_IF_ERROR(s.runners[u]->Forward(*s.compute, Micro(s, st, u),
                                                       UnitWeights(s, *slot, u), out, s.workspace));
        }
        if (st == s.head_stage) {
          float loss = 0;
          MOBIUS_RETURN_IF_ERROR(s.backend->CopyToHost(*s.compute, s.loss, 0, &loss, 4));
          MOBIUS_RETURN_IF_ERROR(SyncCompute(s));
          sum += static_cast<double>(loss) * e.count;
          count += e.count;
          continue;
        }
        if (c >= static_cast<size_t>(K)) {  // slot j's previous eval item must have been read
          MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.eval_free_word(st, j), seq - K));
        }
        MOBIUS_RETURN_IF_ERROR(s.backend->CopyToHost(
            *s.compute, s.out, 0, s.store->at<uint8_t>(s.layout.activation_offset(st, j)),
            act_bytes));
        s.d2h_bytes += act_bytes;
        MOBIUS_RETURN_IF_ERROR(SyncCompute(s));
        s.store->Publish(s.layout.eval_ready_word(st, j), seq);
      }
    }
  }
  s.eval_seq += static_cast<uint32_t>(micro.size());
  MOBIUS_RETURN_IF_ERROR(s.store->Barrier(s.run.num_workers));
  if (std::find(s.stages.begin(), s.stages.end(), s.head_stage) == s.stages.end()) {
    return std::optional<float>();
  }
  return std::optional<float>(count > 0 ? static_cast<float>(sum / count) : 0.0f);
}

float* GradOf(const State& s, const std::string& name, int64_t unit) {
  const units::UnitParam* p = s.layout.units[unit].Find(name);
  return s.store->at<float>(s.layout.unit_grads[unit] + 4 * static_cast<uint64_t>(p->offset));
}

uint16_t* WeightOf(const State& s, const std::string& name, int64_t unit) {
  const units::UnitParam* p = s.layout.units[unit].Find(name);
  return s.store->at<uint16_t>(s.layout.unit_weights[unit] + 2 * static_cast<uint64_t>(p->offset));
}

// The global gradient norm from every tensor's chunk partials, added in the standalone trainer's
// order. REQUIRES: every stage published its partials for this step.
double GlobalNorm(const State& s) {
  const double* partial = s.store->at<double>(s.layout.norm_partials);
  double total = 0.0;
  for (int64_t c = 0; c < s.layout.num_chunks; ++c) total += partial[c];
  return std::sqrt(total);
}

std::vector<const TensorSlot*> OwnedTensors(const State& s, int stage) {
  const StageRange range = s.range(stage);
  std::vector<const TensorSlot*> tensors;
  for (const auto& [name, slot] : s.layout.tensors) {
    if (slot.owner_unit >= range.begin && slot.owner_unit < range.end) tensors.push_back(&slot);
  }
  return tensors;
}

// Phase 1 of a stage's optimizer work (optimizer thread): wait for its gradients to reach the
// store, fold in the head's part of a tied embedding, publish its share of the global norm.
absl::Status Partials(State& s, const OptimizerTask& task) {
  const StageRange range = s.range(task.stage);
  MOBIUS_RETURN_IF_ERROR(s.backend->Synchronize(*task.slot->saved));
  s.store->Publish(s.layout.grads_ready_word(task.stage), task.r);
  const int64_t head = static_cast<int64_t>(s.layout.units.size()) - 1;
  // A tied embedding's gradient is the embedding's plus the head's (in that order, as the
  // standalone trainer adds them); the head's part arrives from the head's stage, whose optimizer
  // thread publishes it first thing (the head's backward precedes the embedding's).
  if (s.tied && range.begin == 0) {
    for (const units::UnitParam& p : s.layout.units[head].params) {
      if (!p.shared) continue;
      if (s.head_stage != task.stage) {
        MOBIUS_RETURN_IF_ERROR(
            s.store->WaitAtLeast(s.layout.grads_ready_word(s.head_stage), task.r));
      }
      float* g = GradOf(s, p.name, 0);
      const float* h = GradOf(s, p.name, head);
      for (int64_t i = 0; i < p.num_elements; ++i) g[i] += h[i];
    }
  }
  double* partial = s.store->at<double>(s.layout.norm_partials);
  const size_t chunk = optim::CpuAdamW::kChunkElements;
  for (const TensorSlot* t : OwnedTensors(s, task.stage)) {
    const float* g = GradOf(s, t->name, t->owner_unit);
    for (int64_t c = 0; c < t->num_chunks; ++c) {
      const size_t begin = c * chunk, n = std::min<size_t>(chunk, t->num_elements - begin);
      partial[t->first_chunk + c] = optim::SumOfSquares(g + begin, n);
    }
  }
  s.store->Publish(s.layout.norm_ready_word(task.stage), task.r);
  return absl::OkStatus();
}

// Waits for every stage's norm share of step r and adds them up.
absl::StatusOr<double> WaitGlobalNorm(State& s, uint32_t r, int64_t global_step) {
  for (int st = 0; st < s.layout.num_stages; ++st) {
    MOBIUS_RETURN_IF_ERROR(s.store->WaitAtLeast(s.layout.norm_ready_word(st), r));
  }
  const double norm = GlobalNorm(s);
  if (!std::isfinite(norm)) {
    return absl::InternalError(absl::StrCat("step ", global_step, ": the gradient norm is ", norm,
                                            " (training diverged; lower the lr)"));
  }
  return norm;
}

// Phase 2: AdamW over the stage's tensors, the bf16 copies the next step uploads, then "updated".
absl::Status Update(State& s, const OptimizerTask& task, int64_t global_step, float scale) {
  const StageRange range = s.range(task.stage);
  const int64_t head = static_cast<int64_t>(s.layout.units.size()) - 1;
  std::vector<optim::ParamBuffers> buffers;
  for (const TensorSlot* t : OwnedTensors(s, task.stage)) {
    buffers.push_back({.master = s.store->at<float>(t->master), .m = s.store->at<float>(t->m),
                       .v = s.store->at<float>(t->v), .grad = GradOf(s, t->name, t->owner_unit),
                       .bf16_out = WeightOf(s, t->name, t->owner_unit),
                       .n = static_cast<size_t>(t->num_elements), .decay = t->decay});
  }
  MOBIUS_RETURN_IF_ERROR(s.adamw->SetLearningRate(s.schedule->At(global_step)));
  MOBIUS_RETURN_IF_ERROR(s.adamw->Step(global_step, scale, buffers));
  if (s.tied && range.begin == 0) {  // the head's copy of the tied embedding
    for (const units::UnitParam& p : s.layout.units[head].params) {
      if (p.shared) {
        std::memcpy(WeightOf(s, p.name, head), WeightOf(s, p.name, 0), 2 * p.num_elements);
      }
    }
  }
  s.store->Publish(s.layout.updated_word(task.stage), task.r);
  return absl::OkStatus();
}

// The optimizer thread. Without clipping a stage is updated as soon as its gradients are in the
// store. With clipping the update needs the global norm, i.e. every stage's gradients: stages are
// held until this rank's last backward stage has published its share (waiting earlier could
// deadlock: this same thread computes that share), then the norm is awaited and all are updated.
absl::Status OptimizerTaskRun(State& s, const OptimizerTask& task,
                              std::vector<OptimizerTask>& pending, double* norm) {
  const int64_t global_step = s.start.step + task.r;
  MOBIUS_RETURN_IF_ERROR(Partials(s, task));
  const bool last_of_rank = task.stage == s.stages.front();
  if (s.run.training.grad_clip <= 0) {
    MOBIUS_RETURN_IF_ERROR(Update(s, task, global_step, 1.0f));
    if (last_of_rank) {
      MOBIUS_ASSIGN_OR_RETURN(*norm, WaitGlobalNorm(s, task.r, global_step));
    }
    return absl::OkStatus();
  }
  pending.push_back(task);
  if (!last_of_rank) return absl::OkStatus();
  MOBIUS_ASSIGN_OR_RETURN(*norm, WaitGlobalNorm(s, task.r, global_step));
  const float scale = optim::ClipScale(*norm, s.run.training.grad_clip);
  for (const OptimizerTask& t : pending) MOBIUS_RETURN_IF_ERROR(Update(s, t, global_step, scale));
  pending.clear();
  return absl::OkStatus();
}

void OptimizerLoop(State& s) {
  std::vector<OptimizerTask> pending;
  for (;;) {
    OptimizerTask task;
    {
      std::unique_lock<std::mutex> lock(s.mu);
      s.cv.wait(lock, [&] { return s.stop || !s.tasks.empty(); });
      if (s.tasks.empty()) return;
      task = s.tasks.front();
      s.tasks.pop_front();
    }
    const Clock::time_point t0 = Clock::now();
    double norm = -1;
    absl::Status st = OptimizerTaskRun(s, task, pending, &norm);
    std::lock_guard<std::mutex> lock(s.mu);
    s.optimizer_seconds += Since(t0);
    if (norm >= 0) {
      s.grad_norm = norm;
      s.norm_step = task.r;
      s.cv.notify_all();
    }
    if (!st.ok()) {
      if (s.optimizer_error.ok()) s.optimizer_error = st;
      s.store->Abort(2);
      s.stop = true;
      s.cv.notify_all();
      return;
    }
  }
}

// Writes this rank's stages' model state into the store (first touch: the pages land on this
// rank's NUMA node).
void FillStore(State& s) {
  const int64_t head = static_cast<int64_t>(s.layout.units.size()) - 1;
  for (int st : s.stages) {
    const StageRange range = s.range(st);
    for (int64_t u = range.begin; u < range.end; ++u) {
      for (const units::UnitParam& p : s.layout.units[u].params) {
        const std::vector<float>& master = s.start.master.at(p.name).data;
        numeric::Fp32ToBf16(master.data(), WeightOf(s, p.name, u), master.size());
        if (p.shared) continue;
        const TensorSlot& t = s.layout.tensors.at(p.name);
        std::memcpy(s.store->at<float>(t.master), master.data(), 4 * master.size());
        std::memcpy(s.store->at<float>(t.m), s.start.adam_m.at(p.name).data.data(),
                    4 * master.size());
        std::memcpy(s.store->at<float>(t.v), s.start.adam_v.at(p.name).data.data(),
                    4 * master.size());
      }
    }
    (void)head;
  }
}

// Copies the whole model state out of the store (rank 0, all ranks parked at a barrier).
absl::StatusOr<std::string> SaveCheckpoint(State& s, int64_t global_step,
                                           data::LoaderPosition position) {
  reference::Parameters master = s.start.master, m = s.start.adam_m, v = s.start.adam_v;
  for (const auto& [name, t] : s.layout.tensors) {
    std::memcpy(master.data(name), s.store->at<float>(t.master), 4 * t.num_elements);
    std::memcpy(m.data(name), s.store->at<float>(t.m), 4 * t.num_elements);
    std::memcpy(v.data(name), s.store->at<float>(t.v), 4 * t.num_elements);
  }
  return train::SaveTrainingCheckpoint(s.run.training, s.start.config, s.start.config_json, master,
                                       m, v, global_step, position);
}

absl::Status Allocate(State& s) {
  uint64_t weight_bytes = 0, grad_bytes = 0, workspace = 0;
  int max_units = 1;
  for (int st : s.stages) {
    weight_bytes = std::max(weight_bytes, s.layout.stage_weight_bytes(s.range(st)));
    grad_bytes = std::max(grad_bytes, s.layout.stage_grad_bytes(s.range(st)));
    max_units = std::max(max_units, s.units_in(st));
    for (int64_t u = s.range(st).begin; u < s.range(st).end; ++u) {
      workspace = std::max(workspace, s.runners[u]->WorkspaceBytes(s.mb, s.t));
    }
  }
  for (int i = 0; i < 2; ++i) {
    Slot& slot = s.slots[i];
    MOBIUS_ASSIGN_OR_RETURN(slot.weights,
                            s.backend->Allocate(weight_bytes, absl::StrCat("slot", i, ".weights")));
    MOBIUS_ASSIGN_OR_RETURN(slot.grads,
                            s.backend->Allocate(grad_bytes, absl::StrCat("slot", i, ".grads")));
    MOBIUS_ASSIGN_OR_RETURN(slot.loaded, s.backend->CreateEvent());
    MOBIUS_ASSIGN_OR_RETURN(slot.saved, s.backend->CreateEvent());
  }
  const uint64_t n = static_cast<uint64_t>(s.mb * s.t);
  const uint64_t hidden = 2 * s.layout.boundary_elements;
  MOBIUS_ASSIGN_OR_RETURN(s.tokens, s.backend->Allocate(4 * n, "tokens"));
  MOBIUS_ASSIGN_OR_RETURN(s.targets, s.backend->Allocate(4 * n, "targets"));
  MOBIUS_ASSIGN_OR_RETURN(s.loss, s.backend->Allocate(4, "loss"));
  MOBIUS_ASSIGN_OR_RETURN(s.stage_in, s.backend->Allocate(hidden, "stage.input"));
  MOBIUS_ASSIGN_OR_RETURN(s.out, s.backend->Allocate(hidden, "stage.output"));
  for (int j = 0; j + 1 < max_units; ++j) {
    MOBIUS_ASSIGN_OR_RETURN(DeviceBuffer h,
                            s.backend->Allocate(hidden, absl::StrCat("stage.interior", j)));
    s.hidden.push_back(std::move(h));
  }
  for (DeviceBuffer& d : s.dh) {
    MOBIUS_ASSIGN_OR_RETURN(d, s.backend->Allocate(2 * hidden, "stage.dhidden"));
  }
  MOBIUS_ASSIGN_OR_RETURN(s.workspace, s.backend->Allocate(workspace, "workspace"));
  return absl::OkStatus();
}

// Before the backend, the store's first touch and the optimizer thread exist, so all of them stay
// on the node (threads already running, e.g. OpenBLAS's pool, are moved too). A failure to pin is
// logged, not fatal: it costs locality, not correctness.
void PinToNumaNode(const State& s) {
  if (static_cast<size_t>(s.rank) >= s.run.rank_cpus.size() ||
      s.run.rank_cpus[s.rank].empty()) {
    return;
  }
  const std::vector<int>& node = s.run.rank_cpus[s.rank];
  absl::StatusOr<std::vector<int>> allowed = AllowedCpus();
  if (!allowed.ok()) {
    LOG(WARNING) << "rank " << s.rank << ": not pinned: " << allowed.status();
    return;
  }
  const std::vector<int> cpus = UsableCpus(node, *allowed);
  if (cpus.empty()) {
    LOG(INFO) << "rank " << s.rank << ": not pinned: its NUMA node's CPUs " << FormatCpuList(node)
              << " are not among this machine's usable CPUs " << FormatCpuList(*allowed);
    return;
  }
  absl::Status pinned = PinAllThreads(cpus);
  if (!pinned.ok()) {
    LOG(WARNING) << "rank " << s.rank << ": not pinned: " << pinned;
    return;
  }
  LOG(INFO) << "rank " << s.rank << ": pinned to CPUs " << FormatCpuList(cpus)
            << " (its GPU's NUMA node)";
}

}  // namespace

PipelineWorker::PipelineWorker(std::unique_ptr<State> state) : s_(std::move(state)) {}

PipelineWorker::~PipelineWorker() {
  if (s_ && s_->backend) {
    for (auto* q : {s_->compute.get(), s_->h2d.get(), s_->d2h.get()}) {
      if (q != nullptr) s_->backend->Synchronize(*q).IgnoreError();
    }
    if (s_->store) s_->backend->UnregisterHost(s_->store->base()).IgnoreError();
  }
}

absl::StatusOr<std::unique_ptr<PipelineWorker>> PipelineWorker::Create(const RunConfig& run,
                                                                       int rank) {
  auto s = std::make_unique<State>();
  s->run = run;
  s->rank = rank;
  if (rank < 0 || rank >= run.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not in [0, ",
                                                   run.num_workers, ")"));
  }
  MOBIUS_RETURN_IF_ERROR(train::ValidateTrainerOptions(s->run.training));
  PinToNumaNode(*s);
  const train::TrainerOptions& o = s->run.training;
  MOBIUS_ASSIGN_OR_RETURN(s->start, train::LoadTrainingStart(o));
  MOBIUS_ASSIGN_OR_RETURN(s->layout, MakeStoreLayout(s->start.config, s->run));
  s->stages = StagesOfRank(s->run, rank);
  s->mb = o.microbatch;
  s->t = o.seq;
  const int64_t num_units = static_cast<int64_t>(s->layout.units.size());
  for (int st = 0; st < s->layout.num_stages; ++st) {
    if (s->range(st).end == num_units) s->head_stage = st;
  }
  s->embedding_stage = 0;
  s->tied = s->start.config.tie_word_embeddings;
  MOBIUS_ASSIGN_OR_RETURN(s->store, HostStore::Open(s->run.store_path, s->layout.total_bytes));
  backend::CpuBackendOptions bo;
  bo.backend.capacity_bytes = o.device_memory_bytes;
  // Link emulation reserves link time per chunk, first come first served: small chunks keep a
  // boundary activation from waiting behind another GPU's whole stage upload.
  bo.backend.copy_chunk_bytes = s->run.links.empty() ? uint64_t{64} << 20 : uint64_t{256} << 10;
  if (!s->run.links.empty()) {
    s->links = std::make_unique<LinkEmulator>(s->run, s->layout, s->store.get(), rank);
    bo.backend.link_model = s->links.get();
  }
  bo.blas_threads = o.threads;
  bo.op_threads = o.threads;
  MOBIUS_ASSIGN_OR_RETURN(s->backend, backend::CpuBackend::Create(bo));
  MOBIUS_ASSIGN_OR_RETURN(s->compute, s->backend->CreateQueue(backend::QueueKind::kCompute, 1));
  MOBIUS_ASSIGN_OR_RETURN(s->h2d, s->backend->CreateQueue(backend::QueueKind::kHostToDevice, 0));
  MOBIUS_ASSIGN_OR_RETURN(s->d2h, s->backend->CreateQueue(backend::QueueKind::kDeviceToHost, 0));
  s->runners.resize(num_units);
  for (int st : s->stages) {
    for (int64_t u = s->range(st).begin; u < s->range(st).end; ++u) {
      MOBIUS_ASSIGN_OR_RETURN(s->runners[u],
                              units::UnitRunner::Create(s->start.config, u, s->backend.get()));
    }
  }
  absl::Status alloc = Allocate(*s);
  if (absl::IsResourceExhausted(alloc)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "rank ", rank, ": device memory ", o.device_memory_bytes,
        " bytes cannot hold two stage slots and one microbatch: ", alloc.message()));
  }
  MOBIUS_RETURN_IF_ERROR(alloc);
  MOBIUS_ASSIGN_OR_RETURN(s->adamw, train::MakeAdamW(o));
  MOBIUS_ASSIGN_OR_RETURN(optim::LrSchedule schedule, train::MakeLrSchedule(o));
  s->schedule = schedule;
  return std::unique_ptr<PipelineWorker>(new PipelineWorker(std::move(s)));
}

absl::Status PipelineWorker::Run(const std::function<void(const WorkerStepReport&)>& on_step) {
  State& s = *s_;
  const train::TrainerOptions& o = s.run.training;
  FillStore(s);
  MOBIUS_RETURN_IF_ERROR(s.store->Barrier(s.run.num_workers));
  // Pinned once per worker (cudaHostRegister on CUDA), after every rank first-touched its stages:
  // registering faults pages in, which must not decide their NUMA node.
  MOBIUS_RETURN_IF_ERROR(s.backend->RegisterHost(s.store->base(), s.store->size_bytes()));
  std::thread optimizer([&s] { OptimizerLoop(s); });
  auto finish = [&](absl::Status st) {
    {
      std::lock_guard<std::mutex> lock(s.mu);
      s.stop = true;
      // The optimizer's own error explains an ABORTED wait better than the wait does.
      if (!s.optimizer_error.ok()) st = s.optimizer_error;
    }
    s.cv.notify_all();
    const bool stopped = absl::IsAborted(st) && s.store->aborted() == 0;
    if (!st.ok() && !stopped) s.store->Abort(3);
    optimizer.join();
    if (st.ok()) {
      std::lock_guard<std::mutex> lock(s.mu);
      st = s.optimizer_error;
    }
    if (!st.ok() && !stopped) s.store->Abort(3);
    return st;
  };
  // Tasks of a step: forward ascending, backward descending.
  std::vector<std::pair<int, bool>> tasks;  // (stage, backward)
  for (int st : s.stages) tasks.push_back({st, false});
  for (auto it = s.stages.rbegin(); it != s.stages.rend(); ++it) tasks.push_back({*it, true});

  const int64_t steps_left = o.steps - s.start.step;
  for (uint32_t r = 1; r <= static_cast<uint32_t>(steps_left); ++r) {
    const Clock::time_point step_start = Clock::now();
    s.stall = s.compute_wait = 0;
    s.h2d_bytes = s.d2h_bytes = 0;
    double opt_before;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      opt_before = s.optimizer_seconds;
    }
    const int64_t global_step = s.start.step + r;
    absl::StatusOr<data::Batch> batch = s.start.loader->NextTrainBatch();
    if (!batch.ok()) return finish(batch.status());
    // Each microbatch's share of the batch's counted targets (ResidentModel::Step's scaling).
    const int M = s.layout.num_microbatches;
    const int64_t rows = s.mb * s.t;
    std::vector<float> shares(M, 0.0f), losses(M, 0.0f);
    std::vector<int64_t> counts(M, 0);
    int64_t total = 0;
    for (int m = 0; m < M; ++m) {
      for (int64_t j = 0; j < rows; ++j) counts[m] += batch->targets[m * rows + j] != -100;
      total += counts[m];
    }
    for (int m = 0; m < M; ++m) {
      shares[m] = total == 0 ? 0.0f : static_cast<float>(counts[m]) / total;
    }
    absl::Status st;
    for (size_t i = 0; i < tasks.size() && st.ok(); ++i) {
      const auto [stage, backward] = tasks[i];
      const Slot* current = nullptr;
      if (i + 1 < tasks.size() && tasks[i + 1].first != stage) {
        for (const Slot& slot : s.slots) {
          if (slot.stage == stage && slot.version == r) current = &slot;
        }
        // Without the current slot known (not loaded yet), load it first, then prefetch.
        if (current == nullptr) {
          absl::StatusOr<Slot*> loaded = EnsureLoaded(s, stage, r);
          if (!loaded.ok()) {
            st = loaded.status();
            break;
          }
          current = *loaded;
        }
        st = Prefetch(s, current, tasks[i + 1].first, r);
        if (!st.ok()) break;
      }
      st = backward ? BackwardStage(s, stage, r, *batch, shares)
                    : ForwardStage(s, stage, r, *batch, losses);
    }
    if (!st.ok()) return finish(st);
    // The step ends for this rank when its stages are updated.
    for (int stage : s.stages) {
      absl::Status w = Await(s, s.layout.updated_word(stage), r);
      if (!w.ok()) return finish(w);
    }
    const bool last = global_step == o.steps;
    std::optional<float> eval_loss;
    if (o.eval_every > 0 && (global_step % o.eval_every == 0 || last)) {
      absl::StatusOr<std::optional<float>> eval = EvalPass(s, r);
      if (!eval.ok()) return finish(eval.status());
      eval_loss = *eval;
    }
    WorkerStepReport rep;
    rep.rank = s.rank;
    rep.eval_loss = eval_loss;
    rep.step = global_step;
    rep.total_steps = o.steps;
    rep.lr = s.schedule->At(global_step);
    rep.tokens = o.batch * o.seq;
    if (std::find(s.stages.begin(), s.stages.end(), s.head_stage) != s.stages.end()) {
      double loss = 0;
      for (int m = 0; m < M; ++m) loss += double{shares[m]} * losses[m];
      rep.loss = static_cast<float>(loss);
    }
    {
      std::unique_lock<std::mutex> lock(s.mu);
      s.cv.wait(lock, [&] { return s.norm_step >= r || !s.optimizer_error.ok(); });
      if (!s.optimizer_error.ok()) {
        lock.unlock();
        return finish(absl::OkStatus());
      }
      rep.grad_norm = s.grad_norm;
      rep.optimizer_seconds = s.optimizer_seconds - opt_before;
    }
    rep.compute_seconds = s.compute_wait;
    rep.stall_seconds = s.stall;
    rep.h2d_bytes = s.h2d_bytes;
    rep.d2h_bytes = s.d2h_bytes;
    // Checkpoint and stop (pipeline_worker.h): rank 0 answers a request with the next step.
    if (s.rank == 0 && s.store->Load(StoreLayout::kStopAtWord) == 0 &&
        s.store->Load(StoreLayout::kStopRequestWord) != 0) {
      s.store->Publish(StoreLayout::kStopAtWord, r + 1);
    }
    const bool stop_here = s.store->Load(StoreLayout::kStopAtWord) == r && !last;
    if (!o.checkpoint_dir.empty() &&
        ((o.checkpoint_every > 0 && global_step % o.checkpoint_every == 0) || last || stop_here)) {
      // Every rank parks (its stages are updated) while rank 0 copies the state out.
      absl::Status b = s.store->Barrier(s.run.num_workers);
      if (b.ok() && s.rank == 0) {
        absl::StatusOr<std::string> dir =
            SaveCheckpoint(s, global_step, s.start.loader->position());
        if (!dir.ok()) return finish(dir.status());
        rep.checkpoint = *dir;
      }
      if (b.ok()) b = s.store->Barrier(s.run.num_workers);
      if (!b.ok()) return finish(b);
    }
    rep.step_seconds = Since(step_start);
    on_step(rep);
    if (stop_here) {
      return finish(absl::AbortedError(absl::StrCat(
          "stopped on request after step ", global_step,
          o.checkpoint_dir.empty() ? " (no checkpoint directory)" : ", checkpoint written")));
    }
  }
  return finish(absl::OkStatus());
}

}  // namespace mobius::runtime
