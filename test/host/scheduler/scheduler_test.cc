// Schedule(): order, FIFO, quotas, holds (no backfilling past a waiting job), allow-list,
// draining, never-fitting jobs, pending reasons with their numbers, determinism.
#include "host/scheduler/scheduler.h"

#include <algorithm>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

ScheduleResult MustSchedule(const NodeResources& node, const std::vector<RunningJob>& running,
                            const std::vector<JobRequest>& queued, const Quotas& quotas = {},
                            SchedulerOptions options = {}) {
  absl::StatusOr<ScheduleResult> r = Scheduler(options).Schedule(node, running, queued, quotas);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ScheduleResult{};
}

std::vector<std::string> StartedIds(const ScheduleResult& r) {
  std::vector<std::string> ids;
  for (const StartDecision& d : r.start) ids.push_back(d.job_id);
  return ids;
}

std::vector<std::string> QueuedIds(const ScheduleResult& r) {
  std::vector<std::string> ids;
  for (const QueuedDecision& q : r.queued) ids.push_back(q.job_id);
  return ids;
}

const QueuedDecision& Queued(const ScheduleResult& r, const std::string& id) {
  for (const QueuedDecision& q : r.queued) {
    if (q.job_id == id) return q;
  }
  ADD_FAILURE() << id << " not queued:\n" << DescribeSchedule(r);
  static const QueuedDecision kNone;
  return kNone;
}

const StartDecision& Started(const ScheduleResult& r, const std::string& id) {
  for (const StartDecision& d : r.start) {
    if (d.job_id == id) return d;
  }
  ADD_FAILURE() << id << " not started:\n" << DescribeSchedule(r);
  static const StartDecision kNone;
  return kNone;
}

TEST(Schedule, NothingQueuedNothingDecided) {
  ScheduleResult r = MustSchedule(PaperTestbed(), {Running("j-000001", {0})}, {});
  EXPECT_EQ(r, ScheduleResult{});
}

TEST(Schedule, PriorityFirstThenFifo) {
  // 4 GPUs. Order: b (p5), d (p5, later), c (p0, seq 0), a (p0, seq 1).
  NodeResources node = FlatNode(4);
  ScheduleResult r = MustSchedule(node, {},
                                  {Job("a", 2, 10 * kGiB, 0, 1), Job("b", 2, 10 * kGiB, 5, 2),
                                   Job("c", 2, 10 * kGiB, 0, 0), Job("d", 1, 10 * kGiB, 5, 3)});
  EXPECT_THAT(StartedIds(r), ElementsAre("b", "d"));
  EXPECT_THAT(Started(r, "b").gpus, ElementsAre(0, 1));
  EXPECT_THAT(Started(r, "d").gpus, ElementsAre(2));
  ASSERT_THAT(QueuedIds(r), ElementsAre("c", "a"));
  EXPECT_EQ(r.queued[0].position, 1);
  EXPECT_EQ(r.queued[1].position, 2);
  EXPECT_EQ(r.queued[0].cause, PendingCause::kResources);
  EXPECT_EQ(r.queued[0].reason, "waiting for 2 GPUs: 1 free (GPUs 0,1 used by b; GPU 2 used by d)");
  EXPECT_EQ(r.queued[1].cause, PendingCause::kResources);
  EXPECT_EQ(r.queued[1].reason,
            "waiting for 2 GPUs: 0 free (GPUs 0,1 used by b; GPU 2 used by d; GPU 3 held for c)");
}

TEST(Schedule, FifoTieBrokenByJobId) {
  NodeResources node = FlatNode(1);
  ScheduleResult r =
      MustSchedule(node, {}, {Job("j-000002", 1, kGiB, 0, 7), Job("j-000001", 1, kGiB, 0, 7)});
  EXPECT_THAT(StartedIds(r), ElementsAre("j-000001"));
  EXPECT_THAT(QueuedIds(r), ElementsAre("j-000002"));
}

