// The job manager's Usage call over a long history: totals over every run of the window, the run
// list capped at the newest kMaxReadLimit (the rest counted, not sent), and who may ask.
#include <string>

#include "common/jobspec/json.h"
#include "server/jobs/store/job_store.h"
#include "test/server/jobs/service/job_manager_test_util.h"

namespace mobius::jobs {
namespace {

class JobManagerUsageTest : public testing::JobManagerFixture {};

TEST_F(JobManagerUsageTest, ALongHistoryIsTotalledWholeAndListedNewestFirstUpToTheCap) {
  constexpr int kRuns = kMaxReadLimit + 25;
  {
    auto store = JobStore::Open(state_dir_ + "/jobs.db");
    ASSERT_TRUE(store.ok()) << store.status();
    JobRecord r;
    r.uid = admin_.uid;
    r.user = admin_.user;
    r.name = "history";
    r.spec_json = jobspec::JobSpecToJson(Spec("history", 4));
    r.created_unix_ms = 1;
    absl::StatusOr<JobStore::CreateResult> created = (*store)->CreateJob(r);
    ASSERT_TRUE(created.ok()) << created.status();
    for (int i = 0; i < kRuns; ++i) {  // one GPU for one second each, a second apart
      UsageRecord u;
      u.job_id = created->job.id;
      u.uid = admin_.uid;
      u.gpus = 1;
      u.started_unix_ms = 1'000'000 + int64_t{2000} * i;
      u.last_unix_ms = u.started_unix_ms + 1000;
      u.ended = true;
      u.tokens = 10;
      ASSERT_TRUE((*store)->PutUsage(u).ok());
    }
  }
  JobManagerOptions o = Options();
  o.node.draining = true;  // the job stays queued: the history is all there is
  auto m = Create(std::move(o));
  ASSERT_NE(m, nullptr);
  absl::StatusOr<UsageView> v = m->Usage(admin_, {.runs = true});
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->report.users.size(), 1u);
  EXPECT_EQ(v->report.users[0].runs, kRuns);
  EXPECT_DOUBLE_EQ(v->report.users[0].gpu_seconds, kRuns);
  EXPECT_EQ(v->report.users[0].tokens, 10 * kRuns);
  ASSERT_EQ(v->runs.size(), static_cast<size_t>(kMaxReadLimit));
  EXPECT_EQ(v->runs_omitted, 25);
  EXPECT_EQ(v->runs.back().started_unix_ms, 1'000'000 + int64_t{2000} * (kRuns - 1));  // newest
  // A window: only the runs that reach it, each clipped to it.
  absl::StatusOr<UsageView> late =
      m->Usage(admin_, {.since_unix_ms = 1'000'000 + int64_t{2000} * (kRuns - 10) + 500});
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->report.users[0].runs, 10);
  EXPECT_DOUBLE_EQ(late->report.users[0].gpu_seconds, 9 + 0.5);
  // Another user asks: refused for this uid, an empty report of their own.
  const Caller other{.uid = admin_.uid + 1, .user = "other", .admin = false};
  EXPECT_EQ(m->Usage(other, {.uid = admin_.uid}).status().code(),
            absl::StatusCode::kPermissionDenied);
  absl::StatusOr<UsageView> own = m->Usage(other, {});
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_TRUE(own->report.users.empty());
  EXPECT_EQ(m->Usage(admin_, {.since_unix_ms = -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mobius::jobs
