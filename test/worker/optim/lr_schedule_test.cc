#include "worker/optim/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "gtest/gtest.h"

namespace mobius::optim {
namespace {

using Kind = LrScheduleConfig::Kind;

LrSchedule Make(const LrScheduleConfig& c) {
  absl::StatusOr<LrSchedule> s = LrSchedule::Create(c);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(LrScheduleTest, Constant) {
  LrSchedule s = Make({.kind = Kind::kConstant, .peak_lr = 3e-4});
  EXPECT_EQ(s.At(1), 3e-4);
  EXPECT_EQ(s.At(1000000), 3e-4);
}

TEST(LrScheduleTest, WarmupConstantBoundaries) {
  LrSchedule s = Make({.kind = Kind::kWarmupConstant, .peak_lr = 1e-3, .warmup_steps = 4});
  EXPECT_EQ(s.At(1), 1e-3 * 1 / 4);
  EXPECT_EQ(s.At(2), 1e-3 * 2 / 4);
  EXPECT_EQ(s.At(4), 1e-3);
  EXPECT_EQ(s.At(5), 1e-3);
  EXPECT_EQ(s.At(100000), 1e-3);
  EXPECT_EQ(s.At(0), s.At(1));  // steps below 1 count as 1
}

TEST(LrScheduleTest, WarmupCosineBoundaries) {
  LrSchedule s = Make({.kind = Kind::kWarmupCosine, .peak_lr = 1e-3, .min_lr = 1e-5,
                       .warmup_steps = 10, .total_steps = 110});
  EXPECT_EQ(s.At(1), 1e-3 * 1 / 10);
  EXPECT_EQ(s.At(10), 1e-3);  // end of warmup: the peak
  const double step11 = 1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + std::cos(std::numbers::pi * 1 / 100));
  EXPECT_EQ(s.At(11), step11);
  EXPECT_LT(s.At(11), 1e-3);
  EXPECT_DOUBLE_EQ(s.At(60), 1e-5 + (1e-3 - 1e-5) * 0.5);  // halfway through the decay
  EXPECT_EQ(s.At(110), 1e-5);                               // the end: min_lr exactly
  EXPECT_EQ(s.At(111), 1e-5);
  EXPECT_EQ(s.At(1000000), 1e-5);
  for (int64_t t = 11; t < 110; ++t) EXPECT_GT(s.At(t), s.At(t + 1)) << t;  // decreasing
}

TEST(LrScheduleTest, CosineWithoutWarmupStartsBelowPeak) {
  LrSchedule s = Make({.kind = Kind::kWarmupCosine, .peak_lr = 2.0, .min_lr = 0.0,
                       .warmup_steps = 0, .total_steps = 2});
  EXPECT_DOUBLE_EQ(s.At(1), 1.0);  // progress 1/2
  EXPECT_EQ(s.At(2), 0.0);
}

TEST(LrScheduleTest, RejectsBadConfigs) {
  EXPECT_FALSE(LrSchedule::Create({.kind = Kind::kConstant, .peak_lr = 0}).ok());
  EXPECT_FALSE(LrSchedule::Create({.kind = Kind::kConstant, .peak_lr = NAN}).ok());
  EXPECT_FALSE(LrSchedule::Create({.kind = Kind::kWarmupConstant, .warmup_steps = -1}).ok());
  EXPECT_FALSE(LrSchedule::Create(
      {.kind = Kind::kWarmupCosine, .warmup_steps = 10, .total_steps = 10}).ok());
  EXPECT_FALSE(LrSchedule::Create({.kind = Kind::kWarmupCosine, .peak_lr = 1e-3, .min_lr = 1e-2,
                                   .total_steps = 10}).ok());
  EXPECT_EQ(LrSchedule::Create({.kind = Kind::kConstant, .peak_lr = -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mobius::optim