TEST(Schedule, GpuReasonNamesTheRunningJob) {
  NodeResources node = FlatNode(4);
  ScheduleResult r =
      MustSchedule(node, {Running("j-000004", {2, 3})}, {Job("j-000005", 4, 10 * kGiB, 0, 5)});
  ASSERT_EQ(r.queued.size(), 1u);
  EXPECT_EQ(r.queued[0].reason, "waiting for 4 GPUs: 2 free (GPUs 2,3 used by j-000004)");
  EXPECT_EQ(PendingCauseName(r.queued[0].cause), std::string("resources"));
}

TEST(Schedule, HostAndPinnedMemoryReasons) {
  NodeResources node =
      FlatNode(4, 80 * kGiB, /*host_bytes=*/100 * kGiB, /*pinned_bytes=*/20 * kGiB);
  RunningJob running = Running("j-000001", {0}, 88 * kGiB);
  running.pinned_bytes = 18 * kGiB;
  JobRequest big = Job("j-000002", 1, 40 * kGiB, 0, 2);
  big.pinned_bytes = 8 * kGiB;
  ScheduleResult r = MustSchedule(node, {running}, {big});
  ASSERT_EQ(r.queued.size(), 1u);
  EXPECT_EQ(r.queued[0].reason,
            "host memory: needs 40.0 GiB, 12.0 GiB free; pinned memory: needs 8.0 GiB, 2.0 GiB "
            "free");
  // GPUs and memory together.
  big.gpus = 4;
  r = MustSchedule(node, {running}, {big});
  EXPECT_EQ(r.queued[0].reason,
            "waiting for 4 GPUs: 3 free (GPU 0 used by j-000001); host memory: needs 40.0 GiB, "
            "12.0 GiB free; pinned memory: needs 8.0 GiB, 2.0 GiB free");
}

TEST(Schedule, OvercommittedNodeShowsNothingFree) {
  NodeResources node = FlatNode(2, 80 * kGiB, /*host_bytes=*/50 * kGiB);
  ScheduleResult r =
      MustSchedule(node, {Running("j-000001", {0}, 60 * kGiB)}, {Job("j-000002", 1, kGiB)});
  ASSERT_EQ(r.queued.size(), 1u);
  EXPECT_EQ(r.queued[0].reason, "host memory: needs 1.0 GiB, 0 B free");
}

TEST(Schedule, HugeByteCountsSaturateInsteadOfOverflowing) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  NodeResources node = FlatNode(4, 80 * kGiB, kMax, kMax);
  std::vector<RunningJob> running = {Running("a", {0}, kMax), Running("b", {1}, kMax)};
  running[0].pinned_bytes = running[1].pinned_bytes = kMax;
  JobRequest job = Job("c", 1, kMax);
  job.pinned_bytes = kMax;
  SchedulerOptions options;
  options.preemption = true;
  job.priority = 1;
  ScheduleResult r = MustSchedule(node, running, {job, Job("d", 1, kMax, 0, 1)}, {}, options);
  EXPECT_THAT(r.start, IsEmpty());
  EXPECT_THAT(Queued(r, "c").reason, HasSubstr("host memory: needs 8388608.0 TiB, 0 B free"));
  EXPECT_THAT(
      Queued(r, "c").reason,
      HasSubstr("preempting lower-priority jobs a (priority 0, GPU 0), b (priority 0, GPU 1)"));
}

TEST(Schedule, StartsAsManyAsFitAndAccountsForEachStart) {
  NodeResources node = PaperTestbed(/*host_bytes=*/100 * kGiB);
  ScheduleResult r = MustSchedule(node, {},
                                  {Job("a", 2, 30 * kGiB, 0, 1), Job("b", 2, 30 * kGiB, 0, 2),
                                   Job("c", 2, 30 * kGiB, 0, 3), Job("d", 2, 30 * kGiB, 0, 4)});
  EXPECT_THAT(StartedIds(r), ElementsAre("a", "b", "c"));
  // Spread jobs balance the two uplinks as they start one after another.
  EXPECT_THAT(Started(r, "a").gpus, ElementsAre(0, 4));
  EXPECT_THAT(Started(r, "a").numa_nodes, ElementsAre(0, 1));
  EXPECT_THAT(Started(r, "b").gpus, ElementsAre(1, 5));
  EXPECT_THAT(Started(r, "c").gpus, ElementsAre(2, 6));
  EXPECT_EQ(Started(r, "c").cost.interference_pairs, 4);
  EXPECT_EQ(Queued(r, "d").reason, "host memory: needs 30.0 GiB, 10.0 GiB free");
}

