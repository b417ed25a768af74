// The optimizer thread of one rank (pipeline_state.h, pipeline_worker.h): per backward stage, its
// share of the global gradient norm, then AdamW over the tensors its units own.
#include <algorithm>
#include <atomic>
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

uint16_t* WeightOf(const State& s, const std::string& name, int64_t unit, uint32_t k) {
  const units::UnitParam* p = s.layout.units[unit].Find(name);
  return s.store->at<uint16_t>(s.layout.weights_offset(unit, k) +
                               2 * static_cast<uint64_t>(p->offset));
}

double GlobalNorm(const State& s, uint32_t r) {
  const double* partial = s.store->at<double>(s.layout.norm_partials_at(r));
  double total = 0.0;
  for (int64_t c = 0; c < s.layout.num_chunks; ++c) total += partial[c];
  return std::sqrt(total);
}

namespace {

// One step's entry of the store's loss_scales (store_layout.h), by step parity.
struct ScaleSlot {
  double scale;      // the scaler after the step
  int64_t good;      // and its count of good steps
  double used;       // the scale the step's backward used
};
static_assert(sizeof(ScaleSlot) == 24);

ScaleSlot* ScaleSlotOf(const State& s, uint32_t r) {
  return s.store->at<ScaleSlot>(s.layout.loss_scales + 24 * static_cast<uint64_t>(r % 2));
}

// The step whose scaler step r uses (run-local; <= 0: the initial one), LossScaler's rule.
int64_t ScalerStepFor(const State& s, uint32_t r) {
  const train::TrainerOptions& o = s.run.training;
  const bool newest = o.optimizer_staleness == 0 || train::IsSyncStep(o, s.start.step + r - 1);
  return static_cast<int64_t>(r) - (newest ? 1 : 2);
}

bool Fp16(const State& s) { return s.initial_scaler.enabled(); }

}  // namespace

train::LossScaler ScalerAfter(const State& s, uint32_t r) {
  if (r == 0 || !Fp16(s)) return s.initial_scaler;
  train::LossScaler scaler = s.initial_scaler;
  const ScaleSlot* slot = ScaleSlotOf(s, r);
  scaler.Restore(slot->scale, slot->good).IgnoreError();  // written by SumIfLast: valid
  return scaler;
}

absl::StatusOr<float> StepLossScale(State& s, uint32_t r) {
  if (!Fp16(s)) return 1.0f;
  const int64_t k = ScalerStepFor(s, r);
  if (k <= 0) return s.initial_scaler.scale();
  MOBIUS_RETURN_IF_ERROR(s.store->WaitAtLeast(s.layout.norm_step_word(), static_cast<uint32_t>(k)));
  return static_cast<float>(ScaleSlotOf(s, static_cast<uint32_t>(k))->scale);
}

