#include "worker/train/standalone_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "absl/strings/str_format.h"
#include "common/model/layer_units.h"
#include "common/numeric/bf16.h"
#include "common/status_macros.h"
#include "worker/backend/backend_choice.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/checkpoint/model_init.h"
#include "worker/kernels/dropout_mask.h"
#include "common/data/loader.h"
#include "common/data/token_file.h"
#include "worker/model/resident_model.h"
#include "worker/optim/adamw.h"
#include "worker/optim/lr_schedule.h"
#include "worker/checkpoint/adapter_checkpoint.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/train/lora_setup.h"
#include "worker/train/loss_scaler.h"
#include "worker/train/training_setup.h"

namespace mobius::train {

using Clock = std::chrono::steady_clock;

// Elements per slice of the streamed update (worker memory: 10 bytes each of host scratch);
// a multiple of CpuAdamW::kChunkElements, so the norm's partials are the whole-tensor ones.
constexpr int64_t kSlice = int64_t{4} << 20;
static_assert(kSlice % optim::CpuAdamW::kChunkElements == 0);

struct StandaloneTrainer::State {
  TrainerOptions options;
  TrainingStart start;  // config, master + moments, data loader, step (training_setup.h)
  model::ModelConfig& config = start.config;
  reference::Parameters& master = start.master;
  reference::Parameters& adam_m = start.adam_m;
  reference::Parameters& adam_v = start.adam_v;
  // One slice (kSlice elements) of host scratch: the gradient downloaded for the norm and the
  // update, the tied embedding's second part, the bf16 copy uploaded after the update. The whole
  // model's gradients and bf16 copy live on the device only.
  std::vector<float> grad, grad_part;
  std::vector<uint16_t> bf16;
  std::vector<double> partials;  // one tensor's norm partials
  std::unique_ptr<backend::Backend> backend;  // declared before the model: destroyed after it
  std::unique_ptr<units::ResidentModel> model;
  std::unique_ptr<optim::CpuAdamW> adamw;
  std::optional<optim::LrSchedule> schedule;
  int64_t& step = start.step;  // optimizer steps done
  // optimizer_staleness 1 only: per tensor, the bf16 copy of the newest master weights (W_step),
  // which the model computes with only from the step after next (or the next one, after a sync
  // step); the model holds W_{step-1} meanwhile (TrainerOptions::optimizer_staleness).
  std::map<std::string, std::vector<uint16_t>> newest_bf16;
  int64_t last_checkpoint_step = -1;
  // LoRA runs (options.adapter): the adapted modules and the adapters' fp32 state by PEFT name.
  std::optional<LoraRun> lora;
  AdapterStart adapters;
  // The weights' and activations' format (options.precision); fp16: the loss scaler after the
  // last step and after the one before (ScaleFor).
  backend::DType half = backend::DType::kBf16;
  LossScaler scaler, scaler_previous;
};

namespace {

// What a checkpoint records of the scaler: its scale, 0 without fp16.
double LossScaleOf(const LossScaler& s) { return s.enabled() ? s.scale() : 0.0; }

// The resident model with its weights, and every per-shape buffer allocated by one throwaway
// microbatch, so that a device cap too small for one microbatch fails here, before the first step
// (Step zeroes the gradients it leaves).
absl::Status BuildModel(StandaloneTrainer::State& s, bool recompute) {
  const TrainerOptions& o = s.options;
  std::optional<units::LoraSpec> lora;
  if (s.lora) lora = s.lora->spec;
  MOBIUS_ASSIGN_OR_RETURN(s.model, units::ResidentModel::Create(
                                       s.config, s.backend.get(),
                                       {.recompute = recompute, .lora = lora,
                                        .chunk_tokens = o.chunk_tokens, .precision = s.half}));
  // An NF4 base (QLoRA) quantises each weight whole: one tensor's 16-bit values at a time.
  const bool whole = lora.has_value() && lora->base_nf4;
  std::vector<uint16_t> whole_bits;
  for (auto& [name, t] : s.master.tensors) {
    if (whole && s.model->IsNf4Weight(name)) {
      // A bitsandbytes checkpoint's NF4 as stored: its codes and scales, not requantised.
      if (auto it = s.start.nf4_base.find(name); it != s.start.nf4_base.end()) {
        MOBIUS_RETURN_IF_ERROR(s.model->SetNf4Weight(name, it->second));
        continue;
      }
    }
    const int64_t slice = whole ? t.numel() : kSlice;
    if (whole) whole_bits.resize(static_cast<size_t>(t.numel()));
    uint16_t* bits = whole ? whole_bits.data() : s.bf16.data();
    for (int64_t begin = 0; begin < t.numel(); begin += slice) {
      const int64_t n = std::min(slice, t.numel() - begin);
      RoundWeights(s.half == backend::DType::kF16, t.data.data() + begin, bits,
                   static_cast<size_t>(n));
      MOBIUS_RETURN_IF_ERROR(s.model->SetWeight(name, begin, n, bits));
    }
  }
  for (const auto& [name, t] : s.adapters.master.tensors) {
    MOBIUS_RETURN_IF_ERROR(s.model->SetAdapter(name, t.data.data()));
  }
  std::vector<int32_t> zeros(static_cast<size_t>(o.microbatch * o.seq), 0);
  return s.model->ForwardBackward(zeros.data(), zeros.data(), o.microbatch, o.seq, 0.0f).status();
}

absl::StatusOr<std::unique_ptr<backend::Backend>> MakeTrainerBackend(const TrainerOptions& o) {
  backend::ChooseBackendOptions options;
  options.cpu.backend.capacity_bytes = o.device_memory_bytes;
  options.cpu.op_threads = o.threads;
  MOBIUS_ASSIGN_OR_RETURN(
      backend::ChosenBackend chosen,
      backend::ChooseBackend(o.backend, {.device = 0, .capacity_bytes = o.device_memory_bytes},
                             options));
  if (chosen.kind == backend::BackendKind::kCuda) {
    LOG(INFO) << "train: CUDA backend on " << chosen.backend->name();
  } else if (chosen.fell_back()) {
    LOG(INFO) << "train: " << backend::FallbackDescription(chosen.fallback_reason);
  }
  return std::move(chosen.backend);
}

absl::Status BuildEngine(StandaloneTrainer::State& s) {
  const TrainerOptions& o = s.options;
  MOBIUS_ASSIGN_OR_RETURN(s.backend, MakeTrainerBackend(o));
  MOBIUS_ASSIGN_OR_RETURN(s.adamw, MakeAdamW(o));
  MOBIUS_ASSIGN_OR_RETURN(optim::LrSchedule schedule, MakeLrSchedule(o));
  s.schedule = schedule;
  size_t slice = 0;  // the largest slice any tensor needs
  for (const auto& [name, t] : s.master.tensors) {
    slice = std::max(slice, std::min(t.data.size(), static_cast<size_t>(kSlice)));
  }
  s.grad.resize(slice);
  if (s.config.tie_word_embeddings) s.grad_part.resize(slice);  // the head's part of the embedding
  s.bf16.resize(slice);
  s.partials.resize((slice + optim::CpuAdamW::kChunkElements - 1) /
                    optim::CpuAdamW::kChunkElements);
  // Keep the activations (no recompute) when the cap holds them, else fall back to recompute.
  absl::Status kept = o.recompute ? absl::ResourceExhaustedError("recompute requested")
                                  : BuildModel(s, /*recompute=*/false);
  if (absl::IsResourceExhausted(kept)) {
    s.model.reset();  // its buffers go back before the smaller model allocates
    return BuildModel(s, /*recompute=*/true);
  }
  return kept;
}

}  // namespace

std::string FormatStepLine(const StepStats& st) {
  std::string line = absl::StrFormat(
      "step %d/%d | loss %.4f | lr %.2e | grad_norm %.3f | tok/s %.0f | %.0f ms", st.step,
      st.total_steps, st.loss, st.lr, st.grad_norm, st.tokens_per_second, st.milliseconds);
  if (st.eval_loss) absl::StrAppendFormat(&line, " | eval loss %.4f", *st.eval_loss);
  if (st.skipped) {
    absl::StrAppendFormat(&line, " | skipped (overflow at loss scale %g)", st.loss_scale);
  } else if (st.loss_scale > 0) {
    absl::StrAppendFormat(&line, " | loss scale %g", st.loss_scale);
  }
  return line;
}

StandaloneTrainer::StandaloneTrainer(std::unique_ptr<State> state) : s_(std::move(state)) {}
StandaloneTrainer::~StandaloneTrainer() {
  if (s_) {
    s_->model.reset();  // buffers go back to the backend before it is destroyed
    s_->backend.reset();
  }
}

absl::StatusOr<std::unique_ptr<StandaloneTrainer>> StandaloneTrainer::Create(
    const TrainerOptions& options) {
  auto s = std::make_unique<State>();
  s->options = options;
  MOBIUS_RETURN_IF_ERROR(ValidateTrainerOptions(s->options));
  MOBIUS_ASSIGN_OR_RETURN(s->start, LoadTrainingStart(s->options));
  if (s->options.resume) s->last_checkpoint_step = s->step;
  s->half = s->options.precision == "fp16" ? backend::DType::kF16 : backend::DType::kBf16;
  MOBIUS_ASSIGN_OR_RETURN(s->scaler, LossScaler::ForOptions(s->options));
  if (s->start.loss_scale > 0) {
    MOBIUS_RETURN_IF_ERROR(s->scaler.Restore(s->start.loss_scale, s->start.loss_scale_good_steps));
  }
  s->scaler_previous = s->scaler;
  if (s->options.adapter.enabled()) {
    if (s->options.optimizer_staleness != 0) {
      return absl::InvalidArgumentError(
          "--optimizer_staleness 1 with an adapter is not supported (the adapters' update is "
          "small; there is nothing to overlap)");
    }
    MOBIUS_ASSIGN_OR_RETURN(s->lora, MakeLoraRun(s->options, s->config));
    MOBIUS_ASSIGN_OR_RETURN(s->adapters,
                            LoadAdapterStart(s->options, *s->lora, s->start.resume_directory));
  }
  absl::Status engine = BuildEngine(*s);
  if (absl::IsResourceExhausted(engine)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "--device_memory_bytes ", s->options.device_memory_bytes,
        " cannot hold the model and one microbatch of ", s->options.microbatch, " x ",
        s->options.seq, " tokens: ", engine.message()));
  }
  MOBIUS_RETURN_IF_ERROR(engine);
  if (s->options.optimizer_staleness == 1) {
    for (const auto& [name, t] : s->master.tensors) {
      std::vector<uint16_t>& copy = s->newest_bf16[name];
      copy.resize(t.data.size());
      RoundWeights(s->half == backend::DType::kF16, t.data.data(), copy.data(), copy.size());
    }
  }
  return std::unique_ptr<StandaloneTrainer>(new StandaloneTrainer(std::move(s)));
}