TEST(Schedule, PackJobsTakeWholeSwitches) {
  NodeResources node = PaperTestbed();
  JobRequest a = Job("a", 4, 10 * kGiB, 0, 1);
  JobRequest b = Job("b", 4, 10 * kGiB, 0, 2);
  a.placement = b.placement = Placement::kPack;
  ScheduleResult r = MustSchedule(node, {}, {a, b});
  EXPECT_THAT(Started(r, "a").gpus, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(Started(r, "a").numa_nodes, ElementsAre(0));
  EXPECT_THAT(Started(r, "b").gpus, ElementsAre(4, 5, 6, 7));
  EXPECT_EQ(Started(r, "b").cost.interference_pairs, 0);
  // Two 2-GPU pack jobs: one switch each, away from each other's uplink.
  a.gpus = b.gpus = 2;
  r = MustSchedule(node, {}, {a, b});
  EXPECT_THAT(Started(r, "a").gpus, ElementsAre(0, 1));
  EXPECT_THAT(Started(r, "b").gpus, ElementsAre(4, 5));
}

TEST(Schedule, NoBackfillPastTheHeadJob) {
  // The head needs all 4 GPUs; a 1-GPU job behind it could start on a free GPU, but that GPU is
  // one the head is waiting for.
  NodeResources node = FlatNode(4);
  ScheduleResult r =
      MustSchedule(node, {Running("j-000001", {0, 1})},
                   {Job("j-000002", 4, 10 * kGiB, 0, 2), Job("j-000003", 1, 10 * kGiB, 0, 3)});
  EXPECT_THAT(r.start, IsEmpty());
  ASSERT_THAT(QueuedIds(r), ElementsAre("j-000002", "j-000003"));
  EXPECT_EQ(r.queued[0].reason, "waiting for 4 GPUs: 2 free (GPUs 0,1 used by j-000001)");
  EXPECT_EQ(r.queued[1].cause, PendingCause::kBehind);
  EXPECT_EQ(r.queued[1].reason,
            "behind earlier job j-000002 of the same priority (held for it: GPUs 2,3, 10.0 GiB "
            "host memory, 2.5 GiB pinned memory)");
}

TEST(Schedule, BehindAHigherPriorityJobHoldingHostMemory) {
  // GPUs are plentiful; the head waits for host memory and holds what is free of it.
  NodeResources node = FlatNode(4, 80 * kGiB, /*host_bytes=*/100 * kGiB);
  ScheduleResult r =
      MustSchedule(node, {Running("j-000001", {0}, 60 * kGiB)},
                   {Job("j-000002", 1, 50 * kGiB, 9, 2), Job("j-000003", 1, 20 * kGiB, 0, 3)});
  EXPECT_THAT(r.start, IsEmpty());
  EXPECT_EQ(Queued(r, "j-000002").reason, "host memory: needs 50.0 GiB, 40.0 GiB free");
  EXPECT_EQ(Queued(r, "j-000003").cause, PendingCause::kBehind);
  EXPECT_EQ(Queued(r, "j-000003").reason,
            "behind higher-priority job j-000002 (held for it: GPU 1, 40.0 GiB host memory, 12.5 "
            "GiB pinned memory)");
}

TEST(Schedule, ASmallerJobPassesOnResourcesTheHeadCannotUse) {
  // GPUs 0,1: 24 GiB; 2,3: 80 GiB. The head needs two 40 GiB GPUs; only GPU 3 is free among them.
  // The small job runs on a 24 GiB GPU and host memory beyond the head's need: the head is not
  // delayed.
  NodeResources node = FlatNode(4, 24 * kGiB);
  node.gpus[2].memory_bytes = node.gpus[3].memory_bytes = 80 * kGiB;
  JobRequest head = Job("j-000002", 2, 10 * kGiB, 5, 2);
  head.per_gpu_bytes = 40 * kGiB;
  JobRequest small = Job("j-000003", 1, 10 * kGiB, 0, 3);
  JobRequest big_small = Job("j-000004", 1, 10 * kGiB, 0, 4);
  big_small.per_gpu_bytes = 40 * kGiB;
  ScheduleResult r = MustSchedule(node, {Running("j-000001", {2})}, {head, small, big_small});
  EXPECT_THAT(StartedIds(r), ElementsAre("j-000003"));
  EXPECT_THAT(Started(r, "j-000003").gpus, ElementsAre(0));
  EXPECT_EQ(Queued(r, "j-000002").reason,
            "waiting for 2 GPUs: 1 free (GPU 2 used by j-000001; GPUs 0,1 too small for 40.0 GiB "
            "per GPU)");
  EXPECT_EQ(Queued(r, "j-000004").cause, PendingCause::kBehind);
  EXPECT_THAT(Queued(r, "j-000004").reason,
              HasSubstr("behind higher-priority job j-000002 (held for it: GPU 3"));
  EXPECT_EQ(Queued(r, "j-000002").position, 1);
  EXPECT_EQ(Queued(r, "j-000004").position, 2);
}

TEST(Schedule, AllFreeGpusJob) {
  NodeResources node = FlatNode(4);
  ScheduleResult r = MustSchedule(node, {Running("j-000001", {1})}, {Job("j-000002", 0)});
  EXPECT_THAT(Started(r, "j-000002").gpus, ElementsAre(0, 2, 3));
  r = MustSchedule(node, {Running("j-000001", {0, 1, 2, 3})}, {Job("j-000002", 0)});
  EXPECT_EQ(Queued(r, "j-000002").reason,
            "waiting for a free GPU: 0 free (GPUs 0,1,2,3 used by j-000001)");
}

TEST(Schedule, AllowListIsNeverExceeded) {
  NodeResources node = PaperTestbed();
  node.allowed_gpus = {4, 5, 6, 7};
  ScheduleResult r = MustSchedule(node, {},
                                  {Job("a", 2, kGiB, 0, 1), Job("b", 2, kGiB, 0, 2),
                                   Job("c", 2, kGiB, 0, 3), Job("d", 0, kGiB, 0, 4)});
  EXPECT_THAT(Started(r, "a").gpus, ElementsAre(4, 5));
  EXPECT_THAT(Started(r, "b").gpus, ElementsAre(6, 7));
  EXPECT_EQ(Queued(r, "c").reason,
            "waiting for 2 GPUs: 0 free (GPUs 4,5 used by a; GPUs 6,7 used by b)");
  // An all-free job on a node where only GPUs 4-7 are allowed gets those only.
  r = MustSchedule(node, {}, {Job("d", 0)});
  EXPECT_THAT(Started(r, "d").gpus, ElementsAre(4, 5, 6, 7));
  // A running job on a GPU that left the allow-list still holds it; nobody gets it.
  r = MustSchedule(node, {Running("old", {0, 4})}, {Job("e", 4)});
  EXPECT_EQ(Queued(r, "e").reason, "waiting for 4 GPUs: 3 free (GPU 4 used by old)");
}

TEST(Schedule, DrainingStartsNothingButKeepsPositions) {
  NodeResources node = FlatNode(4);
  node.draining = true;
  SchedulerOptions preempt;
  preempt.preemption = true;
  ScheduleResult r = MustSchedule(node, {Running("low", {0, 1, 2, 3}, kGiB, -5)},
                                  {Job("a", 1, kGiB, 0, 1), Job("b", 4, kGiB, 9, 2)}, {}, preempt);
  EXPECT_THAT(r.start, IsEmpty());
  EXPECT_THAT(r.preempt, IsEmpty());
  ASSERT_THAT(QueuedIds(r), ElementsAre("b", "a"));
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(r.queued[i].position, i + 1);
    EXPECT_EQ(r.queued[i].cause, PendingCause::kDraining);
    EXPECT_EQ(r.queued[i].reason, "node is draining");
  }
}

