// Learning-rate schedules for fine-tuning: the learning rate to use at each optimizer step.
//
// Steps are 1-based, like AdamWStep's `step`: At(1) is the rate of the first update. With W warmup
// steps and T total steps (kinds that use them):
//   kConstant:        lr(s) = peak_lr
//   kWarmupConstant:  lr(s) = peak_lr * s / W            for s <= W   (so lr(W) = peak_lr)
//                     lr(s) = peak_lr                    for s > W
//   kWarmupCosine:    warmup as above, then with progress = (s - W) / (T - W) for W < s <= T
//                     lr(s) = min_lr + (peak_lr - min_lr) * (1 + cos(pi * progress)) / 2,
//                     so lr(T) = min_lr; lr(s) = min_lr for s > T.
// W = 0 means no warmup. (Unlike Hugging Face's 0-based schedules, the first step never gets 0.)
//
// Thread-safety: immutable after Create; At may be called from any thread.
#ifndef MOBIUS_WORKER_OPTIM_LR_SCHEDULE_H_
#define MOBIUS_WORKER_OPTIM_LR_SCHEDULE_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace mobius::optim {

struct LrScheduleConfig {
  enum class Kind { kConstant, kWarmupConstant, kWarmupCosine };
  Kind kind = Kind::kConstant;
  double peak_lr = 1e-3;
  double min_lr = 0.0;        // kWarmupCosine only
  int64_t warmup_steps = 0;   // W; ignored by kConstant
  int64_t total_steps = 0;    // T; kWarmupCosine only
};

class LrSchedule {
 public:
  // Errors: InvalidArgument unless peak_lr is finite and > 0, warmup_steps >= 0, and for cosine
  // 0 <= min_lr <= peak_lr and total_steps > warmup_steps.
  static absl::StatusOr<LrSchedule> Create(const LrScheduleConfig& config);

  // The learning rate for 1-based step `step`. REQUIRES: step >= 1 (smaller values count as 1).
  double At(int64_t step) const;

  const LrScheduleConfig& config() const { return config_; }

 private:
  explicit LrSchedule(const LrScheduleConfig& config) : config_(config) {}
  LrScheduleConfig config_;
};

}  // namespace mobius::optim

#endif  // MOBIUS_WORKER_OPTIM_LR_SCHEDULE_H_