bool StandaloneTrainer::done() const { return s_->step >= s_->options.steps; }
int64_t StandaloneTrainer::step() const { return s_->step; }
const model::ModelConfig& StandaloneTrainer::config() const { return s_->config; }
const reference::Parameters& StandaloneTrainer::master() const { return s_->master; }
const reference::Parameters& StandaloneTrainer::adapters() const {
  return s_->adapters.master;
}
absl::StatusOr<std::map<std::string, std::vector<float>>> StandaloneTrainer::LastGrads() const {
  return s_->model->Grads();
}

std::string StandaloneTrainer::Describe() const {
  int64_t params = 0;
  for (const auto& [name, t] : s_->master.tensors) params += t.numel();
  const TrainerOptions& o = s_->options;
  return absl::StrCat(model::FamilyName(s_->config.family), " ", params, " parameters; data ",
                      s_->start.file->num_tokens(), " tokens, ", s_->start.loader->num_train_sequences(),
                      " train / ", s_->start.loader->num_eval_sequences(), " eval sequences; B ",
                      o.batch, " MB ", o.microbatch, " T ", o.seq, "; ", o.threads,
                      " threads; activations ", recomputes() ? "recomputed" : "kept",
                      "; starting at step ", s_->step, " of ", o.steps);
}

bool StandaloneTrainer::recomputes() const { return s_->model->recompute(); }