TEST(Schedule, NeverFittingJobHoldsNothing) {
  NodeResources node = FlatNode(2);
  ScheduleResult r = MustSchedule(node, {}, {Job("huge", 3, kGiB, 9, 1), Job("ok", 2, kGiB, 0, 2)});
  EXPECT_THAT(StartedIds(r), ElementsAre("ok"));
  EXPECT_EQ(Queued(r, "huge").cause, PendingCause::kNeverFits);
  EXPECT_EQ(Queued(r, "huge").reason,
            "can never run on this node: needs 3 GPUs, the node has 2 usable (GPUs 0,1)");
}

TEST(Schedule, QuotaOnRunningJobsCountsThisRoundsStarts) {
  NodeResources node = FlatNode(8);
  Quotas quotas;
  quotas.per_uid[1000].max_running_jobs = 2;
  ScheduleResult r = MustSchedule(node, {},
                                  {Job("a", 1, kGiB, 0, 1, 1000), Job("b", 1, kGiB, 0, 2, 1000),
                                   Job("c", 1, kGiB, 0, 3, 1000), Job("d", 1, kGiB, 0, 4, 2000)},
                                  quotas);
  EXPECT_THAT(StartedIds(r), ElementsAre("a", "b", "d"));
  EXPECT_EQ(Queued(r, "c").cause, PendingCause::kQuota);
  EXPECT_EQ(Queued(r, "c").reason, "user quota max_running_jobs=2: 2 running");
}

