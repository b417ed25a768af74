// ValidateTrainerOptions, which both executors (the standalone trainer and every pipeline rank)
// run first: the step limit at its edge. Run-local steps live in 32-bit futex words of the shared
// store, so a run of 2^32 steps used to wrap to "all 0 steps done"; now it is refused up front.
#include "worker/train/training_setup.h"

#include <cmath>

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

// The adapter's own ranges only; its targets and rank against the model need the model.
TEST(ValidateTrainerOptionsTest, AdapterRanges) {
  TrainerOptions o = Valid();
  o.adapter.rank = -3;  // no adapter (type ""): the other fields are not looked at
  o.adapter.alpha = 0;
  EXPECT_TRUE(ValidateTrainerOptions(o).ok());
  o.adapter = AdapterOptions{.type = "lora", .rank = 1, .alpha = 0.5, .dropout = 0.9,
                             .target_modules = {"not_checked_here"}};
  EXPECT_TRUE(ValidateTrainerOptions(o).ok()) << ValidateTrainerOptions(o);
  struct Case {
    AdapterOptions adapter;
    const char* message;
  };
  for (const Case& c : {
           Case{{.type = "dora"}, "adapter type must be \"lora\" (got \"dora\")"},
           Case{{.type = "lora", .rank = 0}, "--lora_rank must be >= 1 (got 0)"},
           Case{{.type = "lora", .alpha = 0}, "--lora_alpha must be positive (got 0)"},
           Case{{.type = "lora", .alpha = INFINITY}, "--lora_alpha must be positive (got inf)"},
           Case{{.type = "lora", .dropout = 1}, "--lora_dropout must be in [0, 1) (got 1)"},
           Case{{.type = "lora", .dropout = -0.5}, "--lora_dropout must be in [0, 1) (got -0.5)"},
       }) {
    o.adapter = c.adapter;
    absl::Status s = ValidateTrainerOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace mobius::train
