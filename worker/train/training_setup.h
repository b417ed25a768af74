// The pieces of a training run that do not depend on where the model executes, shared by the
// standalone trainer (standalone_trainer.h) and the pipeline workers (worker/runtime/): option
// validation, loading the model directory (or a checkpoint) into fp32 master + Adam moments, the
// data loader at its position, the optimizer and LR schedule, and checkpoint writing. Both
// executors use exactly these functions, so a pipeline run and a standalone run of the same options
// see the same data, the same schedule and the same checkpoints.
//
// Not thread-safe; plain functions over the caller's objects.
#ifndef MOBIUS_WORKER_TRAIN_TRAINING_SETUP_H_
#define MOBIUS_WORKER_TRAIN_TRAINING_SETUP_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "common/numeric/nf4.h"
#include "worker/checkpoint/checkpoint.h"
#include "common/data/loader.h"
#include "common/data/token_file.h"
#include "worker/optim/adamw.h"
#include "worker/optim/lr_schedule.h"
#include "worker/reference/parameters.h"
#include "worker/train/standalone_trainer.h"

namespace mobius::train {

// Checks the options (INVALID_ARGUMENT naming the flag) and fills defaults (microbatch = batch,
// threads = hardware concurrency). An adapter (options.adapter, type "" or "lora") is checked
// for its own ranges only: rank >= 1, alpha > 0, dropout in [0, 1).
absl::Status ValidateTrainerOptions(TrainerOptions& options);

// Everything a run starts from.
struct TrainingStart {
  model::ModelConfig config;
  std::string config_json;                    // config.json verbatim, kept in checkpoints
  // fp32; moments zero unless resumed. Empty when loaded with `parameters = false`.
  reference::Parameters master, adam_m, adam_v;
  // Weights the model directory stores in QLoRA's exact NF4 (a bitsandbytes checkpoint,
  // checkpoint::LoadedModel::nf4); an NF4 run sets them as stored instead of requantising.
  std::map<std::string, numeric::Nf4Tensor> nf4_base;
  std::string resume_directory;               // the checkpoint resumed from; empty: none
  std::map<std::string, bool> decay;          // weight decay by HF name (layer_units.h)
  std::shared_ptr<const data::TokenFile> file;
  std::unique_ptr<data::TokenLoader> loader;  // at the resume position
  int64_t step = 0;                           // optimizer steps done (resume: the checkpoint's)
  double loss_scale = 0;                      // resume of an fp16 run: the scaler's state
  int64_t loss_scale_good_steps = 0;          // (checkpoint::TrainingState); 0: none
};

// Loads the model directory, checks seq against the model, opens and checks the data (every token
// id < vocab), and with options.resume continues from LatestCheckpoint(checkpoint_dir).
// NOT_FOUND for a missing model directory, data file or checkpoint; INVALID_ARGUMENT for data or a
// checkpoint that does not fit the run.
// With `parameters = false` nothing the size of the model is read or held: the model's
// config.json and the checkpoint's trainer_state.json only (its files are checked for presence
// and size, not read), for executors that stream the tensors into their own storage (the pipeline
// workers: worker/runtime/store_fill.h).
// REQUIRES: ValidateTrainerOptions(options) returned OK.
absl::StatusOr<TrainingStart> LoadTrainingStart(const TrainerOptions& options,
                                                bool parameters = true);

// What checkpoints of this run copy besides the tensors and how many they keep
// (options.tokenizer_dir's tokenizer files, keep_last, the model-only export), for
// SaveTrainingCheckpoint and the pipeline's streamed checkpoints alike.
checkpoint::SaveOptions CheckpointSaveOptions(const TrainerOptions& options,
                                              const std::string& config_json);
// trainer_state.json's fields for `step` completed steps at the loader's `position`.
// `loss_scale`, `good_steps`: an fp16 run's scaler after `step` (0: none).
checkpoint::TrainingState CheckpointState(const TrainerOptions& options, int64_t step,
                                          data::LoaderPosition position, double loss_scale = 0,
                                          int64_t good_steps = 0);

absl::StatusOr<std::unique_ptr<optim::CpuAdamW>> MakeAdamW(const TrainerOptions& options);

// dst [n] = src [n] rounded to the run's 16-bit weight format (nearest even): fp16 with
// precision "fp16", else bf16. The optimizer's copies are the same (adamw.h).
void RoundWeights(bool fp16, const float* src, uint16_t* dst, size_t n);
absl::StatusOr<optim::LrSchedule> MakeLrSchedule(const TrainerOptions& options);

// Writes a checkpoint of `step` completed steps with the loader's position; returns its directory.
// Moments are saved when step > 0.
absl::StatusOr<std::string> SaveTrainingCheckpoint(const TrainerOptions& options,
                                                   const model::ModelConfig& config,
                                                   const std::string& config_json,
                                                   const reference::Parameters& master,
                                                   const reference::Parameters& adam_m,
                                                   const reference::Parameters& adam_v,
                                                   int64_t step, data::LoaderPosition position,
                                                   double loss_scale = 0,
                                                   int64_t good_steps = 0);

}  // namespace mobius::train

#endif  // MOBIUS_WORKER_TRAIN_TRAINING_SETUP_H_