TEST(Schedule, QuotaBlockedJobDoesNotBlockOthers) {
  NodeResources node = FlatNode(4);
  Quotas quotas;
  quotas.defaults.max_running_jobs = 1;
  ScheduleResult r =
      MustSchedule(node, {Running("r", {0}, kGiB, 0, 0, 1000)},
                   {Job("mine", 3, kGiB, 9, 1, 1000), Job("theirs", 3, kGiB, 0, 2, 2000)}, quotas);
  EXPECT_THAT(StartedIds(r), ElementsAre("theirs"));
  EXPECT_THAT(Started(r, "theirs").gpus, ElementsAre(1, 2, 3));
  EXPECT_EQ(Queued(r, "mine").reason, "user quota max_running_jobs=1: 1 running");
  EXPECT_EQ(Queued(r, "mine").position, 1);
}

TEST(Schedule, GpuQuota) {
  NodeResources node = FlatNode(10);
  Quotas quotas;
  quotas.defaults.max_gpus = 4;
  quotas.per_uid[7].max_gpus = 0;  // no limit for uid 7
  ScheduleResult r = MustSchedule(
      node, {Running("r", {0, 1}, kGiB, 0, 0, 1000)},
      {Job("a", 4, kGiB, 0, 1, 1000), Job("b", 6, kGiB, 0, 2, 1000), Job("c", 2, kGiB, 0, 3, 1000),
       Job("d", 0, kGiB, 0, 4, 1000), Job("e", 5, kGiB, 0, 5, 7)},
      quotas);
  EXPECT_EQ(Queued(r, "a").reason, "user quota max_gpus=4: 2 GPUs in use, the job needs 4");
  EXPECT_EQ(Queued(r, "b").reason, "user quota max_gpus=4: the job needs 6 GPUs");
  EXPECT_THAT(Started(r, "c").gpus, ElementsAre(2, 3));
  EXPECT_EQ(Queued(r, "d").reason, "user quota max_gpus=4: 4 GPUs in use");
  EXPECT_THAT(Started(r, "e").gpus, ElementsAre(4, 5, 6, 7, 8));  // uid 7's own limit: none
  // An all-free job takes no more than the user's remaining GPU quota.
  r = MustSchedule(node, {Running("r", {0}, kGiB, 0, 0, 1000)}, {Job("d", 0, kGiB, 0, 4, 1000)},
                   quotas);
  EXPECT_THAT(Started(r, "d").gpus, ElementsAre(1, 2, 3));
}