absl::StatusOr<StepStats> StandaloneTrainer::Step() {
  State& s = *s_;
  const TrainerOptions& o = s.options;
  if (done()) return absl::FailedPreconditionError("all steps are done");
  const Clock::time_point start = Clock::now();
  MOBIUS_ASSIGN_OR_RETURN(data::Batch batch, s.start.loader->NextTrainBatch());
  // LoRA dropout's masks are drawn from the seed, the step and each token's place in the batch.
  const uint64_t dropout_key =
      s.lora && s.lora->spec.dropout > 0 ? kernels::LoraDropoutStepKey(o.seed, s.step + 1) : 0;
  const float loss_scale = ScaleFor(o, s.step + 1, s.scaler, s.scaler_previous);
  MOBIUS_ASSIGN_OR_RETURN(float loss,
                          s.model->Step(batch.tokens.data(), batch.targets.data(), batch.b,
                                        batch.t, o.batch / o.microbatch, dropout_key, loss_scale));
  if (s.lora) return FinishAdapterStep(loss, loss_scale, start);
  // The gradients stay on the device; each tensor's comes down twice (norm, then update) in
  // slices of kSlice elements (a multiple of the norm's 64 Ki-element chunks) through one slice of
  // scratch. The norm adds the same chunk partials in the same (HF-name) order as
  // CpuAdamW::GlobalGradNorm over all of them, and the sliced update is the same elementwise
  // AdamW: the result is bitwise that of the whole-model calls.
  double sum = 0.0;
  for (const auto& [name, t] : s.master.tensors) {
    const int64_t numel = t.numel();
    for (int64_t begin = 0; begin < numel; begin += kSlice) {
      const int64_t n = std::min(kSlice, numel - begin);
      MOBIUS_RETURN_IF_ERROR(
          s.model->ReadGrad(name, begin, n, s.grad.data(), s.grad_part.data()));
      s.adamw->ChunkSquares({s.grad.data(), static_cast<size_t>(n)}, s.partials.data());
      const size_t chunks =
          (n + optim::CpuAdamW::kChunkElements - 1) / optim::CpuAdamW::kChunkElements;
      for (size_t c = 0; c < chunks; ++c) sum += s.partials[c];
    }
  }
  MOBIUS_ASSIGN_OR_RETURN(const Outcome outcome, RecordNorm(std::sqrt(sum), loss_scale));
  const double norm = outcome.norm;
  const float scale = outcome.grad_scale;
  const double lr = s.schedule->At(s.step + 1);
  // Staleness 1: the model keeps computing with the previous update's weights (held in
  // newest_bf16) unless this is a sync step; this update's bf16 copy takes their place there.
  const bool stale = o.optimizer_staleness == 1 && !IsSyncStep(o, s.step + 1);
  MOBIUS_RETURN_IF_ERROR(s.adamw->SetLearningRate(lr));
  for (auto& [name, t] : s.master.tensors) {
    const int64_t numel = t.numel();
    for (int64_t begin = 0; begin < numel; begin += kSlice) {
      const int64_t n = std::min(kSlice, numel - begin);
      MOBIUS_RETURN_IF_ERROR(
          s.model->ReadGrad(name, begin, n, s.grad.data(), s.grad_part.data()));
      const optim::ParamBuffers buffers{.master = t.data.data() + begin,
                                        .m = s.adam_m.data(name) + begin,
                                        .v = s.adam_v.data(name) + begin, .grad = s.grad.data(),
                                        .bf16_out = s.bf16.data(), .n = static_cast<size_t>(n),
                                        .decay = s.start.decay.at(name),
                                        .out_fp16 = s.half == backend::DType::kF16};
      if (outcome.skipped) {  // nothing changes: the 16-bit copy is the master's, as before
        RoundWeights(s.half == backend::DType::kF16, buffers.master, s.bf16.data(), buffers.n);
      } else {
        MOBIUS_RETURN_IF_ERROR(s.adamw->Step(s.step + 1, scale, {&buffers, 1}));
      }
      // The next step's weights.
      if (o.optimizer_staleness == 1) {
        uint16_t* newest = s.newest_bf16.at(name).data() + begin;
        MOBIUS_RETURN_IF_ERROR(s.model->SetWeight(name, begin, n, stale ? newest : s.bf16.data()));
        std::copy_n(s.bf16.data(), n, newest);
      } else {
        MOBIUS_RETURN_IF_ERROR(s.model->SetWeight(name, begin, n, s.bf16.data()));
      }
    }
  }
  ++s.step;
  return Finish(loss, lr, norm, start, loss_scale, outcome.skipped);
}

