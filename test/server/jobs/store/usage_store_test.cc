// The job store's accounting rows on a real SQLite file: upserts that never count twice, the
// window and user filters, closing a dead daemon's open runs, validation, reopening.
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jobs/store/job_store.h"
#include "test/server/jobs/store/store_test_util.h"

namespace mobius::jobs {
namespace {

using ::testing::HasSubstr;
using testing::NewJob;
using testing::TempDir;

class UsageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = JobStore::Open(dir_.File("jobs.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  std::string Create(uint32_t uid, const std::string& submission_id) {
    auto created = store_->CreateJob(NewJob(uid, submission_id));
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? created->job.id : "";
  }
  static UsageRecord MakeRun(const std::string& id, uint32_t uid, int64_t start, int64_t last,
                         int gpus) {
    UsageRecord r;
    r.job_id = id;
    r.uid = uid;
    r.user = "user" + std::to_string(uid);
    r.gid = 100;
    r.group = "lab";
    r.started_unix_ms = start;
    r.last_unix_ms = last;
    r.gpus = gpus;
    r.host_bytes = int64_t{3} << 30;
    return r;
  }
  TempDir dir_;
  std::unique_ptr<JobStore> store_;
};

TEST_F(UsageStoreTest, PutIsAnUpsertPerRun) {
  const std::string a = Create(1000, "a");
  UsageRecord r = MakeRun(a, 1000, 1'000, 5'000, 2);
  ASSERT_TRUE(store_->PutUsage(r).ok());
  // The same run written again (a retried write, a later update): replaced, never added.
  r.last_unix_ms = 9'000;
  r.tokens = 4096;
  r.steps = 4;
  ASSERT_TRUE(store_->PutUsage(r).ok());
  ASSERT_TRUE(store_->PutUsage(r).ok());
  auto rows = store_->ListUsage(0);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ(rows->at(0), r);
  EXPECT_DOUBLE_EQ(rows->at(0).gpu_seconds(), 16.0);
  EXPECT_DOUBLE_EQ(rows->at(0).host_gib_seconds(), 24.0);
  // A second run of the same job (a restart) is a row of its own.
  ASSERT_TRUE(store_->PutUsage(MakeRun(a, 1000, 20'000, 21'000, 2)).ok());
  EXPECT_EQ(store_->ListUsage(0)->size(), 2u);
}

TEST_F(UsageStoreTest, ListFiltersByWindowAndUser) {
  const std::string a = Create(1000, "a"), b = Create(2000, "b");
  ASSERT_TRUE(store_->PutUsage(MakeRun(a, 1000, 1'000, 2'000, 1)).ok());
  ASSERT_TRUE(store_->PutUsage(MakeRun(b, 2000, 1'500, 8'000, 1)).ok());
  ASSERT_TRUE(store_->PutUsage(MakeRun(a, 1000, 6'000, 7'000, 1)).ok());
  EXPECT_EQ(store_->ListUsage(0)->size(), 3u);
  auto late = store_->ListUsage(5'000);  // runs that reach 5 s or later
  ASSERT_TRUE(late.ok());
  ASSERT_EQ(late->size(), 2u);
  EXPECT_EQ(late->at(0).job_id, b);  // by start
  EXPECT_EQ(late->at(1).started_unix_ms, 6'000);
  auto mine = store_->ListUsage(0, 1000u);
  ASSERT_EQ(mine->size(), 2u);
  for (const UsageRecord& r : *mine) EXPECT_EQ(r.uid, 1000u);
  EXPECT_TRUE(store_->ListUsage(0, 3000u)->empty());
}

TEST_F(UsageStoreTest, CloseOpenUsageEndsDeadRunsAtTheirLastWrite) {
  const std::string a = Create(1000, "a"), b = Create(2000, "b");
  UsageRecord open = MakeRun(a, 1000, 1'000, 4'000, 2);
  UsageRecord done = MakeRun(b, 2000, 1'000, 3'000, 1);
  done.ended = true;
  ASSERT_TRUE(store_->PutUsage(open).ok());
  ASSERT_TRUE(store_->PutUsage(done).ok());
  auto closed = store_->CloseOpenUsage();
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(*closed, 1);
  EXPECT_EQ(*store_->CloseOpenUsage(), 0);  // idempotent
  auto rows = store_->ListUsage(0, 1000u);
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_TRUE(rows->at(0).ended);
  EXPECT_EQ(rows->at(0).last_unix_ms, 4'000);  // not extended to "now"
  EXPECT_DOUBLE_EQ(rows->at(0).gpu_seconds(), 6.0);
}

TEST_F(UsageStoreTest, BadRecordsAreRefusedNamingTheField) {
  const std::string a = Create(1000, "a");
  UsageRecord r = MakeRun(a, 1000, 5'000, 4'000, 1);
  absl::Status st = store_->PutUsage(r);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("last_unix_ms"));
  r = MakeRun(a, 1000, 1'000, 2'000, -1);
  EXPECT_THAT(store_->PutUsage(r).message(), HasSubstr("gpus"));
  r = MakeRun(a, 1000, 1'000, 2'000, 1);
  r.tokens = -5;
  EXPECT_THAT(store_->PutUsage(r).message(), HasSubstr("tokens"));
  EXPECT_EQ(store_->PutUsage(MakeRun("j-999999", 1000, 1, 2, 1)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->PutUsage(MakeRun("nonsense", 1000, 1, 2, 1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store_->ListUsage(0)->empty());
}

TEST_F(UsageStoreTest, RowsSurviveReopening) {
  const std::string a = Create(1000, "a");
  UsageRecord r = MakeRun(a, 1000, 1'000, 2'500, 4);
  r.ended = true;
  r.measured_host_byte_seconds = 1.5e9;
  ASSERT_TRUE(store_->PutUsage(r).ok());
  store_.reset();
  auto again = JobStore::Open(dir_.File("jobs.db"));
  ASSERT_TRUE(again.ok()) << again.status();
  auto rows = (*again)->ListUsage(0);
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ(rows->at(0), r);
}

}  // namespace
}  // namespace mobius::jobs
