#include "worker/train/loss_scaler.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace mobius::train {
namespace {

absl::Status CheckScale(double scale, const char* what) {
  int exponent = 0;
  const double mantissa = std::frexp(scale, &exponent);
  if (!std::isfinite(scale) || mantissa != 0.5 || scale < 1.0 || scale > 16777216.0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", scale, " must be a power of two in [1, 2^24]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LossScaler> LossScaler::ForOptions(const TrainerOptions& o) {
  LossScaler s;
  if (o.precision != "fp16") return s;
  if (absl::Status st = CheckScale(o.loss_scale_init, "loss_scale_init"); !st.ok()) return st;
  if (o.loss_scale_window < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss_scale_window ", o.loss_scale_window, " must be >= 1"));
  }
  s.enabled_ = true;
  s.scale_ = o.loss_scale_init;
  s.window_ = o.loss_scale_window;
  return s;
}

absl::StatusOr<bool> LossScaler::Record(double scaled_norm, int64_t step) {
  if (!enabled_) return false;
  if (std::isfinite(scaled_norm)) {
    if (++good_steps_ >= window_) {
      good_steps_ = 0;
      if (scale_ < 16777216.0) scale_ *= 2;
    }
    return false;
  }
  good_steps_ = 0;
  if (scale_ <= 1.0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "step ", step, ": the gradients are not finite even at loss scale 1 (fp16 overflow "
        "without scaling: training diverged; lower the lr, or use precision bf16)"));
  }
  scale_ *= 0.5;
  return true;
}

absl::Status LossScaler::Restore(double scale, int64_t good_steps) {
  if (!enabled_) return absl::OkStatus();
  if (absl::Status st = CheckScale(scale, "checkpoint loss_scale"); !st.ok()) return st;
  if (good_steps < 0 || good_steps >= window_) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint loss_scale_good_steps ", good_steps,
                                                   " must be in [0, ", window_, ")"));
  }
  scale_ = scale;
  good_steps_ = good_steps;
  return absl::OkStatus();
}

float ScaleFor(const TrainerOptions& options, int64_t step, const LossScaler& current,
               const LossScaler& previous) {
  if (options.optimizer_staleness == 0 || IsSyncStep(options, step - 1)) return current.scale();
  return previous.scale();
}

}  // namespace mobius::train