// The global norm of the step's (scaled) gradients -> the unscaled norm and AdamW's grad_scale
// (clipping and unscaling in one factor), recorded with the loss scaler (train/loss_scaler.h).
absl::StatusOr<StandaloneTrainer::Outcome> StandaloneTrainer::RecordNorm(double scaled_norm,
                                                                         float loss_scale) {
  State& s = *s_;
  const TrainerOptions& o = s.options;
  if (!std::isfinite(scaled_norm) && !s.scaler.enabled()) {
    return absl::InternalError(absl::StrCat("step ", s.step + 1, ": the gradient norm is ",
                                            scaled_norm, " (training diverged; lower --lr)"));
  }
  Outcome out;
  s.scaler_previous = s.scaler;
  MOBIUS_ASSIGN_OR_RETURN(out.skipped, s.scaler.Record(scaled_norm, s.step + 1));
  out.norm = out.skipped ? 0.0 : scaled_norm / loss_scale;  // a skipped step reports 0
  const float clip = o.grad_clip > 0 ? optim::ClipScale(out.norm, o.grad_clip) : 1.0f;
  out.grad_scale = clip / loss_scale;
  return out;
}

// The step's statistics, then the evaluation and the checkpoint the step is due.
absl::StatusOr<StepStats> StandaloneTrainer::Finish(float loss, double lr, double norm,
                                                    Clock::time_point start, float loss_scale,
                                                    bool skipped) {
  State& s = *s_;
  const TrainerOptions& o = s.options;
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  StepStats st;
  st.step = s.step;
  st.total_steps = o.steps;
  st.loss = loss;
  st.lr = lr;
  st.grad_norm = norm;
  if (s.scaler.enabled()) st.loss_scale = loss_scale;
  st.skipped = skipped;
  st.tokens_per_second = static_cast<double>(o.batch * o.seq) / seconds;
  st.milliseconds = seconds * 1e3;
  if (o.eval_every > 0 && (s.step % o.eval_every == 0 || done())) {
    MOBIUS_ASSIGN_OR_RETURN(st.eval_loss, EvalLoss());
  }
  if (!o.checkpoint_dir.empty() &&
      ((o.checkpoint_every > 0 && s.step % o.checkpoint_every == 0) || done())) {
    MOBIUS_ASSIGN_OR_RETURN(st.checkpoint, SaveCheckpointNow());
  }
  return st;
}