TEST(Schedule, AWaitingJobHoldsItsPlaceInItsUsersQuota) {
  // GPU 4 is too small for the head (40 GiB per GPU) but fine for the user's next job. Starting
  // that job would use up the quota the head needs once GPUs free up: it waits.
  NodeResources node = FlatNode(5);
  node.gpus[4].memory_bytes = 24 * kGiB;
  JobRequest head = Job("head", 2, kGiB, 5, 1, 1000);
  head.per_gpu_bytes = 40 * kGiB;
  JobRequest next = Job("next", 1, kGiB, 0, 2, 1000);
  JobRequest other = Job("other", 1, kGiB, 0, 3, 2000);
  const std::vector<RunningJob> running = {Running("r", {0, 1, 2}, kGiB, 0, 0, 3000)};
  Quotas quotas;
  quotas.defaults.max_gpus = 2;
  ScheduleResult r = MustSchedule(node, running, {head, next, other}, quotas);
  EXPECT_EQ(Queued(r, "head").reason,
            "waiting for 2 GPUs: 1 free (GPUs 0,1,2 used by r; GPU 4 too small for 40.0 GiB per "
            "GPU)");
  EXPECT_EQ(Queued(r, "next").cause, PendingCause::kQuota);
  EXPECT_EQ(Queued(r, "next").reason,
            "user quota max_gpus=2: 2 GPUs in use or held for jobs ahead, the job needs 1");
  EXPECT_THAT(StartedIds(r), ElementsAre("other"));  // another user's quota is untouched
  EXPECT_THAT(Started(r, "other").gpus, ElementsAre(4));

  quotas = {};
  quotas.defaults.max_running_jobs = 1;
  r = MustSchedule(node, running, {head, next}, quotas);
  EXPECT_EQ(Queued(r, "next").reason, "user quota max_running_jobs=1: 1 jobs (0 running, 1 waiting ahead)");
  EXPECT_THAT(r.start, IsEmpty());
}

TEST(Schedule, ResultDoesNotDependOnInputOrder) {
  NodeResources node = PaperTestbed(/*host_bytes=*/200 * kGiB);
  std::vector<RunningJob> running = {Running("r1", {0, 1}, 50 * kGiB, 0, 1),
                                     Running("r2", {5}, 20 * kGiB, 3, 2)};
  std::vector<JobRequest> queued = {Job("a", 2, 30 * kGiB, 0, 10), Job("b", 3, 60 * kGiB, 2, 11),
                                    Job("c", 1, 10 * kGiB, 2, 12), Job("d", 0, 5 * kGiB, 0, 13),
                                    Job("e", 4, 10 * kGiB, 1, 14)};
  const ScheduleResult first = MustSchedule(node, running, queued);
  std::reverse(running.begin(), running.end());
  std::reverse(queued.begin(), queued.end());
  const ScheduleResult second = MustSchedule(node, running, queued);
  EXPECT_EQ(first, second) << DescribeSchedule(first) << "---\n" << DescribeSchedule(second);
  std::rotate(queued.begin(), queued.begin() + 2, queued.end());
  EXPECT_EQ(first, MustSchedule(node, running, queued));
  EXPECT_EQ(DescribeSchedule(first),
            "start b on GPUs 2,4,6 (NUMA 0,1)\n"
            "start c on GPU 3 (NUMA 0)\n"
            "queued 1 e [resources] waiting for 4 GPUs: 1 free (GPUs 0,1 used by r1; GPUs 2,4,6 "
            "used by b; GPU 3 used by c; GPU 5 used by r2)\n"
            "queued 2 a [resources] waiting for 2 GPUs: 0 free (GPUs 0,1 used by r1; GPUs 2,4,6 "
            "used by b; GPU 3 used by c; GPU 5 used by r2; GPU 7 held for e)\n"
            "queued 3 d [behind] behind higher-priority job e (held for it: GPU 7, 10.0 GiB host "
            "memory, 2.5 GiB pinned memory)\n");
}

TEST(Schedule, MalformedInputNamesTheField) {
  NodeResources node = FlatNode(4);
  Scheduler s;
  auto r = s.Schedule(node, {Running("a", {0}), Running("b", {0})}, {}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "running[1].gpus: GPU 0 is also held by a (job b)");
  r = s.Schedule(node, {Running("a", {4})}, {}, {});
  EXPECT_EQ(r.status().message(), "running[0].gpus: 4 is not a GPU of this node (4 GPUs) (job a)");
  r = s.Schedule(node, {Running("a", {0})}, {Job("a", 1)}, {});
  EXPECT_EQ(r.status().message(), "queued[0].job_id: a is also running[0]");
  r = s.Schedule(node, {}, {Job("a", 1), Job("b", -1)}, {});
  EXPECT_EQ(r.status().message(), "queued[1].gpus: -1 is negative (job b)");
  r = s.Schedule(node, {}, {Job("", 1)}, {});
  EXPECT_EQ(r.status().message(), "queued[0].job_id: empty");
  Quotas bad;
  bad.per_uid[1000].max_running_jobs = -1;
  r = s.Schedule(node, {}, {Job("a", 1)}, bad);
  EXPECT_EQ(r.status().message(), "quotas.per_uid[1000].max_running_jobs: -1 is negative");
  node.host_bytes = -1;
  r = s.Schedule(node, {}, {}, {});
  EXPECT_EQ(r.status().message(), "node.host_bytes: -1 is negative");
}

}  // namespace
}  // namespace mobius::jobs

