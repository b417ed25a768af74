// The rank-backend seam without a GPU: the backend names, the CPU fallback of `auto` with its
// reason, `cuda` refused when it cannot be had, and the node-GPU -> CUDA-ordinal mapping through
// CUDA_VISIBLE_DEVICES.
#include "worker/runtime/rank_backend.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius::runtime {
namespace {

using ::testing::HasSubstr;

RunConfig TwoRanks() {
  RunConfig run;
  run.num_workers = 2;
  run.rank_gpu = {3, 5};
  run.training.threads = 1;
  return run;
}

class RankBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
    saved_ = v ? std::optional<std::string>(v) : std::nullopt;
    unsetenv("CUDA_VISIBLE_DEVICES");
  }
  void TearDown() override {
    if (saved_) {
      setenv("CUDA_VISIBLE_DEVICES", saved_->c_str(), 1);
    } else {
      unsetenv("CUDA_VISIBLE_DEVICES");
    }
  }
  std::optional<std::string> saved_;
};

TEST_F(RankBackendTest, OrdinalFollowsRankDeviceThenTheVisibleList) {
  RunConfig run = TwoRanks();
  EXPECT_EQ(*CudaOrdinalOfRank(run, 1), 5);  // no CUDA_VISIBLE_DEVICES: the node index
  setenv("CUDA_VISIBLE_DEVICES", "5,3", 1);
  EXPECT_EQ(*CudaOrdinalOfRank(run, 0), 1);
  EXPECT_EQ(*CudaOrdinalOfRank(run, 1), 0);
  setenv("CUDA_VISIBLE_DEVICES", "0,1", 1);
  absl::StatusOr<int> missing = CudaOrdinalOfRank(run, 0);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.status().message(), HasSubstr("GPU 3 is not in CUDA_VISIBLE_DEVICES=0,1"));
  setenv("CUDA_VISIBLE_DEVICES", "GPU-8f1c2e", 1);
  EXPECT_THAT(CudaOrdinalOfRank(run, 0).status().message(), HasSubstr("UUID"));
  run.rank_device = {1, 0};  // explicit ordinals win
  EXPECT_EQ(*CudaOrdinalOfRank(run, 0), 1);
}

TEST_F(RankBackendTest, AutoFallsBackToTheCpuWithTheReason) {
  RunConfig run = TwoRanks();
  absl::StatusOr<RankBackend> b = CreateRankBackend(run, 0, nullptr);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->backend->name(), "cpu");
  // This test binary registers no CUDA factory (mobius-worker does when built with CUDA).
  EXPECT_THAT(b->description, HasSubstr("rank 0: no usable CUDA device"));
  EXPECT_THAT(b->description, HasSubstr("falling back to the CPU backend"));
  run.backend = "cpu";
  EXPECT_EQ(CreateRankBackend(run, 1, nullptr)->description, "rank 1: CPU backend");
}

TEST_F(RankBackendTest, ForcedCudaAndBadNamesAreRefused) {
  RunConfig run = TwoRanks();
  run.backend = "cuda";
  absl::StatusOr<RankBackend> b = CreateRankBackend(run, 1, nullptr);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(b.status().message(), HasSubstr("rank 1: backend cuda requested but unusable"));
  run.backend = "gpu";
  EXPECT_EQ(CreateRankBackend(run, 0, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mobius::runtime