// A LoRA step after the forward-backward: the adapters' gradients come down whole (they are
// small), their global norm adds each tensor's chunk partials in PEFT-name order (the pipeline's
// order too), and AdamW (decay on A and B, as the Hugging Face Trainer applies it) updates the fp32
// adapters, which go back up as they are: adapters compute in fp32, nothing is rounded to bf16.
absl::StatusOr<StepStats> StandaloneTrainer::FinishAdapterStep(float loss, float loss_scale,
                                                               Clock::time_point start) {
  State& s = *s_;
  const TrainerOptions& o = s.options;
  std::map<std::string, std::vector<float>> grads;
  double sum = 0.0;
  std::vector<double> partials;
  for (const auto& [name, t] : s.adapters.master.tensors) {
    std::vector<float>& g = grads[name];
    g.resize(t.data.size());
    MOBIUS_RETURN_IF_ERROR(s.model->ReadAdapterGrad(name, g.data()));
    partials.assign((g.size() + optim::CpuAdamW::kChunkElements - 1) /
                        optim::CpuAdamW::kChunkElements,
                    0.0);
    s.adamw->ChunkSquares(g, partials.data());
    for (double p : partials) sum += p;
  }
  MOBIUS_ASSIGN_OR_RETURN(const Outcome outcome, RecordNorm(std::sqrt(sum), loss_scale));
  const double lr = s.schedule->At(s.step + 1);
  if (outcome.skipped) {
    ++s.step;
    return Finish(loss, lr, outcome.norm, start, loss_scale, true);
  }
  const float scale = outcome.grad_scale;
  const double norm = outcome.norm;
  MOBIUS_RETURN_IF_ERROR(s.adamw->SetLearningRate(lr));
  std::vector<optim::ParamBuffers> buffers;
  for (auto& [name, t] : s.adapters.master.tensors) {
    buffers.push_back({.master = t.data.data(), .m = s.adapters.adam_m.data(name),
                       .v = s.adapters.adam_v.data(name), .grad = grads.at(name).data(),
                       .bf16_out = nullptr, .n = t.data.size(), .decay = true});
  }
  MOBIUS_RETURN_IF_ERROR(s.adamw->Step(s.step + 1, scale, buffers));
  for (const auto& [name, t] : s.adapters.master.tensors) {
    MOBIUS_RETURN_IF_ERROR(s.model->SetAdapter(name, t.data.data()));
  }
  ++s.step;
  return Finish(loss, lr, norm, start, loss_scale, false);
}

