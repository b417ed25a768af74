// The loss scaler's rule (worker/train/loss_scaler.h): torch.amp.GradScaler's dynamic scaling
// (growth 2 after `window` good steps, backoff 0.5 on a non-finite norm, which skips the step),
// the floor at 1, which scale each step uses, the checks on its settings and checkpoint state.
#include "worker/train/loss_scaler.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace mobius::train {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TrainerOptions Fp16(double init = 65536, int64_t window = 3) {
  TrainerOptions o;
  o.precision = "fp16";
  o.loss_scale_init = init;
  o.loss_scale_window = window;
  o.steps = 100;
  return o;
}

TEST(LossScalerTest, DisabledWithoutFp16) {
  TrainerOptions o;
  auto s = LossScaler::ForOptions(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->enabled());
  EXPECT_EQ(s->scale(), 1.0f);
  auto skipped = s->Record(kInf, 1);
  ASSERT_TRUE(skipped.ok());
  EXPECT_FALSE(*skipped);  // a bf16 run's non-finite norm is its executor's error
}

TEST(LossScalerTest, GrowsAfterTheWindowAndBacksOffOnOverflow) {
  auto s = LossScaler::ForOptions(Fp16(1024, 3));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->scale(), 1024.0f);
  for (int i = 1; i <= 2; ++i) EXPECT_FALSE(*s->Record(1.5, i));
  EXPECT_EQ(s->scale(), 1024.0f);
  EXPECT_EQ(s->good_steps(), 2);
  EXPECT_FALSE(*s->Record(1.5, 3));  // the third good step in a row doubles it
  EXPECT_EQ(s->scale(), 2048.0f);
  EXPECT_EQ(s->good_steps(), 0);
  EXPECT_FALSE(*s->Record(1.5, 4));
  EXPECT_TRUE(*s->Record(kInf, 5));  // skipped, halved, the count restarts
  EXPECT_EQ(s->scale(), 1024.0f);
  EXPECT_EQ(s->good_steps(), 0);
  EXPECT_TRUE(*s->Record(std::nan(""), 6));
  EXPECT_EQ(s->scale(), 512.0f);
}

TEST(LossScalerTest, OverflowAtScaleOneIsAnErrorNamingTheStep) {
  auto s = LossScaler::ForOptions(Fp16(2, 100));
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(*s->Record(kInf, 7));
  EXPECT_EQ(s->scale(), 1.0f);
  auto again = s->Record(kInf, 8);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("step 8"), std::string::npos) << again.status();
}

TEST(LossScalerTest, RejectsBadSettingsAndCheckpointState) {
  for (double init : {0.0, 3.0, 0.5, 1e30}) {
    auto s = LossScaler::ForOptions(Fp16(init));
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << init;
  }
  EXPECT_EQ(LossScaler::ForOptions(Fp16(1024, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto s = LossScaler::ForOptions(Fp16(1024, 3));
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->Restore(1000, 0).ok());  // not a power of two
  EXPECT_FALSE(s->Restore(1024, 3).ok());  // the count is below the window
  EXPECT_TRUE(s->Restore(8, 2).ok());
  EXPECT_EQ(s->scale(), 8.0f);
  EXPECT_EQ(s->good_steps(), 2);
}

// Step k uses the scaler after step k-1, or after k-2 with staleness 1 unless k-1 was a sync
// step (a checkpoint, an eval, the first step's predecessor with checkpoints every step...).
TEST(LossScalerTest, ScaleForFollowsTheStaleness) {
  TrainerOptions o = Fp16(1024, 100);
  auto current = *LossScaler::ForOptions(o);
  auto previous = current;
  ASSERT_TRUE(*current.Record(kInf, 1));  // current: 512, previous: 1024
  EXPECT_EQ(ScaleFor(o, 2, current, previous), 512.0f);
  o.optimizer_staleness = 1;
  EXPECT_EQ(ScaleFor(o, 2, current, previous), 1024.0f);
  o.eval_every = 1;  // every step is a sync step
  EXPECT_EQ(ScaleFor(o, 2, current, previous), 512.0f);
}

}  // namespace
}  // namespace mobius::train
