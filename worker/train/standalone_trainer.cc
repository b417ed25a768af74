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
#include "absl/strings/str_format.h"
#include "common/model/layer_units.h"
#include "common/numeric/bf16.h"
#include "common/status_macros.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/checkpoint/model_init.h"
#include "worker/data/loader.h"
#include "worker/data/token_file.h"
#include "worker/model/resident_model.h"
#include "worker/optim/adamw.h"
#include "worker/optim/lr_schedule.h"

namespace mobius::train {

using Clock = std::chrono::steady_clock;

struct StandaloneTrainer::State {
  TrainerOptions options;
  model::ModelConfig config;
  std::string config_json;  // the model directory's config.json, kept verbatim in checkpoints
  reference::Parameters master, adam_m, adam_v;
  std::map<std::string, std::vector<uint16_t>> bf16;  // upload copy, = bf16(master)
  std::map<std::string, bool> decay;                  // by HF name (layer_units.h)
  std::map<std::string, std::vector<float>> grads;    // last step's
  std::shared_ptr<const data::TokenFile> file;
  std::unique_ptr<data::TokenLoader> loader;
  std::unique_ptr<backend::CpuBackend> backend;  // declared before the model: destroyed after it
  std::unique_ptr<units::ResidentModel> model;
  std::unique_ptr<optim::CpuAdamW> adamw;
  std::optional<optim::LrSchedule> schedule;
  int64_t step = 0;  // optimizer steps done
  int64_t last_checkpoint_step = -1;
};

namespace {

absl::Status ValidateOptions(TrainerOptions& o) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (o.model_dir.empty()) return bad("--model is required");
  if (o.data_path.empty()) return bad("--data is required");
  if (o.data_raw_bytes != 0 && o.data_raw_bytes != 2 && o.data_raw_bytes != 4) {
    return bad("--data_raw_bytes must be 2 or 4 (got ", o.data_raw_bytes, ")");
  }
  if (o.steps <= 0) return bad("--steps must be positive (got ", o.steps, ")");
  if (o.batch <= 0) return bad("--batch must be positive (got ", o.batch, ")");
  if (o.seq <= 0) return bad("--seq must be positive (got ", o.seq, ")");
  if (o.microbatch == 0) o.microbatch = o.batch;
  if (o.microbatch < 0 || o.batch % o.microbatch != 0) {
    return bad("--batch ", o.batch, " is not a multiple of --microbatch ", o.microbatch);
  }
  if (!(o.lr > 0) || !std::isfinite(o.lr)) return bad("--lr must be positive (got ", o.lr, ")");
  if (o.schedule != "cosine" && o.schedule != "constant") {
    return bad("--schedule must be cosine or constant (got \"", o.schedule, "\")");
  }
  if (o.schedule == "cosine" && o.warmup >= o.steps) {
    return bad("--warmup ", o.warmup, " must be below --steps ", o.steps, " for cosine");
  }
  if (!(o.grad_clip >= 0)) return bad("--grad_clip must be >= 0 (got ", o.grad_clip, ")");
  if (o.eval_every < 0 || o.checkpoint_every < 0 || o.warmup < 0 || o.threads < 0) {
    return bad("--eval_every, --checkpoint_every, --warmup and --threads must be >= 0");
  }
  if (o.eval_every > 0 && !(o.eval_fraction > 0)) {
    return bad("--eval_every needs --eval_fraction > 0 (a held-out split)");
  }
  if ((o.resume || o.checkpoint_every > 0) && o.checkpoint_dir.empty()) {
    return bad("--resume and --checkpoint_every need --checkpoint_dir");
  }
  if (o.threads == 0) o.threads = std::max(1u, std::thread::hardware_concurrency());
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Token ids beyond the model's vocabulary are an input error before any step, not a failed op
// mid-run: one sequential pass over the (memory-mapped) file.
absl::Status CheckTokenIds(const data::TokenFile& file, int64_t vocab, const std::string& path) {
  for (int64_t i = 0; i < file.num_tokens(); ++i) {
    if (file.token(i) >= static_cast<uint64_t>(vocab)) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", file.token(i), " at position ", i,
                                                     " of ", path, " is >= the model's vocab_size ",
                                                     vocab));
    }
  }
  return absl::OkStatus();
}

