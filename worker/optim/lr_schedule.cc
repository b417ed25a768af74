#include "worker/optim/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mobius::optim {

absl::StatusOr<LrSchedule> LrSchedule::Create(const LrScheduleConfig& c) {
  using Kind = LrScheduleConfig::Kind;
  if (!std::isfinite(c.peak_lr) || c.peak_lr <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("LR schedule peak_lr ", c.peak_lr,
                                                   " must be finite and > 0"));
  }
  if (c.warmup_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LR schedule warmup_steps ", c.warmup_steps, " < 0"));
  }
  if (c.kind == Kind::kWarmupCosine) {
    if (!std::isfinite(c.min_lr) || c.min_lr < 0 || c.min_lr > c.peak_lr) {
      return absl::InvalidArgumentError(absl::StrCat("LR schedule min_lr ", c.min_lr,
                                                     " must be in [0, peak_lr=", c.peak_lr, "]"));
    }
    if (c.total_steps <= c.warmup_steps) {
      return absl::InvalidArgumentError(absl::StrCat("LR schedule total_steps ", c.total_steps,
                                                     " must exceed warmup_steps ",
                                                     c.warmup_steps));
    }
  }
  return LrSchedule(c);
}

double LrSchedule::At(int64_t step) const {
  using Kind = LrScheduleConfig::Kind;
  const LrScheduleConfig& c = config_;
  if (step < 1) step = 1;
  if (c.kind == Kind::kConstant) return c.peak_lr;
  if (step <= c.warmup_steps) {
    return c.peak_lr * static_cast<double>(step) / static_cast<double>(c.warmup_steps);
  }
  if (c.kind == Kind::kWarmupConstant) return c.peak_lr;
  if (step >= c.total_steps) return c.min_lr;
  const double progress = static_cast<double>(step - c.warmup_steps) /
                          static_cast<double>(c.total_steps - c.warmup_steps);
  return c.min_lr + (c.peak_lr - c.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace mobius::optim
