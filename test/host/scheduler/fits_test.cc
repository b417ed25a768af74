// CheckFits: the submit-time "could this job ever run here" check, with the numbers.
#include "host/scheduler/fits.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/host/scheduler/test_nodes.h"

namespace mobius::jobs {
namespace {

using ::testing::HasSubstr;
using testing::Job;
using testing::kGiB;
using testing::PaperTestbed;

TEST(CheckFits, AJobThatFitsAnEmptyNodeIsOk) {
  NodeResources node = PaperTestbed();
  EXPECT_TRUE(CheckFits(node, Job("j-000001", 8)).ok());
  EXPECT_TRUE(CheckFits(node, Job("j-000001", 0)).ok());
  JobRequest exact = Job("j-000002", 4);
  exact.host_bytes = node.host_bytes;
  exact.pinned_bytes = node.pinned_bytes;
  exact.per_gpu_bytes = node.gpus[0].memory_bytes;
  EXPECT_TRUE(CheckFits(node, exact).ok());
  // Draining is temporary: not a reason to reject.
  node.draining = true;
  EXPECT_TRUE(CheckFits(node, exact).ok());
}

TEST(CheckFits, MoreGpusThanTheAllowList) {
  NodeResources node = PaperTestbed();
  node.allowed_gpus = {4, 5, 6, 7};
  absl::Status s = CheckFits(node, Job("j-000003", 5));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("job j-000003 can never run on this node: needs 5 GPUs, the "
                                     "node has 4 usable (GPUs 4,5,6,7)"));
  EXPECT_TRUE(CheckFits(node, Job("j-000003", 4)).ok());
}

TEST(CheckFits, NoUsableGpu) {
  NodeResources node = PaperTestbed();
  node.allowed_gpus.clear();
  absl::Status s = CheckFits(node, Job("j-000004", 0));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("needs at least 1 GPU, the node has no usable GPU (the GPU "
                                     "allow-list is empty)"));
  s = CheckFits(testing::FlatNode(0), Job("j-000005", 1));
  EXPECT_THAT(s.message(), HasSubstr("needs 1 GPU, the node has no usable GPU"));
}

TEST(CheckFits, PerGpuMemoryAboveEveryUsableGpu) {
  NodeResources node = PaperTestbed();
  JobRequest r = Job("j-000006", 2);
  r.per_gpu_bytes = 30 * kGiB;
  absl::Status s = CheckFits(node, r);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("needs 30.0 GiB of GPU memory on each of 2 GPUs, but only 0 "
                                     "of the 8 usable GPUs have that much (the largest has 23.7 "
                                     "GiB)"));
}

TEST(CheckFits, MixedGpusCountOnlyTheLargeOnes) {
  NodeResources node = testing::FlatNode(4, 24 * kGiB);
  node.gpus[2].memory_bytes = 80 * kGiB;
  node.gpus[3].memory_bytes = 80 * kGiB;
  JobRequest r = Job("j-000007", 2);
  r.per_gpu_bytes = 40 * kGiB;
  EXPECT_TRUE(CheckFits(node, r).ok());
  r.gpus = 3;
  absl::Status s = CheckFits(node, r);
  EXPECT_THAT(s.message(),
              HasSubstr("needs 40.0 GiB of GPU memory on each of 3 GPUs, but only 2 of the 4 "
                        "usable GPUs have that much"));
  // The large GPUs outside the allow-list do not count.
  node.allowed_gpus = {0, 1, 2};
  r.gpus = 2;
  EXPECT_THAT(CheckFits(node, r).message(), HasSubstr("only 1 of the 3 usable GPUs"));
  // Unknown memory (no CUDA/NVML facts) is not held against the job.
  node.gpus[0].memory_bytes = 0;
  EXPECT_TRUE(CheckFits(node, r).ok());
}

TEST(CheckFits, HostAndPinnedBudgetsWithEveryProblemListed) {
  NodeResources node = PaperTestbed(/*host_bytes=*/1536 * kGiB, /*pinned_bytes=*/256 * kGiB);
  JobRequest r = Job("j-000008", 9);
  r.host_bytes = 2048 * kGiB;
  r.pinned_bytes = 300 * kGiB;
  absl::Status s = CheckFits(node, r);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "job j-000008 can never run on this node: needs 9 GPUs, the node has 8 usable (GPUs "
            "0,1,2,3,4,5,6,7); host memory: needs 2.0 TiB, the node has 1.5 TiB for jobs; pinned "
            "memory: needs 300.0 GiB, the node's budget is 256.0 GiB");
}

TEST(CheckFits, MalformedInputIsInvalidArgumentWithTheField) {
  NodeResources node = PaperTestbed();
  JobRequest r = Job("j-000009", -2);
  absl::Status s = CheckFits(node, r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "gpus: -2 is negative");
  r = Job("j-000009", 1);
  r.per_gpu_bytes = -5;
  EXPECT_EQ(CheckFits(node, r).message(), "per_gpu_bytes: -5 is negative");
  r = Job("", 1);
  EXPECT_EQ(CheckFits(node, r).message(), "job_id: empty");
  node.allowed_gpus = {0, 8};
  s = CheckFits(node, Job("j-000010", 1));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "node.allowed_gpus[1]: 8 is not a GPU of this node (8 GPUs)");
  node.allowed_gpus = {1, 1};
  EXPECT_EQ(CheckFits(node, Job("j-000010", 1)).message(),
            "node.allowed_gpus[1]: GPU 1 is listed twice");
  node = PaperTestbed();
  node.gpus[3].index = 7;
  EXPECT_EQ(CheckFits(node, Job("j-000010", 1)).message(), "node.gpus[3].index: 7, expected 3");
}

}  // namespace
}  // namespace mobius::jobs