absl::StatusOr<float> StandaloneTrainer::EvalLoss() {
  State& s = *s_;
  const int64_t mb = s.options.microbatch, t = s.options.seq;
  MOBIUS_ASSIGN_OR_RETURN(std::vector<data::Batch> batches, s.start.loader->EvalBatches());
  double sum = 0;
  int64_t count = 0;
  // Microbatches of exactly MB rows (a short tail is padded with ignored rows), so the buffers
  // the training step allocated are reused and the device cap holds.
  std::vector<int32_t> tokens(static_cast<size_t>(mb * t)), targets(tokens.size());
  for (const data::Batch& b : batches) {
    for (int64_t row = 0; row < b.b; row += mb) {
      const int64_t rows = std::min(mb, b.b - row);
      std::fill(tokens.begin(), tokens.end(), 0);
      std::fill(targets.begin(), targets.end(), data::kIgnoreIndex);
      std::copy_n(b.tokens.begin() + row * t, rows * t, tokens.begin());
      std::copy_n(b.targets.begin() + row * t, rows * t, targets.begin());
      int64_t n = 0;
      for (int32_t x : targets) n += x != data::kIgnoreIndex;
      if (n == 0) continue;
      MOBIUS_ASSIGN_OR_RETURN(float loss, s.model->Forward(tokens.data(), targets.data(), mb, t));
      sum += static_cast<double>(loss) * n;
      count += n;
    }
  }
  return count > 0 ? static_cast<float>(sum / count) : 0.0f;
}

absl::StatusOr<std::string> StandaloneTrainer::SaveCheckpointNow() {
  State& s = *s_;
  const TrainerOptions& o = s.options;
  if (o.checkpoint_dir.empty()) return absl::FailedPreconditionError("no --checkpoint_dir");
  std::string dir;
  if (s.lora) {
    checkpoint::AdapterTensors tensors{.master = &s.adapters.master};
    if (s.step > 0) {
      tensors.adam_m = &s.adapters.adam_m;
      tensors.adam_v = &s.adapters.adam_v;
    }
    MOBIUS_ASSIGN_OR_RETURN(
        dir, checkpoint::SaveAdapterCheckpoint(
                 o.checkpoint_dir, s.lora->info, s.lora->shapes, tensors,
                 CheckpointState(o, s.step, s.start.loader->position(), LossScaleOf(s.scaler),
                                 s.scaler.good_steps()),
                 CheckpointSaveOptions(o, s.start.config_json).copy_files,
                 o.checkpoint_keep_last));
  } else {
    MOBIUS_ASSIGN_OR_RETURN(dir, SaveTrainingCheckpoint(o, s.config, s.start.config_json,
                                                        s.master, s.adam_m, s.adam_v, s.step,
                                                        s.start.loader->position(),
                                                        LossScaleOf(s.scaler),
                                                        s.scaler.good_steps()));
  }
  s.last_checkpoint_step = s.step;
  return dir;
}

}  // namespace mobius::train