void InitLossScales(State& s) {
  for (uint32_t r : {0u, 1u}) {
    *ScaleSlotOf(s, r) = {s.initial_scaler.scale(), s.initial_scaler.good_steps(),
                          s.initial_scaler.scale()};
  }
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

absl::Status SumIfLast(State& s, uint32_t r);

// Phase 1 of a backward stage's optimizer work: wait for its gradients to reach the store, fold
// in the head's part of a tied embedding, publish its share of the global norm.
absl::Status Partials(State& s, const OptimizerTask& task) {
  const StageRange range = s.bwd(task.stage);
  MOBIUS_RETURN_IF_ERROR(s.backend->Synchronize(*task.slot->saved));
  // Several nodes: the stage's gradients summed over the nodes (this node's share of the global
  // batch is scaled by its share of the global batch's targets, so the sum is the global batch's
  // gradient) before anything reads them.
  if (s.nodes != nullptr) {
    MOBIUS_RETURN_IF_ERROR(s.nodes->AllReduceSum(s.store->at<float>(s.layout.unit_grads[range.begin]),
                                                 s.layout.stage_grad_bytes(range) / 4));
  }
  s.store->Publish(s.layout.grads_ready_word(task.stage), task.r);
  const int64_t head = s.num_units() - 1;
  // A tied embedding's gradient is the embedding's plus the head's (in that order, as the
  // standalone trainer adds them); the head's part arrives from the head's backward stage, whose
  // optimizer thread publishes it first thing (the head's backward precedes the embedding's).
  if (s.tied && !s.layout.lora && range.begin == 0) {
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
  double* partial = s.store->at<double>(s.layout.norm_partials_at(task.r));
  const size_t chunk = optim::CpuAdamW::kChunkElements;
  static_assert(optim::CpuAdamW::kChunkElements == kGradNormChunkElements,
                "the store's grad-norm chunks (common/run/store_layout.h) are the optimizer's");
  for (const TensorSlot* t : OwnedTensors(s, task.stage)) {
    const float* g = s.store->at<float>(t->grad);
    for (int64_t c = 0; c < t->num_chunks; ++c) {
      const size_t begin = c * chunk, n = std::min<size_t>(chunk, t->num_elements - begin);
      partial[t->first_chunk + c] = optim::SumOfSquares(g + begin, n);
    }
  }
  s.store->Publish(s.layout.norm_ready_word(task.stage), task.r);
  return SumIfLast(s, task.r);
}

// Whoever publishes the last partials of step r sums them, in the standalone trainer's order,
// into the store (norm_values, by step parity) and publishes norm_step. Step r's partials all
// come after step r-2's norm is summed (each stage's step-r gradient lands only after its step
// r-1 update, which follows its step r-1 partials and, with clipping, step r-1's norm; and step
// r's backward follows step r's forward, which needs the step r-2 updates), so the cumulative
// count per parity identifies the last one.
absl::Status SumIfLast(State& s, uint32_t r) {
  std::atomic<uint32_t>& count = s.store->word(s.layout.norm_count_word(r % 2));
  const uint32_t stages = static_cast<uint32_t>(s.layout.num_backward_stages);
  const uint32_t last = stages * ((r + 1) / 2);  // modulo 2^32, as the count
  if (count.fetch_add(1, std::memory_order_acq_rel) + 1 != last) return absl::OkStatus();
  const double norm = GlobalNorm(s, r);
  if (!Fp16(s)) {
    if (!std::isfinite(norm)) {  // not published: the job aborts with this error
      return absl::InternalError(absl::StrCat("step ", s.start.step + r, ": the gradient norm is ",
                                              norm, " (training diverged; lower the lr)"));
    }
    s.store->at<double>(s.layout.norm_values)[r % 2] = norm;
    s.store->Publish(s.layout.norm_step_word(), r);
    std::lock_guard<std::mutex> lock(s.mu);
    s.summed_norms[r] = norm;
    return absl::OkStatus();
  }
  // fp16: every update waits for the norm, so step r-1's is summed (its scaler in the store) and
  // step r's slot still holds the scaler after step r-2.
  const int64_t k = ScalerStepFor(s, r);
  const double used = k <= 0 ? s.initial_scaler.scale()
                             : k == static_cast<int64_t>(r) - 1 ? ScaleSlotOf(s, r - 1)->scale
                                                                : ScaleSlotOf(s, r)->scale;
  train::LossScaler scaler = ScalerAfter(s, r - 1);
  MOBIUS_ASSIGN_OR_RETURN(const bool skipped, scaler.Record(norm, s.start.step + r));
  *ScaleSlotOf(s, r) = {scaler.scale(), scaler.good_steps(), used};
  s.store->at<double>(s.layout.norm_values)[r % 2] = norm;
  s.store->Publish(s.layout.norm_step_word(), r);
  std::lock_guard<std::mutex> lock(s.mu);
  s.summed_norms[r] = skipped ? 0.0 : norm / used;  // reports carry no infinity (JSON)
  s.summed_scales[r] = {static_cast<float>(used), skipped};
  return absl::OkStatus();
}

// Step r's global norm, once summed (by this or another rank). The value stays until step r+2's
// is summed, which needs every stage's step r+1 update, so this rank's held updates of step r
// come first.
absl::StatusOr<double> AwaitGlobalNorm(State& s, uint32_t r) {
  MOBIUS_RETURN_IF_ERROR(s.store->WaitAtLeast(s.layout.norm_step_word(), r));
  return s.store->at<double>(s.layout.norm_values)[r % 2];
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
    const bool tied_head = s.tied && !s.layout.lora && range.begin == 0 && f == s.head_forward;
    if (overlaps || tied_head) {
      MOBIUS_RETURN_IF_ERROR(s.store->WaitAtLeast(s.layout.forward_done_word(f), r));
    }
  }
  return absl::OkStatus();
}

// Phase 2: AdamW over the stage's tensors, the bf16 copies the next step uploads, then "updated".
// LoRA: the adapters are updated in place (what the passes upload), no bf16 copy.
absl::Status Update(State& s, const OptimizerTask& task, int64_t global_step, float scale,
                    bool skipped = false) {
  const StageRange range = s.bwd(task.stage);
  const int64_t head = s.num_units() - 1;
  // W_r: the bf16 copy that steps computing with index r upload (StoreLayout::weights_offset).
  std::vector<optim::ParamBuffers> buffers;
  for (const TensorSlot* t : OwnedTensors(s, task.stage)) {
    buffers.push_back(
        {.master = s.store->at<float>(t->master), .m = s.store->at<float>(t->m),
         .v = s.store->at<float>(t->v), .grad = s.store->at<float>(t->grad),
         .bf16_out = s.layout.lora ? nullptr : WeightOf(s, t->name, t->owner_unit, task.r),
         .n = static_cast<size_t>(t->num_elements), .decay = t->decay,
         .out_fp16 = s.half == backend::DType::kF16});
  }
  // With two weight copies, every reader of W_{r-2} in this copy is a pass of step r or earlier:
  // the forward passes waited for here, the stage's own backward (done).
  MOBIUS_RETURN_IF_ERROR(AwaitReaders(s, task.stage, task.r));
  // The previous checkpoint may still be reading this stage's state from the store.
  MOBIUS_RETURN_IF_ERROR(AwaitStageWritten(s, task.stage, task.r));
  if (skipped) {  // fp16 overflow: nothing changes; W_r is the master's copy, as W_{r-1} is
    for (const optim::ParamBuffers& b : buffers) {
      if (b.bf16_out != nullptr) train::RoundWeights(b.out_fp16, b.master, b.bf16_out, b.n);
    }
  } else {
    MOBIUS_RETURN_IF_ERROR(s.adamw->SetLearningRate(s.schedule->At(global_step)));
    MOBIUS_RETURN_IF_ERROR(s.adamw->Step(global_step, scale, buffers));
  }
  if (s.tied && !s.layout.lora && range.begin == 0) {  // the head's copy of the tied embedding
    for (const units::UnitParam& p : s.layout.units[head].params) {
      if (p.shared) {
        std::memcpy(WeightOf(s, p.name, head, task.r), WeightOf(s, p.name, 0, task.r),
                    2 * p.num_elements);
      }
    }
  }
  s.store->Publish(s.layout.updated_word(task.stage), task.r);
  return absl::OkStatus();
}

// Without clipping a stage is updated as soon as its gradients are in the store. With clipping
// the update needs the global norm, i.e. every stage's gradients: this rank's stages of step r
// are held until the main thread hands over the end of step r (waiting earlier could deadlock:
// this same thread may still owe the partials of a later task of step r), then the norm is
// awaited and they are updated in the order they came.
absl::Status OptimizerTaskRun(State& s, const OptimizerTask& task,
                              std::vector<OptimizerTask>& pending) {
  const int64_t global_step = s.start.step + task.r;
  const double clip = s.run.training.grad_clip;
  // fp16: every update needs the global norm (a non-finite one skips the whole step).
  const bool after_norm = clip > 0 || Fp16(s);
  if (task.end_of_step) {
    if (!after_norm || pending.empty()) return absl::OkStatus();
    MOBIUS_ASSIGN_OR_RETURN(const double scaled_norm, AwaitGlobalNorm(s, task.r));
    // The loss scale step r used (1 without fp16) is divided out with the clipping factor, as
    // the standalone trainer does (StandaloneTrainer::RecordNorm).
    const float used = Fp16(s) ? static_cast<float>(ScaleSlotOf(s, task.r)->used) : 1.0f;
    const bool skipped = !std::isfinite(scaled_norm);
    const double norm = scaled_norm / used;
    const float scale = (clip > 0 ? optim::ClipScale(norm, clip) : 1.0f) / used;
    for (const OptimizerTask& t : pending) {
      MOBIUS_RETURN_IF_ERROR(Update(s, t, global_step, scale, skipped));
    }
    pending.clear();
    return absl::OkStatus();
  }
  MOBIUS_RETURN_IF_ERROR(Partials(s, task));
  if (!after_norm) return Update(s, task, global_step, 1.0f);
  pending.push_back(task);
  return absl::OkStatus();
}

}  // namespace

void HandOverStep(State& s, uint32_t r) {
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.tasks.push_back({.r = r, .end_of_step = true});
  }
  s.cv.notify_all();
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
    absl::Status st = OptimizerTaskRun(s, task, pending);
    std::lock_guard<std::mutex> lock(s.mu);
    s.optimizer_seconds += Since(t0);
    if (st.ok() && task.end_of_step) {
      s.steps_handed = task.r;
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