namespace mobius::jobs {
namespace {

// Fair share (order_score, set by the daemon from its accounting): within a priority the higher
// score goes first; priority still comes first; equal scores stay FIFO.
TEST(Schedule, OrderScoreOrdersEqualPrioritiesAfterPriority) {
  NodeResources node = FlatNode(1);
  JobRequest a2 = Job("a2", 1, kGiB, 0, 2, 1000), a3 = Job("a3", 1, kGiB, 0, 3, 1000);
  JobRequest b4 = Job("b4", 1, kGiB, 0, 4, 2000), hi = Job("hi", 1, kGiB, 5, 9, 1000);
  a2.order_score = a3.order_score = 0.25;  // alice used the node
  b4.order_score = 1.0;                    // bob did not
  hi.order_score = 0.0;
  ScheduleResult r = MustSchedule(node, {Running("a1", {0}, kGiB, 0, 1, 1000)}, {a2, a3, b4, hi});
  EXPECT_EQ(Queued(r, "hi").position, 1);
  EXPECT_EQ(Queued(r, "b4").position, 2);
  EXPECT_EQ(Queued(r, "a2").position, 3);
  EXPECT_EQ(Queued(r, "a3").position, 4);
  r = MustSchedule(node, {}, {a2, a3, b4});
  EXPECT_THAT(StartedIds(r), ElementsAre("b4"));
  // Bob's 2-GPU job waits for a GPU alice's running job holds; her next job could use the free
  // one but waits behind his.
  JobRequest b2 = Job("b2", 2, kGiB, 0, 4, 2000);
  b2.order_score = 1.0;
  r = MustSchedule(FlatNode(2), {Running("a1", {0}, kGiB, 0, 1, 1000)}, {a2, b2});
  EXPECT_TRUE(StartedIds(r).empty());
  EXPECT_EQ(Queued(r, "a2").reason,
            "behind fair-share-ahead job b2 of the same priority (its user has used less "
            "lately) (held for it: GPU 1, 1.0 GiB host memory, 256.0 MiB pinned memory)");
  a2.order_score = std::nan("");
  EXPECT_EQ(Scheduler().Schedule(node, {}, {a2}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mobius::jobs

namespace mobius::jobs {
namespace {

TEST(Schedule, HostMemoryQuotaCountsRunningStartedAndHeldJobs) {
  NodeResources node = FlatNode(8);
  Quotas quotas;
  quotas.per_uid[1000].max_host_bytes = 20 * kGiB;
  ScheduleResult r = MustSchedule(
      node, {Running("run", {0}, 8 * kGiB, 0, 1, 1000)},
      {Job("a", 1, 10 * kGiB, 0, 2, 1000), Job("b", 1, 4 * kGiB, 0, 3, 1000),
       Job("big", 1, 30 * kGiB, 0, 4, 1000), Job("other", 1, 30 * kGiB, 0, 5, 2000)},
      quotas);
  EXPECT_THAT(StartedIds(r), ElementsAre("a", "other"));
  EXPECT_EQ(Queued(r, "b").reason,
            "user quota max_host_bytes=20.0 GiB: 18.0 GiB in use, the job needs 4.0 GiB");
  EXPECT_EQ(Queued(r, "big").reason, "user quota max_host_bytes=20.0 GiB: the job needs 30.0 GiB");
  Quotas bad;
  bad.per_uid[7].max_host_bytes = -1;
  EXPECT_EQ(Scheduler().Schedule(node, {}, {}, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mobius::jobs
