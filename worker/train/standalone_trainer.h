// StandaloneTrainer: single-process training with the whole model resident on one CPU backend
// (`mobius-worker train --standalone`): the baseline the pipeline runtime must reproduce.
//
// Pieces (each documented in its own header):
//   model directory   ReadModelDirectory (bf16 or fp32 safetensors) -> fp32 master weights
//   engine            CpuBackend (capped "device" memory) + units::ResidentModel; activations
//                     kept from forward to backward when the cap holds them (else, or with
//                     options.recompute, recomputed per block: bitwise the same gradients);
//                     bf16 weights uploaded from the bf16 copy AdamW writes
//   data              data::TokenLoader over a token file (or a headerless llm.c file): packed
//                     sequences, seeded per-epoch shuffle, eval split, resumable position
//   optimizer         optim::CpuAdamW over the masters; weight decay only where the model
//                     description says so (not on norms and biases, layer_units.h); global-norm
//                     clipping (PyTorch's clip_grad_norm_); LrSchedule (warmup + cosine/constant)
//   checkpoints       checkpoint::SaveCheckpoint (bf16 model + fp32 master + Adam m/v + state)
//   LoRA              (options.adapter) the base frozen in bf16, the adapters (lora_setup.h)
//                     trained: their fp32 masters and moments on the host, AdamW and the global
//                     norm over them alone (PEFT's trainable parameters), uploaded after each
//                     update; checkpoints in PEFT's format (checkpoint/adapter_checkpoint.h)
//
// One step: the next batch of B sequences, split into B/MB microbatches, each scaled by its share
// of the batch's non-ignored targets (ResidentModel::Step); grad norm; clip; AdamW at the
// schedule's lr. Every piece is deterministic on the CPU backend for any thread count, so a run
// resumed from a checkpoint continues bit-exactly (same losses, same weights).
//
// Checkpoint state: TrainingState.step/lr_step = steps done; data_position holds the loader
// position ("epoch", "batch_in_epoch") and the run's shape ("seed", "seq", "batch"), which a resume
// must match; rng_state is the data seed (the loader's shuffle is the trainer's only randomness).
//
//   auto trainer = *StandaloneTrainer::Create(options);   // validates everything, loads, resumes
//   while (!trainer->done()) { StepStats s = *trainer->Step(); puts(FormatStepLine(s).c_str()); }
//
// Not thread-safe; one caller.
#ifndef MOBIUS_WORKER_TRAIN_STANDALONE_TRAINER_H_
#define MOBIUS_WORKER_TRAIN_STANDALONE_TRAINER_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "worker/reference/parameters.h"
#include "common/run/trainer_options.h"

namespace mobius::train {


struct StepStats {
  int64_t step = 0;              // 1-based, steps done after this one
  int64_t total_steps = 0;
  float loss = 0;                // the batch's mean loss (before the update)
  double lr = 0;
  double grad_norm = 0;          // global norm before clipping (unscaled; 0 when skipped)
  double tokens_per_second = 0;  // B * T / step time
  double milliseconds = 0;       // step wall time (batch, forward/backward, optimizer)
  std::optional<float> eval_loss;  // after this step's update, when an eval ran
  std::string checkpoint;          // directory saved after this step, if any
  // fp16 (train/loss_scaler.h): the loss scale this step's backward used, and whether the step
  // was skipped (its gradients overflowed: nothing was updated). 0 / false with bf16.
  float loss_scale = 0;
  bool skipped = false;
};

// "step 12/100 | loss 3.4521 | lr 3.00e-04 | grad_norm 1.234 | tok/s 1234 | 456 ms"
// [+ " | eval loss 3.3000"] [+ " | loss scale 65536" | " | skipped (overflow at loss scale 65536)"].
std::string FormatStepLine(const StepStats& stats);

class StandaloneTrainer {
 public:
  // Validates the options and inputs, loads the model (and the checkpoint when resuming) and
  // allocates everything a step needs, so that bad input fails here, before any step:
  //   INVALID_ARGUMENT  bad option values, B % MB != 0, data shorter than one batch, a token id
  //                     >= the model's vocabulary (with its position), a checkpoint of another run
  //   NOT_FOUND         missing model directory, data file, or (resume) checkpoint
  //   RESOURCE_EXHAUSTED  the device cap cannot hold the model and one microbatch
  static absl::StatusOr<std::unique_ptr<StandaloneTrainer>> Create(const TrainerOptions& options);
  ~StandaloneTrainer();

  // One optimizer step (plus the eval and checkpoint that fall on it).
  // FAILED_PRECONDITION when done(); INTERNAL for a non-finite gradient norm (the update is
  // skipped: the run diverged).
  absl::StatusOr<StepStats> Step();

  // Saves a checkpoint of the current state into checkpoint_dir; returns its directory.
  absl::StatusOr<std::string> SaveCheckpointNow();

  // Mean loss over the eval split (forward only, per microbatch; gradients untouched).
  absl::StatusOr<float> EvalLoss();

  bool done() const;
  int64_t step() const;
  const model::ModelConfig& config() const;
  const reference::Parameters& master() const;  // fp32 master weights (LoRA: the frozen base)
  // LoRA runs: the adapters (fp32, by PEFT name); empty otherwise.
  const reference::Parameters& adapters() const;
  // Gradients of the last step (fp32, by HF name, before clipping), downloaded from the device
  // (a whole-model allocation: for tests and tools, not the training path).
  absl::StatusOr<std::map<std::string, std::vector<float>>> LastGrads() const;
  std::string Describe() const;  // one line: model, parameters, data, shapes (for the log)
  bool recomputes() const;       // whether the backward recomputes the blocks' activations

  struct State;  // internal

 private:
  explicit StandaloneTrainer(std::unique_ptr<State> state);
  struct Outcome {          // RecordNorm's
    double norm = 0;        // unscaled global norm
    float grad_scale = 1;   // AdamW's: clipping / loss scale
    bool skipped = false;   // fp16 overflow: no update
  };
  absl::StatusOr<Outcome> RecordNorm(double scaled_norm, float loss_scale);
  absl::StatusOr<StepStats> FinishAdapterStep(float loss, float loss_scale,
                                              std::chrono::steady_clock::time_point start);
  absl::StatusOr<StepStats> Finish(float loss, double lr, double norm,
                                   std::chrono::steady_clock::time_point start,
                                   float loss_scale, bool skipped);
  std::unique_ptr<State> s_;
};

}  // namespace mobius::train

#endif  // MOBIUS_WORKER_TRAIN_STANDALONE_TRAINER_H_
