// The usage ledger: what each update accrues, and writes that a failing store retries without
// counting anything twice.
#include "server/jobs/service/usage_ledger.h"

#include <map>
#include <utility>

#include "gtest/gtest.h"

namespace mobius::jobs {
namespace {

UsageRecord Start(const std::string& id, int64_t at_ms, int gpus) {
  UsageRecord r;
  r.job_id = id;
  r.uid = 1000;
  r.user = "alice";
  r.started_unix_ms = at_ms;
  r.gpus = gpus;
  r.host_bytes = int64_t{1} << 30;
  return r;
}

TEST(UsageLedgerTest, UpdatesAccrueGpuTimeTokensAndMeasuredMemory) {
  UsageLedger l;
  l.Start(Start("j-000001", 1'000, 2));
  UsageDelta d = l.Step("j-000001", 512, 3'000, int64_t{2} << 30);
  EXPECT_DOUBLE_EQ(d.gpu_seconds, 4.0);
  EXPECT_DOUBLE_EQ(d.host_gib_seconds, 2.0);
  EXPECT_EQ(d.tokens, 512);
  EXPECT_EQ(d.user, "alice");
  std::vector<UsageDelta> t = l.Touch(4'000);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_DOUBLE_EQ(t[0].gpu_seconds, 2.0);
  d = l.End("j-000001", 5'000);
  EXPECT_DOUBLE_EQ(d.gpu_seconds, 2.0);
  EXPECT_EQ(l.End("j-000001", 6'000).gpu_seconds, 0.0);  // ended once
  EXPECT_EQ(l.Step("j-000009", 5, 6'000, -1).tokens, 0);  // no such run
  std::vector<UsageRecord> records = l.Records();
  ASSERT_EQ(records.size(), 1u);
  const UsageRecord& r = records[0];
  EXPECT_TRUE(r.ended);
  EXPECT_EQ(r.last_unix_ms, 5'000);
  EXPECT_EQ(r.tokens, 512);
  EXPECT_EQ(r.steps, 1);
  EXPECT_DOUBLE_EQ(r.gpu_seconds(), 8.0);
  // The cgroup sample (2 GiB from the step at 3 s) integrated over the 2 s after it.
  EXPECT_DOUBLE_EQ(r.measured_host_byte_seconds, 2.0 * (int64_t{2} << 30));
}

TEST(UsageLedgerTest, RefusedWritesAreRetriedAndNeverDoubleCounted) {
  UsageLedger l;
  std::map<std::pair<std::string, int64_t>, UsageRecord> store;  // PutUsage's upsert
  bool full = true;
  auto put = [&](const UsageRecord& r) {
    if (full) return absl::ResourceExhaustedError("database or disk is full");
    store[{r.job_id, r.started_unix_ms}] = r;
    return absl::OkStatus();
  };
  l.Start(Start("j-000001", 0, 4));
  l.Start(Start("j-000002", 0, 1));
  l.Step("j-000001", 100, 1'000, -1);
  EXPECT_FALSE(l.Flush(put).ok());
  l.End("j-000001", 2'000);
  EXPECT_FALSE(l.Flush(put).ok());
  EXPECT_TRUE(l.dirty());
  EXPECT_EQ(l.ended_written(), 0);
  full = false;
  ASSERT_TRUE(l.Flush(put).ok());
  EXPECT_EQ(l.ended_written(), 1);  // the fair-share cache of stored runs is stale now
  ASSERT_TRUE(l.Flush(put).ok());  // again: nothing changes
  EXPECT_EQ(l.ended_written(), 1);
  EXPECT_FALSE(l.dirty());
  ASSERT_EQ(store.size(), 2u);
  EXPECT_DOUBLE_EQ((store[{"j-000001", 0}].gpu_seconds()), 8.0);
  EXPECT_TRUE((store[{"j-000001", 0}].ended));
  EXPECT_EQ(l.Records().size(), 1u);  // the written end left the ledger; j-000002 is open
  l.Touch(3'000);
  EXPECT_TRUE(l.dirty());
  ASSERT_TRUE(l.Flush(put).ok());
  EXPECT_DOUBLE_EQ((store[{"j-000002", 0}].gpu_seconds()), 3.0);
}

TEST(UsageLedgerTest, ANewStartEndsTheJobsOpenRun) {
  UsageLedger l;
  l.Start(Start("j-000001", 0, 1));
  l.Start(Start("j-000001", 5'000, 1));
  std::vector<UsageRecord> r = l.Records();
  ASSERT_EQ(r.size(), 2u);
  int ended = 0;
  for (const UsageRecord& x : r) ended += x.ended;
  EXPECT_EQ(ended, 1);
}

}  // namespace
}  // namespace mobius::jobs
