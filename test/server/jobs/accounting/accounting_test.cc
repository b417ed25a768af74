// Accounting rollups and the fair-share factor against hand-computed values.
#include "server/jobs/accounting/accounting.h"

#include <cmath>

#include "gtest/gtest.h"

namespace mobius::jobs {
namespace {

UsageRecord MakeRun(const std::string& id, uint32_t uid, int64_t gid, int64_t start_s, int64_t end_s,
                int gpus, bool ended = true) {
  UsageRecord r;
  r.job_id = id;
  r.uid = uid;
  r.user = "u" + std::to_string(uid);
  r.gid = gid;
  r.group = "g" + std::to_string(gid);
  r.started_unix_ms = start_s * 1000;
  r.last_unix_ms = end_s * 1000;
  r.gpus = gpus;
  r.host_bytes = int64_t{2} << 30;
  r.tokens = 100;
  r.steps = 10;
  r.ended = ended;
  return r;
}

TEST(AccountingTest, RollupClipsRunsToTheWindowPerUserAndGroup) {
  const std::vector<UsageRecord> runs = {
      MakeRun("j-000001", 1, 10, 0, 100, 2),       // half inside [50, 300]
      MakeRun("j-000002", 1, 10, 200, 250, 1),     // inside
      MakeRun("j-000003", 2, 10, 100, 400, 4, false),  // open, cut at now = 300
      MakeRun("j-000004", 2, 20, 0, 40, 8),        // ends before the window: nothing
  };
  const UsageReport r = Rollup(runs, 50'000, 300'000);
  ASSERT_EQ(r.users.size(), 2u);
  EXPECT_EQ(r.users[0].uid, 1u);
  EXPECT_EQ(r.users[0].runs, 2);
  EXPECT_EQ(r.users[0].jobs, 2);
  EXPECT_DOUBLE_EQ(r.users[0].gpu_seconds, 2 * 50 + 1 * 50);
  EXPECT_DOUBLE_EQ(r.users[0].host_gib_seconds, 2.0 * 100);
  EXPECT_EQ(r.users[0].tokens, 200);
  EXPECT_EQ(r.users[1].uid, 2u);
  EXPECT_EQ(r.users[1].runs, 1);
  EXPECT_EQ(r.users[1].running, 1);
  EXPECT_DOUBLE_EQ(r.users[1].gpu_seconds, 4 * 200);
  ASSERT_EQ(r.groups.size(), 1u);  // group 20's only run is outside
  EXPECT_EQ(r.groups[0].gid, 10);
  EXPECT_EQ(r.groups[0].runs, 3);
  EXPECT_DOUBLE_EQ(r.groups[0].gpu_seconds, 150 + 800);
}

TEST(AccountingTest, MergePrefersTheNewerRecordOfARun) {
  UsageRecord stored = MakeRun("j-000001", 1, 10, 0, 100, 2, false);
  UsageRecord held = stored;
  held.last_unix_ms = 150'000;
  const std::vector<UsageRecord> merged =
      MergeUsage({stored, MakeRun("j-000002", 1, 10, 5, 6, 1)}, {held});
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].last_unix_ms, 150'000);
  EXPECT_EQ(merged[1].job_id, "j-000002");
}

TEST(AccountingTest, DecayHalvesUsageEveryHalfLife) {
  // One GPU for one second, one half-life (100 s) ago: ~0.5 GPU-seconds.
  const std::vector<UsageRecord> runs = {MakeRun("j-000001", 1, 10, 99, 100, 1)};
  auto decayed = DecayedGpuSeconds(runs, 200'000, absl::Seconds(100));
  EXPECT_NEAR(decayed[1], 0.5, 0.005);
  // Exactly: h/ln2 * (2^-(100/100) - 2^-(101/100)).
  EXPECT_NEAR(decayed[1], 100 / std::log(2.0) * (std::exp2(-1.0) - std::exp2(-1.01)), 1e-9);
  // No decay: plain GPU-seconds.
  EXPECT_DOUBLE_EQ(DecayedGpuSeconds(runs, 200'000, absl::ZeroDuration())[1], 1.0);
  // A run still open at now counts up to now only.
  EXPECT_DOUBLE_EQ(DecayedGpuSeconds({MakeRun("j-000002", 2, 10, 0, 500, 2)}, 100'000,
                                     absl::ZeroDuration())[2],
                   200.0);
}

TEST(AccountingTest, FactorsFollowSlurmsClassicFormula) {
  // Nobody has usage: everyone 1.
  auto none = FairShareFactors({}, {1, 2});
  EXPECT_EQ(none[1], 1.0);
  EXPECT_EQ(none[2], 1.0);
  // User 1 used everything, two users: U = 1, S = 1/2, F = 2^-2; user 2: F = 1.
  auto f = FairShareFactors({{1, 300.0}}, {1, 2});
  EXPECT_DOUBLE_EQ(f[1], 0.25);
  EXPECT_DOUBLE_EQ(f[2], 1.0);
  // Equal usage: each exactly their share, F = 0.5.
  auto even = FairShareFactors({{1, 10.0}, {2, 10.0}}, {1, 2});
  EXPECT_DOUBLE_EQ(even[1], 0.5);
  EXPECT_DOUBLE_EQ(even[2], 0.5);
  // A past user without jobs now still counts among the users who share the node.
  auto three = FairShareFactors({{1, 10.0}, {3, 10.0}}, {1, 2});
  EXPECT_DOUBLE_EQ(three[1], std::exp2(-0.5 * 3));
  EXPECT_EQ(three.count(3), 0u);
}

TEST(AccountingTest, OrderScoreWeighsShareAndWait) {
  FairShareOptions o;
  o.weight = 1.0;
  o.age_weight = 0.1;
  o.age_max = absl::Hours(10);
  EXPECT_DOUBLE_EQ(OrderScore(o, 0.25, absl::ZeroDuration()), 0.25);
  EXPECT_DOUBLE_EQ(OrderScore(o, 0.25, absl::Hours(5)), 0.30);
  EXPECT_DOUBLE_EQ(OrderScore(o, 0.25, absl::Hours(50)), 0.35);  // capped
  o.weight = 0;
  o.age_weight = 0;
  EXPECT_DOUBLE_EQ(OrderScore(o, 0.25, absl::Hours(5)), 0.0);  // off: FIFO
}

}  // namespace
}  // namespace mobius::jobs