absl::Status OpenData(StandaloneTrainer::State& s) {
  const TrainerOptions& o = s.options;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(o.data_path, ec)) {
    return absl::NotFoundError(absl::StrCat("data file ", o.data_path, " does not exist"));
  }
  std::unique_ptr<data::TokenFile> file;
  if (o.data_raw_bytes != 0) {
    MOBIUS_ASSIGN_OR_RETURN(file, data::TokenFile::OpenRaw(o.data_path, o.data_raw_bytes,
                                                           s.config.vocab_size));
  } else {
    MOBIUS_ASSIGN_OR_RETURN(file, data::TokenFile::Open(o.data_path));
  }
  MOBIUS_RETURN_IF_ERROR(CheckTokenIds(*file, s.config.vocab_size, o.data_path));
  s.file = std::move(file);
  data::LoaderOptions lo{.seq_len = o.seq, .batch_size = o.batch, .seed = o.seed,
                         .eval_fraction = o.eval_fraction};
  auto loader = data::TokenLoader::Create(s.file, lo);
  if (!loader.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(o.data_path, ": ", loader.status().message()));
  }
  s.loader = *std::move(loader);
  if (o.eval_every > 0 && s.loader->num_eval_sequences() == 0) {
    return absl::InvalidArgumentError("--eval_fraction leaves no eval sequences");
  }
  return absl::OkStatus();
}

absl::Status LoadModel(StandaloneTrainer::State& s) {
  const std::string& dir = s.options.model_dir;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("model directory ", dir, " does not exist"));
  }
  MOBIUS_ASSIGN_OR_RETURN(checkpoint::LoadedModel loaded, checkpoint::ReadModelDirectory(dir));
  MOBIUS_ASSIGN_OR_RETURN(s.config_json, ReadText(dir + "/config.json"));
  s.config = loaded.config;
  s.master = std::move(loaded.params);
  s.adam_m = reference::ZeroParameters(s.config);
  s.adam_v = reference::ZeroParameters(s.config);
  MOBIUS_ASSIGN_OR_RETURN(model::ModelDescription desc, model::DescribeModel(s.config));
  for (const model::LayerUnit& unit : desc.units) {
    for (const model::ParamSpec& p : unit.params) s.decay[p.name] = p.weight_decay;
  }
  return absl::OkStatus();
}

std::string PositionValue(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? "" : it->second;
}

absl::Status Resume(StandaloneTrainer::State& s) {
  const TrainerOptions& o = s.options;
  auto latest = checkpoint::LatestCheckpoint(o.checkpoint_dir);
  if (!latest.ok()) {
    return absl::NotFoundError(absl::StrCat("--resume: no complete checkpoint in ",
                                            o.checkpoint_dir));
  }
  MOBIUS_ASSIGN_OR_RETURN(checkpoint::LoadedCheckpoint ckpt,
                          checkpoint::LoadCheckpoint(*latest, s.config));
  const auto& pos = ckpt.state.data_position;
  const std::vector<std::pair<std::string, std::string>> run = {
      {"seed", absl::StrCat(o.seed)}, {"seq", absl::StrCat(o.seq)}, {"batch", absl::StrCat(o.batch)}};
  for (const auto& [key, want] : run) {
    if (PositionValue(pos, key) != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--resume: ", *latest, " was written with --", key, " ", PositionValue(pos, key),
          ", this run has ", want));
    }
  }
  data::LoaderPosition p;
  if (!absl::SimpleAtoi(PositionValue(pos, "epoch"), &p.epoch) ||
      !absl::SimpleAtoi(PositionValue(pos, "batch_in_epoch"), &p.batch_in_epoch)) {
    return absl::InvalidArgumentError(absl::StrCat(*latest, ": bad data_position"));
  }
  s.loader->Seek(p);
  s.master = std::move(ckpt.master);
  if (!ckpt.adam_m.tensors.empty()) {
    s.adam_m = std::move(ckpt.adam_m);
    s.adam_v = std::move(ckpt.adam_v);
  }
  s.step = ckpt.state.step;
  s.last_checkpoint_step = s.step;
  return absl::OkStatus();
}

