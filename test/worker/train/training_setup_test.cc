// ValidateTrainerOptions, which both executors (the standalone trainer and every pipeline rank)
// run first: the step limit at its edge. Run-local steps live in 32-bit futex words of the shared
// store, so a run of 2^32 steps used to wrap to "all 0 steps done"; now it is refused up front.
#include "worker/train/training_setup.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius::train {
namespace {

using ::testing::HasSubstr;

TrainerOptions Valid() {
  TrainerOptions o;
  o.model_dir = "/models/m";
  o.data_path = "/data/d.tok";
  o.steps = 10;
  o.batch = 4;
  o.seq = 32;
  o.schedule = "constant";
  return o;
}

TEST(ValidateTrainerOptionsTest, StepsUpToTheLimitAreTakenAndBeyondItRefused) {
  TrainerOptions o = Valid();
  o.steps = kMaxSteps;
  EXPECT_TRUE(ValidateTrainerOptions(o).ok());
  for (int64_t steps : {kMaxSteps + 1, int64_t{1} << 32, int64_t{0}, int64_t{-5}}) {
    o.steps = steps;
    absl::Status s = ValidateTrainerOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << steps;
    EXPECT_THAT(s.message(), HasSubstr("--steps must be in [1, 2147483647]")) << s;
  }
}

}  // namespace
}  // namespace mobius::train
