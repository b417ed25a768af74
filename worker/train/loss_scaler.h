// Dynamic loss scaling for training.precision fp16 (train::TrainerOptions::precision), the rule
// torch.amp.GradScaler applies, shared by both executors so that their steps stay bitwise equal.
//
// The head's backward multiplies the loss's gradient by scale(); every gradient then carries the
// factor, and the optimizer divides it out (folded into AdamW's grad_scale with the clipping
// factor; the reported gradient norm is the unscaled one). fp16 activations and branch gradients
// overflow to infinity where the scaled values pass 65504: a step whose global gradient norm is not
// finite is skipped (no weight, moment or master change) and halves the scale; `window` finite
// steps in a row double it. A scale that would fall below 1 means the gradients overflow even
// unscaled: the run stops with an error instead of skipping forever.
//
// Which scale a step uses: step k (1-based) uses the scaler after steps 1 .. k-1 with a
// synchronous optimizer or after a sync step (train::IsSyncStep), else after steps 1 .. k-2 (with
// optimizer staleness 1, step k's backward can run before step k-1's norm exists). ScaleFor holds
// the rule; an executor keeps the scaler of the last two recorded steps.
//
// Without fp16 (disabled) the scale is 1 and nothing is ever skipped. Value type; not thread-safe.
#ifndef MOBIUS_WORKER_TRAIN_LOSS_SCALER_H_
#define MOBIUS_WORKER_TRAIN_LOSS_SCALER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/run/trainer_options.h"

namespace mobius::train {

class LossScaler {
 public:
  LossScaler() = default;  // disabled
  // Enabled with training.precision fp16: loss_scale_init and loss_scale_window.
  // INVALID_ARGUMENT unless init is a power of two in [1, 2^24] and window >= 1.
  static absl::StatusOr<LossScaler> ForOptions(const TrainerOptions& options);

  bool enabled() const { return enabled_; }
  float scale() const { return static_cast<float>(scale_); }
  int64_t good_steps() const { return good_steps_; }

  // Records one step's global gradient norm (of the scaled gradients): true when the step is
  // skipped (norm not finite). FAILED_PRECONDITION when the scale would fall below 1 (the message
  // names the step). A disabled scaler never skips: a non-finite norm is the caller's error.
  absl::StatusOr<bool> Record(double scaled_norm, int64_t step);

  // A checkpoint's state (trainer_state.json: loss_scale, loss_scale_good_steps); Restore checks
  // it as ForOptions checks init.
  absl::Status Restore(double scale, int64_t good_steps);

 private:
  bool enabled_ = false;
  double scale_ = 1.0;
  int64_t window_ = 1;
  int64_t good_steps_ = 0;
};

// The scale of step `step` (1-based): `current` is the scaler after step - 1, `previous` after
// step - 2 (equal to current before the second step and after a resume).
float ScaleFor(const TrainerOptions& options, int64_t step, const LossScaler& current,
               const LossScaler& previous);

}  // namespace mobius::train

#endif  // MOBIUS_WORKER_TRAIN_LOSS_SCALER_H_