absl::Status BuildEngine(StandaloneTrainer::State& s) {
  const TrainerOptions& o = s.options;
  backend::CpuBackendOptions bo;
  bo.backend.capacity_bytes = o.device_memory_bytes;
  bo.blas_threads = o.threads;
  bo.op_threads = o.threads;
  MOBIUS_ASSIGN_OR_RETURN(s.backend, backend::CpuBackend::Create(bo));
  MOBIUS_ASSIGN_OR_RETURN(s.model, units::ResidentModel::Create(s.config, s.backend.get(), {}));
  optim::CpuAdamW::Options ao;
  ao.config = {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps,
               .weight_decay = o.weight_decay};
  ao.num_threads = o.threads;
  MOBIUS_ASSIGN_OR_RETURN(s.adamw, optim::CpuAdamW::Create(ao));
  optim::LrScheduleConfig lc{.peak_lr = o.lr, .min_lr = o.min_lr, .warmup_steps = o.warmup,
                             .total_steps = o.steps};
  lc.kind = o.schedule == "cosine" ? optim::LrScheduleConfig::Kind::kWarmupCosine
            : o.warmup > 0         ? optim::LrScheduleConfig::Kind::kWarmupConstant
                                   : optim::LrScheduleConfig::Kind::kConstant;
  MOBIUS_ASSIGN_OR_RETURN(optim::LrSchedule schedule, optim::LrSchedule::Create(lc));
  s.schedule = schedule;
  for (const auto& [name, t] : s.master.tensors) {
    std::vector<uint16_t>& b = s.bf16[name];
    b.resize(t.data.size());
    numeric::Fp32ToBf16(t.data.data(), b.data(), b.size());
  }
  MOBIUS_RETURN_IF_ERROR(s.model->SetWeights(s.bf16));
  // One throwaway microbatch allocates every per-shape buffer now, so a device cap too small for
  // one microbatch fails before the first step (Step zeroes the gradients it leaves).
  std::vector<int32_t> zeros(static_cast<size_t>(o.microbatch * o.seq), 0);
  absl::StatusOr<float> warm =
      s.model->ForwardBackward(zeros.data(), zeros.data(), o.microbatch, o.seq, 0.0f);
  if (!warm.ok()) return warm.status();
  return absl::OkStatus();
}

}  // namespace

std::string FormatStepLine(const StepStats& st) {
  std::string line = absl::StrFormat(
      "step %d/%d | loss %.4f | lr %.2e | grad_norm %.3f | tok/s %.0f | %.0f ms", st.step,
      st.total_steps, st.loss, st.lr, st.grad_norm, st.tokens_per_second, st.milliseconds);
  if (st.eval_loss) absl::StrAppendFormat(&line, " | eval loss %.4f", *st.eval_loss);
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
  MOBIUS_RETURN_IF_ERROR(ValidateOptions(s->options));
  MOBIUS_RETURN_IF_ERROR(LoadModel(*s));
  if (s->options.seq > s->config.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat("--seq ", s->options.seq,
                                                   " exceeds the model's max_position_embeddings ",
                                                   s->config.max_position_embeddings));
  }
  MOBIUS_RETURN_IF_ERROR(OpenData(*s));
  if (s->options.resume) MOBIUS_RETURN_IF_ERROR(Resume(*s));
  absl::Status engine = BuildEngine(*s);
  if (absl::IsResourceExhausted(engine)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "--device_memory_bytes ", s->options.device_memory_bytes,
        " cannot hold the model and one microbatch of ", s->options.microbatch, " x ",
        s->options.seq, " tokens: ", engine.message()));
  }
  MOBIUS_RETURN_IF_ERROR(engine);
  return std::unique_ptr<StandaloneTrainer>(new StandaloneTrainer(std::move(s)));
}

bool StandaloneTrainer::done() const { return s_->step >= s_->options.steps; }
int64_t StandaloneTrainer::step() const { return s_->step; }
const model::ModelConfig& StandaloneTrainer::config() const { return s_->config; }
const reference::Parameters& StandaloneTrainer::master() const { return s_->master; }
const std::map<std::string, std::vector<float>>& StandaloneTrainer::last_grads() const {
  return s_->grads;
}

