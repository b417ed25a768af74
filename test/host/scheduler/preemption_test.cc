// Preemption behind SchedulerOptions::preemption: who may preempt, whom, and the minimal set.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/scheduler/scheduler.h"
#include "test/host/scheduler/test_nodes.h"

namespace mobius::jobs {
namespace {

using ::testing::ElementsAre;
using testing::FlatNode;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Job;
using testing::kGiB;
using testing::PaperTestbed;
using testing::Running;

ScheduleResult ScheduleWith(const NodeResources& node, const std::vector<RunningJob>& running,
                            const std::vector<JobRequest>& queued, bool preemption = true,
                            const Quotas& quotas = {}) {
  SchedulerOptions options;
  options.preemption = preemption;
  absl::StatusOr<ScheduleResult> r = Scheduler(options).Schedule(node, running, queued, quotas);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ScheduleResult{};
}

// Two low-priority jobs fill the paper testbed, one switch each.
std::vector<RunningJob> FullTestbed() {
  return {Running("j-000001", {0, 1, 2, 3}, 10 * kGiB, 0, 1),
          Running("j-000002", {4, 5, 6, 7}, 10 * kGiB, 0, 2)};
}

TEST(Preemption, OffByDefault) {
  ScheduleResult r =
      ScheduleWith(PaperTestbed(), FullTestbed(), {Job("j-000009", 4, kGiB, 10, 9)}, false);
  EXPECT_THAT(r.preempt, IsEmpty());
  ASSERT_EQ(r.queued.size(), 1u);
  EXPECT_EQ(r.queued[0].cause, PendingCause::kResources);
}

TEST(Preemption, HigherPriorityJobPreemptsTheMostRecentLowPriorityJob) {
  ScheduleResult r = ScheduleWith(PaperTestbed(), FullTestbed(), {Job("j-000009", 4, kGiB, 10, 9)});
  ASSERT_EQ(r.preempt.size(), 1u);
  EXPECT_EQ(r.preempt[0].job_id, "j-000009");
  EXPECT_THAT(r.preempt[0].victims, ElementsAre("j-000002"));
  EXPECT_THAT(r.start, IsEmpty());  // it starts once the victim has checkpointed and stopped
  ASSERT_EQ(r.queued.size(), 1u);
  EXPECT_EQ(r.queued[0].cause, PendingCause::kPreempting);
  EXPECT_EQ(r.queued[0].reason,
            "preempting lower-priority job j-000002 (priority 0, GPUs 4,5,6,7): waiting for it "
            "to checkpoint and stop; waiting for 4 GPUs: 0 free (GPUs 0,1,2,3 used by j-000001; "
            "GPUs 4,5,6,7 used by j-000002)");
}

TEST(Preemption, LowestPriorityFirst) {
  std::vector<RunningJob> running = FullTestbed();
  running[0].priority = -3;  // older, but lower priority
  ScheduleResult r = ScheduleWith(PaperTestbed(), running, {Job("j-000009", 4, kGiB, 10, 9)});
  ASSERT_EQ(r.preempt.size(), 1u);
  EXPECT_THAT(r.preempt[0].victims, ElementsAre("j-000001"));
}

TEST(Preemption, TakesAsManyVictimsAsNeededThenPrunes) {
  // Candidates in order: small (most recent), mid, big. Adding small and mid is not enough; with
  // big it fits, and then small and mid are not needed.
  NodeResources node = FlatNode(8);
  std::vector<RunningJob> running = {Running("big", {0, 1, 2, 3, 4}, kGiB, 0, 1),
                                     Running("mid", {5, 6}, kGiB, 0, 2),
                                     Running("small", {7}, kGiB, 0, 3)};
  ScheduleResult r = ScheduleWith(node, running, {Job("hi", 5, kGiB, 1, 9)});
  ASSERT_EQ(r.preempt.size(), 1u);
  EXPECT_THAT(r.preempt[0].victims, ElementsAre("big"));
  // Six GPUs: big alone is not enough, big + small is (mid is pruned).
  r = ScheduleWith(node, running, {Job("hi", 6, kGiB, 1, 9)});
  ASSERT_EQ(r.preempt.size(), 1u);
  EXPECT_THAT(r.preempt[0].victims, ElementsAre("small", "big"));
  // Eight GPUs: everyone.
  r = ScheduleWith(node, running, {Job("hi", 8, kGiB, 1, 9)});
  ASSERT_EQ(r.preempt.size(), 1u);
  EXPECT_THAT(r.preempt[0].victims, ElementsAre("small", "mid", "big"));
}

TEST(Preemption, ForHostMemory) {
  NodeResources node = FlatNode(4, 80 * kGiB, /*host_bytes=*/100 * kGiB);
  std::vector<RunningJob> running = {Running("fat", {0}, 80 * kGiB, 0, 1),
                                     Running("thin", {1}, 5 * kGiB, 0, 2)};
  ScheduleResult r = ScheduleWith(node, running, {Job("hi", 1, 50 * kGiB, 5, 9)});
  ASSERT_EQ(r.preempt.size(), 1u);
  EXPECT_THAT(r.preempt[0].victims, ElementsAre("fat"));
  EXPECT_THAT(r.queued[0].reason, HasSubstr("host memory: needs 50.0 GiB, 15.0 GiB free"));
}

TEST(Preemption, NeverEqualOrHigherPriority) {
  std::vector<RunningJob> running = FullTestbed();
  running[0].priority = running[1].priority = 10;
  ScheduleResult r = ScheduleWith(PaperTestbed(), running, {Job("j-000009", 4, kGiB, 10, 9)});
  EXPECT_THAT(r.preempt, IsEmpty());
  EXPECT_EQ(r.queued[0].cause, PendingCause::kResources);
}

TEST(Preemption, NotWhenVictimsCannotMakeItFit) {
  // Only j-000002 (4 GPUs) is lower priority; the job needs 6.
  std::vector<RunningJob> running = FullTestbed();
  running[0].priority = 20;
  ScheduleResult r = ScheduleWith(PaperTestbed(), running, {Job("j-000009", 6, kGiB, 10, 9)});
  EXPECT_THAT(r.preempt, IsEmpty());
  EXPECT_EQ(r.queued[0].cause, PendingCause::kResources);
}

TEST(Preemption, OnlyTheHeadPreempts) {
  // The head (p10, 6 GPUs) cannot be helped; the job behind it (p5, 2 GPUs) could preempt
  // j-000002, but what it frees would be held for the head anyway.
  std::vector<RunningJob> running = FullTestbed();
  running[0].priority = 20;
  ScheduleResult r = ScheduleWith(
      PaperTestbed(), running, {Job("j-000009", 6, kGiB, 10, 9), Job("j-000010", 2, kGiB, 5, 10)});
  EXPECT_THAT(r.preempt, IsEmpty());
  EXPECT_EQ(r.queued[1].cause, PendingCause::kResources);
}

TEST(Preemption, JobsAlreadyStoppingAreNotNamedTwice) {
  std::vector<RunningJob> running = FullTestbed();
  running[1].preempting = true;
  ScheduleResult r = ScheduleWith(PaperTestbed(), running, {Job("j-000009", 4, kGiB, 10, 9)});
  EXPECT_THAT(r.preempt, IsEmpty());  // nothing new to do
  ASSERT_EQ(r.queued.size(), 1u);
  EXPECT_EQ(r.queued[0].cause, PendingCause::kPreempting);
  EXPECT_THAT(r.queued[0].reason,
              HasSubstr("preempting lower-priority job j-000002 (priority 0, GPUs 4,5,6,7)"));
  // A stopping job is used before a new victim, even one of lower priority.
  running[0].priority = -5;
  r = ScheduleWith(PaperTestbed(), running, {Job("j-000009", 4, kGiB, 10, 9)});
  EXPECT_THAT(r.preempt, IsEmpty());
  // Needing both: only the new one is named.
  r = ScheduleWith(PaperTestbed(), running, {Job("j-000009", 8, kGiB, 10, 9)});
  ASSERT_EQ(r.preempt.size(), 1u);
  EXPECT_THAT(r.preempt[0].victims, ElementsAre("j-000001"));
}

TEST(Preemption, QuotaBlockedJobsDoNotPreempt) {
  Quotas quotas;
  quotas.per_uid[42].max_running_jobs = 1;
  std::vector<RunningJob> running = FullTestbed();
  running[0].uid = 42;
  ScheduleResult r = ScheduleWith(
      PaperTestbed(), running, {Job("mine", 4, kGiB, 10, 9, 42), Job("other", 4, kGiB, 5, 10, 7)},
      true, quotas);
  ASSERT_EQ(r.preempt.size(), 1u);
  EXPECT_EQ(r.preempt[0].job_id, "other");
  EXPECT_EQ(r.queued[0].job_id, "mine");
  EXPECT_EQ(r.queued[0].cause, PendingCause::kQuota);
}

TEST(Preemption, VictimGpusOutsideTheAllowListDoNotCount) {
  NodeResources node = PaperTestbed();
  node.allowed_gpus = {0, 1, 2, 3, 4, 5};
  ScheduleResult r = ScheduleWith(node, FullTestbed(), {Job("j-000009", 6, kGiB, 10, 9)});
  ASSERT_EQ(r.preempt.size(), 1u);
  // j-000002 frees only 4 and 5 for this node's scheduler: both victims are needed.
  EXPECT_THAT(r.preempt[0].victims, ElementsAre("j-000002", "j-000001"));
}

}  // namespace
}  // namespace mobius::jobs
