// The optimizer thread of one rank (pipeline_state.h, pipeline_worker.h): per backward stage, its
// share of the global gradient norm, then AdamW over the tensors its units own.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/runtime/pipeline_state.h"

namespace mobius::runtime {

using State = PipelineWorker::State;

float* GradOf(const State& s, const std::string& name, int64_t unit) {
  const units::UnitParam* p = s.layout.units[unit].Find(name);
  return s.store->at<float>(s.layout.unit_grads[unit] + 4 * static_cast<uint64_t>(p->offset));
}

uint16_t* WeightOf(const State& s, const std::string& name, int64_t unit) {
  const units::UnitParam* p = s.layout.units[unit].Find(name);
  return s.store->at<uint16_t>(s.layout.unit_weights[unit] + 2 * static_cast<uint64_t>(p->offset));
}

double GlobalNorm(const State& s) {
  const double* partial = s.store->at<double>(s.layout.norm_partials);
  double total = 0.0;
  for (int64_t c = 0; c < s.layout.num_chunks; ++c) total += partial[c];
  return std::sqrt(total);
}

std::vector<const TensorSlot*> OwnedTensors(const State& s, int stage) {
  const StageRange range = s.bwd(stage);
  std::vector<const TensorSlot*> tensors;
  for (const auto& [name, slot] : s.layout.tensors) {
    if (slot.owner_unit >= range.begin && slot.owner_unit < range.end) tensors.push_back(&slot);
  }
  return tensors;
}

namespace {

// Phase 1 of a backward stage's optimizer work: wait for its gradients to reach the store, fold
// in the head's part of a tied embedding, publish its share of the global norm.
absl::Status Partials(State& s, const OptimizerTask& task) {
  const StageRange range = s.bwd(task.stage);
  MOBIUS_RETURN_IF_ERROR(s.backend->Synchronize(*task.slot->saved));
  s.store->Publish(s.layout.grads_ready_word(task.stage), task.r);
  const int64_t head = s.num_units() - 1;
  // A tied embedding's gradient is the embedding's plus the head's (in that order, as the
  // standalone trainer adds them); the head's part arrives from the head's backward stage, whose
  // optimizer thread publishes it first thing (the head's backward precedes the embedding's).
  if (s.tied && range.begin == 0) {
    for (const units::UnitParam& p : s.layout.units[head].params) {
      if (!p.shared) continue;
      if (s.head_backward != task.stage) {
        MOBIUS_RETURN_IF_ERROR(
            s.store->WaitAtLeast(s.layout.grads_ready_word(s.head_backward), task.r));
      }
      float* g = GradOf(s, p.name, 0);
      const float* h = GradOf(s, p.name, head);
      for (int64_t i = 0; i < p.num_elements; ++i) g[i] += h[i];
    }
  }
  double* partial = s.store->at<double>(s.layout.norm_partials);
  const size_t chunk = optim::CpuAdamW::kChunkElements;
  static_assert(optim::CpuAdamW::kChunkElements == kGradNormChunkElements,
                "the store's grad-norm chunks (common/run/store_layout.h) are the optimizer's");
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

// Waits for every backward stage's norm share of step r and adds them up.
absl::StatusOr<double> WaitGlobalNorm(State& s, uint32_t r, int64_t global_step) {
  for (int b = 0; b < s.layout.num_backward_stages; ++b) {
    MOBIUS_RETURN_IF_ERROR(s.store->WaitAtLeast(s.layout.norm_ready_word(b), r));
  }
  const double norm = GlobalNorm(s);
  if (!std::isfinite(norm)) {
    return absl::InternalError(absl::StrCat("step ", global_step, ": the gradient norm is ", norm,
                                            " (training diverged; lower the lr)"));
  }
  return norm;
}

// The update of backward stage b rewrites the bf16 weights of its units (and, for the tied
// embedding, the head's copy): every forward stage of step r that reads them must have read them.
// With the mobius schedule those forwards ran on this rank before the backward (no wait); with
// roundrobin a forward on another rank may lag behind the backward stream.
absl::Status AwaitReaders(State& s, int b, uint32_t r) {
  const StageRange range = s.bwd(b);
  const std::vector<StageRange>& forward = ForwardStages(s.run);
  for (int f = 0; f < static_cast<int>(forward.size()); ++f) {
    const bool overlaps = forward[f].begin < range.end && range.begin < forward[f].end;
    const bool tied_head = s.tied && range.begin == 0 && f == s.head_forward;
    if (overlaps || tied_head) {
      MOBIUS_RETURN_IF_ERROR(s.store->WaitAtLeast(s.layout.forward_done_word(f), r));
    }
  }
  return absl::OkStatus();
}

// Phase 2: AdamW over the stage's tensors, the bf16 copies the next step uploads, then "updated".
absl::Status Update(State& s, const OptimizerTask& task, int64_t global_step, float scale) {
  const StageRange range = s.bwd(task.stage);
  const int64_t head = s.num_units() - 1;
  std::vector<optim::ParamBuffers> buffers;
  for (const TensorSlot* t : OwnedTensors(s, task.stage)) {
    buffers.push_back({.master = s.store->at<float>(t->master), .m = s.store->at<float>(t->m),
                       .v = s.store->at<float>(t->v), .grad = GradOf(s, t->name, t->owner_unit),
                       .bf16_out = WeightOf(s, t->name, t->owner_unit),
                       .n = static_cast<size_t>(t->num_elements), .decay = t->decay});
  }
  MOBIUS_RETURN_IF_ERROR(AwaitReaders(s, task.stage, task.r));
  // The previous checkpoint may still be reading this stage's state from the store.
  MOBIUS_RETURN_IF_ERROR(AwaitStageWritten(s, task.stage));
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

// Without clipping a stage is updated as soon as its gradients are in the store. With clipping
// the update needs the global norm, i.e. every stage's gradients: stages are held until this
// rank's last backward stage (its lowest) has published its share (waiting earlier could deadlock:
// this same thread computes that share), then the norm is awaited and all are updated.
absl::Status OptimizerTaskRun(State& s, const OptimizerTask& task,
                              std::vector<OptimizerTask>& pending, double* norm) {
  const int64_t global_step = s.start.step + task.r;
  MOBIUS_RETURN_IF_ERROR(Partials(s, task));
  const bool last_of_rank = task.stage == s.backward_stages.front();
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

}  // namespace

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

}  // namespace mobius::runtime