std::string StandaloneTrainer::Describe() const {
  int64_t params = 0;
  for (const auto& [name, t] : s_->master.tensors) params += t.numel();
  const TrainerOptions& o = s_->options;
  return absl::StrCat(model::FamilyName(s_->config.family), " ", params, " parameters; data ",
                      s_->file->num_tokens(), " tokens, ", s_->loader->num_train_sequences(),
                      " train / ", s_->loader->num_eval_sequences(), " eval sequences; B ",
                      o.batch, " MB ", o.microbatch, " T ", o.seq, "; ", o.threads,
                      " threads; starting at step ", s_->step, " of ", o.steps);
}

absl::StatusOr<StepStats> StandaloneTrainer::Step() {
  State& s = *s_;
  const TrainerOptions& o = s.options;
  if (done()) return absl::FailedPreconditionError("all steps are done");
  const Clock::time_point start = Clock::now();
  MOBIUS_ASSIGN_OR_RETURN(data::Batch batch, s.loader->NextTrainBatch());
  MOBIUS_ASSIGN_OR_RETURN(float loss, s.model->Step(batch.tokens.data(), batch.targets.data(),
                                                    batch.b, batch.t, o.batch / o.microbatch));
  MOBIUS_ASSIGN_OR_RETURN(s.grads, s.model->Grads());

  std::vector<std::span<const float>> spans;
  std::vector<optim::ParamBuffers> buffers;
  for (auto& [name, t] : s.master.tensors) {
    const std::vector<float>& g = s.grads.at(name);
    spans.emplace_back(g.data(), g.size());
    buffers.push_back({.master = t.data.data(), .m = s.adam_m.data(name),
                       .v = s.adam_v.data(name), .grad = g.data(),
                       .bf16_out = s.bf16.at(name).data(), .n = g.size(),
                       .decay = s.decay.at(name)});
  }
  const double norm = s.adamw->GlobalGradNorm(spans);
  if (!std::isfinite(norm)) {
    return absl::InternalError(absl::StrCat("step ", s.step + 1, ": the gradient norm is ", norm,
                                            " (training diverged; lower --lr)"));
  }
  const float scale = o.grad_clip > 0 ? optim::ClipScale(norm, o.grad_clip) : 1.0f;
  const double lr = s.schedule->At(s.step + 1);
  MOBIUS_RETURN_IF_ERROR(s.adamw->SetLearningRate(lr));
  MOBIUS_RETURN_IF_ERROR(s.adamw->Step(s.step + 1, scale, buffers));
  MOBIUS_RETURN_IF_ERROR(s.model->SetWeights(s.bf16));  // the next step's weights
  ++s.step;
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  StepStats st;
  st.step = s.step;
  st.total_steps = o.steps;
  st.loss = loss;
  st.lr = lr;
  st.grad_norm = norm;
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

absl::StatusOr<float> StandaloneTrainer::EvalLoss() {
  State& s = *s_;
  const int64_t mb = s.options.microbatch, t = s.options.seq;
  MOBIUS_ASSIGN_OR_RETURN(std::vector<data::Batch> batches, s.loader->EvalBatches());
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
      MOBIUS_ASSIGN_OR_RETURN(float loss,
                              s.model->ForwardBackward(tokens.data(), targets.data(), mb, t, 0.0f));
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
  checkpoint::TrainingState state;
  state.step = s.step;
  state.lr_step = s.step;
  state.rng_state = absl::StrCat(o.seed);
  const data::LoaderPosition p = s.loader->position();
  state.data_position = {{"epoch", absl::StrCat(p.epoch)},
                         {"batch_in_epoch", absl::StrCat(p.batch_in_epoch)},
                         {"seed", absl::StrCat(o.seed)},
                         {"seq", absl::StrCat(o.seq)},
                         {"batch", absl::StrCat(o.batch)}};
  checkpoint::CheckpointTensors tensors{.master = &s.master};
  if (s.step > 0) {
    tensors.adam_m = &s.adam_m;
    tensors.adam_v = &s.adam_v;
  }
  checkpoint::SaveOptions so;
  so.config_json = s.config_json;
  MOBIUS_ASSIGN_OR_RETURN(std::string dir,
                          checkpoint::SaveCheckpoint(o.checkpoint_dir, s.config, tensors, state, so));
  s.last_checkpoint_step = s.step;
  return dir;
}

}  // namespace mobius::train
