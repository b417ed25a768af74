#include "worker/train/training_setup.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/model/layer_units.h"
#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "common/model/model_config_parse.h"
#include "common/status_macros.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/checkpoint/model_init.h"

namespace mobius::train {
namespace {


absl::Status ValidateTrainerOptionsImpl(TrainerOptions& o) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (o.model_dir.empty()) return bad("--model is required");
  if (o.data_path.empty()) return bad("--data is required");
  if (o.data_raw_bytes != 0 && o.data_raw_bytes != 2 && o.data_raw_bytes != 4) {
    return bad("--data_raw_bytes must be 2 or 4 (got ", o.data_raw_bytes, ")");
  }
  if (o.steps <= 0 || o.steps > kMaxSteps) {
    return bad("--steps must be in [1, ", kMaxSteps, "] (got ", o.steps, ")");
  }
  if (o.batch <= 0) return bad("--batch must be positive (got ", o.batch, ")");
  if (o.seq <= 0) return bad("--seq must be positive (got ", o.seq, ")");
  o.microbatch = o.EffectiveMicrobatch();
  if (o.microbatch < 0 || o.batch % o.microbatch != 0) {
    return bad("--batch ", o.batch, " is not a multiple of --microbatch ", o.microbatch);
  }
  if (!(o.lr > 0) || !std::isfinite(o.lr)) return bad("--lr must be positive (got ", o.lr, ")");
  if (o.schedule != "cosine" && o.schedule != "constant") {
    return bad("--schedule must be cosine or constant (got \"", o.schedule, "\")");
  }
  if (o.backend != "cpu" && o.backend != "cuda" && o.backend != "auto") {
    return bad("--backend must be cpu, cuda or auto (got \"", o.backend, "\")");
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
  if (o.precision != "bf16" && o.precision != "fp16") {
    return bad("--precision must be bf16 or fp16 (got \"", o.precision, "\")");
  }
  if (o.precision == "fp16" && !(o.loss_scale_init >= 1 && o.loss_scale_init <= 16777216.0 &&
                                 std::exp2(std::round(std::log2(o.loss_scale_init))) ==
                                     o.loss_scale_init)) {
    return bad("--loss_scale_init must be a power of two in [1, 2^24] (got ", o.loss_scale_init,
               ")");
  }
  if (o.precision == "fp16" && o.loss_scale_window < 1) {
    return bad("--loss_scale_window must be >= 1 (got ", o.loss_scale_window, ")");
  }
  if (o.optimizer_staleness != 0 && o.optimizer_staleness != 1) {
    return bad("--optimizer_staleness must be 0 or 1 (got ", o.optimizer_staleness, ")");
  }
  // The adapter's own ranges; what needs the model (targets, rank <= their dimensions) is
  // model::ValidateLora's, where the model is loaded.
  if (const AdapterOptions& a = o.adapter; a.enabled()) {
    if (a.type != "lora") return bad("adapter type must be \"lora\" (got \"", a.type, "\")");
    if (a.rank < 1) return bad("--lora_rank must be >= 1 (got ", a.rank, ")");
    if (!(a.alpha > 0) || !std::isfinite(a.alpha)) {
      return bad("--lora_alpha must be positive (got ", a.alpha, ")");
    }
    if (!(a.dropout >= 0 && a.dropout < 1)) {
      return bad("--lora_dropout must be in [0, 1) (got ", a.dropout, ")");
    }
    if (!a.base_quantization.empty() && a.base_quantization != "nf4") {
      return bad("--lora_base must be bf16 or nf4 (got \"", a.base_quantization, "\")");
    }
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

absl::Status OpenData(const TrainerOptions& o, TrainingStart& s) {
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

absl::Status LoadModel(const TrainerOptions& o, bool parameters, TrainingStart& s) {
  const std::string& dir = o.model_dir;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("model directory ", dir, " does not exist"));
  }
  MOBIUS_ASSIGN_OR_RETURN(s.config_json, ReadText(dir + "/config.json"));
  if (parameters) {
    MOBIUS_ASSIGN_OR_RETURN(checkpoint::LoadedModel loaded, checkpoint::ReadModelDirectory(dir));
    s.config = loaded.config;
    s.master = std::move(loaded.params);
    s.nf4_base = std::move(loaded.nf4);
    if (!o.adapter.enabled()) {  // a frozen base (LoRA) has no optimizer state
      s.adam_m = reference::ZeroParameters(s.config);
      s.adam_v = reference::ZeroParameters(s.config);
    }
  } else {
    MOBIUS_ASSIGN_OR_RETURN(s.config, model::LoadModelConfig(dir));
    MOBIUS_RETURN_IF_ERROR(reference::ValidateConfig(s.config));
  }
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

absl::Status Resume(const TrainerOptions& o, bool parameters, TrainingStart& s) {
  auto latest = checkpoint::LatestCheckpoint(o.checkpoint_dir);
  if (!latest.ok()) {
    return absl::NotFoundError(absl::StrCat("--resume: no complete checkpoint in ",
                                            o.checkpoint_dir));
  }
  checkpoint::LoadedCheckpoint ckpt;
  if (o.adapter.enabled()) {
    // An adapter run's checkpoint holds the adapters only (lora_setup.h loads them); the base
    // comes from the model directory, frozen.
    MOBIUS_ASSIGN_OR_RETURN(ckpt.state, checkpoint::ReadTrainingState(*latest));
  } else if (parameters) {
    MOBIUS_ASSIGN_OR_RETURN(ckpt, checkpoint::LoadCheckpoint(*latest, s.config));
  } else {
    MOBIUS_ASSIGN_OR_RETURN(checkpoint::OpenedCheckpoint opened,
                            checkpoint::OpenCheckpoint(*latest, s.config));
    ckpt.state = opened.state;
  }
  s.resume_directory = *latest;
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
  s.step = ckpt.state.step;
  s.loss_scale = ckpt.state.loss_scale;
  s.loss_scale_good_steps = ckpt.state.loss_scale_good_steps;
  if (!parameters || o.adapter.enabled()) return absl::OkStatus();
  s.master = std::move(ckpt.master);
  if (!ckpt.adam_m.tensors.empty()) {
    s.adam_m = std::move(ckpt.adam_m);
    s.adam_v = std::move(ckpt.adam_v);
  }
  s.step = ckpt.state.step;
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTrainerOptions(TrainerOptions& options) {
  return ValidateTrainerOptionsImpl(options);
}

absl::StatusOr<TrainingStart> LoadTrainingStart(const TrainerOptions& options, bool parameters) {
  TrainingStart s;
  MOBIUS_RETURN_IF_ERROR(LoadModel(options, parameters, s));
  if (options.seq > s.config.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat("--seq ", options.seq,
                                                   " exceeds the model's max_position_embeddings ",
                                                   s.config.max_position_embeddings));
  }
  MOBIUS_RETURN_IF_ERROR(OpenData(options, s));
  if (options.resume) MOBIUS_RETURN_IF_ERROR(Resume(options, parameters, s));
  return s;
}

absl::StatusOr<std::unique_ptr<optim::CpuAdamW>> MakeAdamW(const TrainerOptions& o) {
  optim::CpuAdamW::Options ao;
  ao.config = {.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps,
               .weight_decay = o.weight_decay};
  ao.num_threads = o.threads;
  return optim::CpuAdamW::Create(ao);
}

absl::StatusOr<optim::LrSchedule> MakeLrSchedule(const TrainerOptions& o) {
  optim::LrScheduleConfig lc{.peak_lr = o.lr, .min_lr = o.min_lr, .warmup_steps = o.warmup,
                             .total_steps = o.steps};
  lc.kind = o.schedule == "cosine" ? optim::LrScheduleConfig::Kind::kWarmupCosine
            : o.warmup > 0         ? optim::LrScheduleConfig::Kind::kWarmupConstant
                                   : optim::LrScheduleConfig::Kind::kConstant;
  return optim::LrSchedule::Create(lc);
}

checkpoint::SaveOptions CheckpointSaveOptions(const TrainerOptions& o,
                                              const std::string& config_json) {
  checkpoint::SaveOptions so;
  so.config_json = config_json;
  so.keep_last = o.checkpoint_keep_last;
  so.export_model = o.checkpoint_export;
  if (!o.tokenizer_dir.empty()) so.copy_files = checkpoint::TokenizerFiles(o.tokenizer_dir);
  return so;
}

checkpoint::TrainingState CheckpointState(const TrainerOptions& o, int64_t step,
                                          data::LoaderPosition p, double loss_scale,
                                          int64_t good_steps) {
  checkpoint::TrainingState state;
  state.loss_scale = loss_scale;
  state.loss_scale_good_steps = good_steps;
  state.step = step;
  state.lr_step = step;
  state.rng_state = absl::StrCat(o.seed);
  state.data_position = {{"epoch", absl::StrCat(p.epoch)},
                         {"batch_in_epoch", absl::StrCat(p.batch_in_epoch)},
                         {"seed", absl::StrCat(o.seed)},
                         {"seq", absl::StrCat(o.seq)},
                         {"batch", absl::StrCat(o.batch)}};
  return state;
}

absl::StatusOr<std::string> SaveTrainingCheckpoint(const TrainerOptions& o,
                                                   const model::ModelConfig& config,
                                                   const std::string& config_json,
                                                   const reference::Parameters& master,
                                                   const reference::Parameters& adam_m,
                                                   const reference::Parameters& adam_v,
                                                   int64_t step, data::LoaderPosition p,
                                                   double loss_scale, int64_t good_steps) {
  if (o.checkpoint_dir.empty()) return absl::FailedPreconditionError("no --checkpoint_dir");
  checkpoint::CheckpointTensors tensors{.master = &master};
  if (step > 0) {
    tensors.adam_m = &adam_m;
    tensors.adam_v = &adam_v;
  }
  return checkpoint::SaveCheckpoint(o.checkpoint_dir, config, tensors, CheckpointState(o, step, p, loss_scale, good_steps),
                                    CheckpointSaveOptions(o, config_json));
}

void RoundWeights(bool fp16, const float* src, uint16_t* dst, size_t n) {
  if (fp16) {
    numeric::Fp32ToF16(src, dst, n);
  } else {
    numeric::Fp32ToBf16(src, dst, n);
  }
}

}  // namespace mobius::train
