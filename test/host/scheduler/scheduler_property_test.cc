// Invariants of Schedule() over many seeded random nodes, running sets, queues and quotas:
// nothing double-booked, nothing outside the allow-list or the budgets, quotas kept, every job
// accounted for once in order, no start that keeps a waiting job ahead from starting, preemption
// only of lower priorities, and the same answer for any input order.
#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/scheduler/fits.h"
#include "host/scheduler/scheduler.h"
#include "test/host/scheduler/test_nodes.h"

namespace mobius::jobs {
namespace {

using testing::kGiB;

struct Case {
  NodeResources node;
  std::vector<RunningJob> running;
  std::vector<JobRequest> queued;
  Quotas quotas;
  SchedulerOptions options;
};

int Uniform(std::mt19937& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

Case RandomCase(std::mt19937& rng, const std::vector<NodeResources>& nodes) {
  Case c;
  c.node = nodes[Uniform(rng, 0, static_cast<int>(nodes.size()) - 1)];
  const int n = static_cast<int>(c.node.gpus.size());
  c.node.allowed_gpus.clear();
  for (int g = 0; g < n; ++g) {
    if (Uniform(rng, 0, 5) > 0) c.node.allowed_gpus.push_back(g);
  }
  c.node.host_bytes = Uniform(rng, 20, 400) * kGiB;
  c.node.pinned_bytes = Uniform(rng, 5, 100) * kGiB;
  c.node.draining = Uniform(rng, 0, 15) == 0;
  // Running jobs on disjoint random GPUs (some outside the allow-list).
  std::vector<int> gpus(n);
  for (int g = 0; g < n; ++g) gpus[g] = g;
  std::shuffle(gpus.begin(), gpus.end(), rng);
  size_t next = 0;
  const int num_running = Uniform(rng, 0, 4);
  for (int i = 0; i < num_running && next < gpus.size(); ++i) {
    RunningJob r;
    r.job_id = "r" + std::to_string(i);
    r.uid = 1000 + Uniform(rng, 0, 2);
    r.priority = Uniform(rng, -2, 2);
    r.submit_seq = Uniform(rng, 0, 50);
    const int k = Uniform(rng, 1, 3);
    for (int j = 0; j < k && next < gpus.size(); ++j) r.gpus.push_back(gpus[next++]);
    r.host_bytes = Uniform(rng, 0, 60) * kGiB;
    r.pinned_bytes = Uniform(rng, 0, 15) * kGiB;
    r.preempting = Uniform(rng, 0, 6) == 0;
    c.running.push_back(r);
  }
  const int num_queued = Uniform(rng, 0, 12);
  for (int i = 0; i < num_queued; ++i) {
    JobRequest q;
    q.job_id = "q" + std::to_string(i);
    q.uid = 1000 + Uniform(rng, 0, 2);
    q.priority = Uniform(rng, -2, 3);
    q.submit_seq = Uniform(rng, 0, 30);  // ties on purpose
    q.gpus = Uniform(rng, 0, 5);
    q.host_bytes = Uniform(rng, 1, 80) * kGiB;
    q.pinned_bytes = Uniform(rng, 0, 20) * kGiB;
    q.per_gpu_bytes = Uniform(rng, 1, 90) * kGiB;
    q.placement = Uniform(rng, 0, 1) ? Placement::kSpread : Placement::kPack;
    c.queued.push_back(q);
  }
  c.quotas.defaults.max_gpus = Uniform(rng, 0, 6);
  c.quotas.defaults.max_running_jobs = Uniform(rng, 0, 3);
  if (Uniform(rng, 0, 1)) c.quotas.per_uid[1001] = {Uniform(rng, 0, 8), Uniform(rng, 0, 4)};
  c.options.preemption = Uniform(rng, 0, 1) == 1;
  if (Uniform(rng, 0, 3) == 0) c.options.gpu_choice.max_exhaustive_subsets = 1;  // greedy
  return c;
}

ScheduleResult MustSchedule(const Case& c) {
  absl::StatusOr<ScheduleResult> r =
      Scheduler(c.options).Schedule(c.node, c.running, c.queued, c.quotas);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ScheduleResult{};
}

bool Before(const JobRequest& a, const JobRequest& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.submit_seq != b.submit_seq) return a.submit_seq < b.submit_seq;
  return a.job_id < b.job_id;
}

void CheckInvariants(const Case& c, const ScheduleResult& r) {
  std::map<std::string, const JobRequest*> requests;
  for (const JobRequest& q : c.queued) requests[q.job_id] = &q;
  std::set<int> allowed(c.node.allowed_gpus.begin(), c.node.allowed_gpus.end());
  std::set<int> taken;
  int64_t host = 0, pinned = 0;
  std::map<uint32_t, int> jobs, user_gpus;
  for (const RunningJob& run : c.running) {
    taken.insert(run.gpus.begin(), run.gpus.end());
    host += run.host_bytes;
    pinned += run.pinned_bytes;
    ++jobs[run.uid];
    user_gpus[run.uid] += static_cast<int>(run.gpus.size());
  }
  const int64_t running_host = host, running_pinned = pinned;
  std::set<std::string> seen;
  if (c.node.draining) EXPECT_TRUE(r.start.empty() && r.preempt.empty());
  for (const StartDecision& d : r.start) {
    ASSERT_TRUE(requests.count(d.job_id));
    const JobRequest& q = *requests[d.job_id];
    EXPECT_TRUE(seen.insert(d.job_id).second);
    if (q.gpus > 0) EXPECT_EQ(static_cast<int>(d.gpus.size()), q.gpus);
    EXPECT_GE(d.gpus.size(), 1u);
    EXPECT_TRUE(std::is_sorted(d.gpus.begin(), d.gpus.end()));
    for (int g : d.gpus) {
      EXPECT_TRUE(allowed.count(g)) << "GPU " << g << " outside the allow-list";
      EXPECT_TRUE(taken.insert(g).second) << "GPU " << g << " handed out twice";
      EXPECT_TRUE(HasMemoryFor(c.node.gpus[g], q.per_gpu_bytes));
    }
    host += q.host_bytes;
    pinned += q.pinned_bytes;
    ++jobs[q.uid];
    user_gpus[q.uid] += static_cast<int>(d.gpus.size());
    const UserQuota& quota = c.quotas.For(q.uid);
    if (quota.max_running_jobs > 0) EXPECT_LE(jobs[q.uid], quota.max_running_jobs);
    if (quota.max_gpus > 0) EXPECT_LE(user_gpus[q.uid], quota.max_gpus);
  }
  if (!r.start.empty()) {
    EXPECT_LE(host, std::max(c.node.host_bytes, running_host));
    EXPECT_LE(pinned, std::max(c.node.pinned_bytes, running_pinned));
    if (host > running_host) EXPECT_LE(host, c.node.host_bytes);
  }
  for (size_t i = 0; i < r.queued.size(); ++i) {
    const QueuedDecision& q = r.queued[i];
    ASSERT_TRUE(requests.count(q.job_id));
    EXPECT_TRUE(seen.insert(q.job_id).second) << q.job_id << " twice";
    EXPECT_EQ(q.position, static_cast<int>(i) + 1);
    EXPECT_FALSE(q.reason.empty());
    if (i > 0) EXPECT_TRUE(Before(*requests[r.queued[i - 1].job_id], *requests[q.job_id]));
    EXPECT_EQ(q.cause == PendingCause::kNeverFits,
              !NeverFitsReason(c.node, *requests[q.job_id]).has_value() ? false : true);
  }
  EXPECT_EQ(seen.size(), c.queued.size());
  for (size_t i = 1; i < r.start.size(); ++i) {
    EXPECT_TRUE(Before(*requests[r.start[i - 1].job_id], *requests[r.start[i].job_id]));
  }
  EXPECT_LE(r.preempt.size(), 1u);
  for (const PreemptDecision& p : r.preempt) {
    EXPECT_TRUE(c.options.preemption);
    const JobRequest& q = *requests[p.job_id];
    EXPECT_FALSE(p.victims.empty());
    for (const std::string& v : p.victims) {
      auto it = std::find_if(c.running.begin(), c.running.end(),
                             [&](const RunningJob& run) { return run.job_id == v; });
      ASSERT_NE(it, c.running.end());
      EXPECT_LT(it->priority, q.priority);
      EXPECT_FALSE(it->preempting);
    }
  }
}

// Whether `job` alone could start once only `holders` hold resources (quotas included).
bool FitsAlone(const Case& c, const std::vector<RunningJob>& holders, const JobRequest& job) {
  std::vector<bool> used(c.node.gpus.size(), false);
  int64_t host = c.node.host_bytes, pinned = c.node.pinned_bytes;
  int user_jobs = 0, user_gpus = 0;
  for (const RunningJob& h : holders) {
    for (int g : h.gpus) used[g] = true;
    host -= h.host_bytes;
    pinned -= h.pinned_bytes;
    if (h.uid == job.uid) {
      ++user_jobs;
      user_gpus += static_cast<int>(h.gpus.size());
    }
  }
  int eligible = 0;
  for (int g : c.node.allowed_gpus) {
    eligible += !used[g] && HasMemoryFor(c.node.gpus[g], job.per_gpu_bytes);
  }
  const UserQuota& q = c.quotas.For(job.uid);
  const int need = std::max(job.gpus, 1);
  if (q.max_running_jobs > 0 && user_jobs + 1 > q.max_running_jobs) return false;
  if (q.max_gpus > 0 && user_gpus + need > q.max_gpus) return false;
  return eligible >= need && job.host_bytes <= host && job.pinned_bytes <= pinned;
}

// No job that started past a job waiting for resources can delay it: whichever of the jobs running
// now have ended, whenever the waiting job would fit without the passer running, it fits with it.
void CheckNoHarmfulBackfill(const Case& c, const ScheduleResult& r) {
  std::map<std::string, const JobRequest*> requests;
  for (const JobRequest& q : c.queued) requests[q.job_id] = &q;
  std::vector<RunningJob> started;
  for (const StartDecision& d : r.start) {
    const JobRequest& q = *requests[d.job_id];
    RunningJob run;
    run.job_id = q.job_id;
    run.uid = q.uid;
    run.gpus = d.gpus;
    run.host_bytes = q.host_bytes;
    run.pinned_bytes = q.pinned_bytes;
    started.push_back(run);
  }
  for (const QueuedDecision& waiting : r.queued) {
    if (waiting.cause != PendingCause::kResources && waiting.cause != PendingCause::kBehind &&
        waiting.cause != PendingCause::kPreempting) {
      continue;
    }
    const JobRequest& h = *requests[waiting.job_id];
    for (size_t x = 0; x < started.size(); ++x) {
      if (!Before(h, *requests[started[x].job_id])) continue;
      // Every subset of the running jobs that may still run later.
      for (uint32_t mask = 0; mask < (1u << c.running.size()); ++mask) {
        std::vector<RunningJob> with;
        for (size_t i = 0; i < c.running.size(); ++i) {
          if (mask & (1u << i)) with.push_back(c.running[i]);
        }
        std::vector<RunningJob> without = with;
        for (size_t i = 0; i < started.size(); ++i) {
          with.push_back(started[i]);
          if (i != x) without.push_back(started[i]);
        }
        if (FitsAlone(c, without, h)) {
          EXPECT_TRUE(FitsAlone(c, with, h))
              << started[x].job_id << " started past " << h.job_id << " and can delay it\n"
              << DescribeSchedule(r);
        }
      }
    }
  }
}

TEST(ScheduleProperties, RandomCases) {
  const std::vector<NodeResources> nodes = {
      testing::PaperTestbed(), testing::FixtureNode("rtx4090_2s_4sw_8gpu.xml"),
      testing::FixtureNode("root_ports_1s_4gpu.xml"), testing::FixtureNode("nvlink_dgx_8xh100.xml"),
      testing::FlatNode(3, 24 * kGiB)};
  std::mt19937 rng(20240601);
  int started = 0, waited = 0, preempted = 0, behind = 0;
  for (int iteration = 0; iteration < 1500; ++iteration) {
    SCOPED_TRACE(iteration);
    Case c = RandomCase(rng, nodes);
    ScheduleResult r = MustSchedule(c);
    CheckInvariants(c, r);
    CheckNoHarmfulBackfill(c, r);
    // Any input order gives the same result.
    Case shuffled = c;
    std::shuffle(shuffled.queued.begin(), shuffled.queued.end(), rng);
    std::shuffle(shuffled.running.begin(), shuffled.running.end(), rng);
    ScheduleResult again = MustSchedule(shuffled);
    EXPECT_EQ(r, again) << DescribeSchedule(r) << "---\n" << DescribeSchedule(again);
    if (::testing::Test::HasFailure()) break;
    started += static_cast<int>(r.start.size());
    waited += static_cast<int>(r.queued.size());
    preempted += static_cast<int>(r.preempt.size());
    for (const QueuedDecision& q : r.queued) behind += q.cause == PendingCause::kBehind;
  }
  // The generator exercises every outcome.
  EXPECT_GT(started, 500);
  EXPECT_GT(waited, 500);
  EXPECT_GT(preempted, 20);
  EXPECT_GT(behind, 50);
}

}  // namespace
}  // namespace mobius::jobs
