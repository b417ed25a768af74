// The job manager with its store's disk full (job_manager.h, "State the store cannot write"): real
// workers, a real SQLite store whose writes fail with SQLITE_FULL from a chosen moment
// (full_disk_vfs.h). A job that ends meanwhile is SUCCEEDED for Get, List and Watch at once, gives
// back its GPUs, and the store has it once the disk is freed; a cancel still stops the workers; a
// job the store cannot record as RUNNING is not started, and starts once it can.
#include <sqlite3.h>

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/run/completion_record.h"
#include "server/jobs/service/job_dirs.h"
#include "server/jobs/store/job_store.h"
#include "test/server/jobs/service/full_disk_vfs.h"
#include "test/server/jobs/service/job_manager_test_util.h"

namespace mobius::jobs {
namespace {

using testing::FullDiskVfs;

class JobManagerDiskFullTest : public testing::JobManagerFixture {
 protected:
  void SetUp() override {
    FullDiskVfs::Install();
    JobManagerFixture::SetUp();
    FullDiskVfs::Watch(state_dir_);
  }
  void TearDown() override {
    FullDiskVfs::Watch("");
    JobManagerFixture::TearDown();
  }

  // A second connection to the store, opened while the disk has room; it only reads.
  std::unique_ptr<JobStore> Reader() {
    absl::StatusOr<std::unique_ptr<JobStore>> s = JobStore::Open(state_dir_ + "/jobs.db");
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  static JobState Stored(JobStore& store, const std::string& id) {
    absl::StatusOr<JobRecord> r = store.GetJob(id);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->state : JobState::kQueued;
  }
  std::vector<std::string> Listed(JobManager& m, JobStateSet states) {
    ListJobsFilter filter;
    filter.states = states;
    auto page = m.List(admin_, filter, 0, "");
    EXPECT_TRUE(page.ok()) << page.status();
    std::vector<std::string> ids;
    if (page.ok()) {
      for (const JobView& v : page->first) {
        ids.push_back(absl::StrCat(v.record.id, ":", JobStateName(v.record.state)));
      }
    }
    return ids;
  }
  // The state events Watch streams until it ends.
  std::vector<std::string> Watched(JobManager& m, const std::string& id) {
    std::vector<std::string> states;
    absl::Status st = m.Watch(admin_, id, [&](const JobEvent& e) {
      if (e.kind == JobEvent::Kind::kState) {
        states.push_back(std::string(JobStateName(e.state)));
      }
      return true;
    });
    EXPECT_TRUE(st.ok()) << st;
    return states;
  }
};

TEST_F(JobManagerDiskFullTest, AJobThatEndsWhileTheDiskIsFullIsServedAndWrittenLater) {
  auto m = Create();
  ASSERT_NE(m, nullptr);
  auto reader = Reader();
  ASSERT_NE(reader, nullptr);
  // The disk fills up after step 2 of 4 is recorded.
  observer_.SetOnStep([](const runtime::StepReport& r) {
    if (r.step == 2) FullDiskVfs::SetFull(true);
  });
  absl::StatusOr<JobView> submitted = m->Submit(admin_, "", Spec("full", 4));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->record.id;

  JobView done = WaitTerminal(*m, id);
  ASSERT_TRUE(FullDiskVfs::full());
  EXPECT_EQ(done.record.state, JobState::kSucceeded) << done.record.state_reason;
  EXPECT_EQ(done.record.state_reason, "all 4 steps done");
  EXPECT_GT(done.record.finished_unix_ms, 0);
  EXPECT_GT(FullDiskVfs::refused_writes(), 0);
  // The store could not take it: the daemon serves it from memory.
  EXPECT_EQ(Stored(*reader, id), JobState::kRunning);
  EXPECT_EQ(Listed(*m, {}), (std::vector<std::string>{id + ":SUCCEEDED"}));
  EXPECT_TRUE(Listed(*m, {JobState::kRunning}).empty());
  EXPECT_EQ(Listed(*m, {JobState::kSucceeded}), (std::vector<std::string>{id + ":SUCCEEDED"}));
  std::vector<std::string> watched = Watched(*m, id);
  ASSERT_FALSE(watched.empty());
  EXPECT_EQ(watched.back(), "SUCCEEDED");
  int lines = 0;
  EXPECT_TRUE(m->StreamLogs(admin_, id, 1, /*follow=*/true, [&](const LogLine&) {
                 ++lines;
                 return true;
               }).ok());  // returns: the job is over
  EXPECT_GT(lines, 0);
  // It holds no GPU and is not started again.
  NodeStatus node = m->Status();
  EXPECT_EQ(node.running, 0);
  EXPECT_EQ(node.queued, 0);
  for (const auto& g : node.gpus) EXPECT_TRUE(g.job_id.empty()) << "GPU " << g.index;
  // Rank 0 wrote the completion record beside the checkpoints (not in the store).
  absl::StatusOr<runtime::CompletionRecord> record =
      runtime::ReadCompletionRecord(JobCheckpointDir(Options(), done.record, Spec("full", 4)));
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->job_id, id);
  EXPECT_EQ(record->steps_done, 4);
  EXPECT_TRUE(absl::EndsWith(record->final_checkpoint, "checkpoint-00000004"))
      << record->final_checkpoint;

  // The disk has room again: the retrier writes the transition.
  FullDiskVfs::SetFull(false);
  EXPECT_TRUE(Eventually([&] { return Stored(*reader, id) == JobState::kSucceeded; }));
  absl::StatusOr<std::vector<TransitionRecord>> transitions = reader->Transitions(id);
  ASSERT_TRUE(transitions.ok()) << transitions.status();
  ASSERT_FALSE(transitions->empty());
  EXPECT_EQ(transitions->back().from, JobState::kRunning);
  EXPECT_EQ(transitions->back().reason, "all 4 steps done");
  EXPECT_EQ(transitions->back().unix_ms, done.record.finished_unix_ms);  // when it happened
  // The daemon's line about it follows the transition (the retrier writes both, in that order).
  EXPECT_TRUE(Eventually([&] {
    absl::StatusOr<std::vector<LogLine>> logs = reader->ReadLogs(id, 1, kMaxReadLimit);
    if (!logs.ok()) return false;
    for (const LogLine& l : *logs) {
      if (absl::StrContains(l.text, "recorded")) return true;
    }
    return false;
  })) << "no daemon line about the late write";
  // Served the same as before.
  absl::StatusOr<JobView> after = m->Get(admin_, id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->record.state, JobState::kSucceeded);
  EXPECT_EQ(Watched(*m, id).back(), "SUCCEEDED");
  // Accounting: the run ended while the disk was full; its record is written now, once, with the
  // run's wall time x 2 GPUs and the tokens of its steps.
  EXPECT_TRUE(Eventually([&] {
    absl::StatusOr<std::vector<UsageRecord>> rows = reader->ListUsage(0);
    return rows.ok() && rows->size() == 1 && rows->at(0).ended;
  }));
  absl::StatusOr<std::vector<UsageRecord>> rows = reader->ListUsage(0);
  ASSERT_TRUE(rows.ok() && rows->size() == 1u);
  const UsageRecord& u = rows->at(0);
  EXPECT_EQ(u.job_id, id);
  EXPECT_EQ(u.gpus, 2);
  EXPECT_EQ(u.steps, 4);
  // Steps 3 and 4's reports were dropped with the full disk; the accounting counted them.
  absl::StatusOr<std::vector<StepReportRow>> reports = reader->StepReports(id, 0, 100);
  ASSERT_TRUE(reports.ok() && !reports->empty());
  EXPECT_EQ(u.tokens, 4 * reports->front().tokens);
  EXPECT_NEAR(u.last_unix_ms, done.record.finished_unix_ms, 1000);
  EXPECT_NEAR(u.started_unix_ms, done.record.started_unix_ms, 1000);
  absl::StatusOr<UsageView> usage = m->Usage(admin_, {});
  ASSERT_TRUE(usage.ok()) << usage.status();
  ASSERT_EQ(usage->report.users.size(), 1u);
  EXPECT_DOUBLE_EQ(usage->report.users[0].gpu_seconds, u.gpu_seconds());
  EXPECT_EQ(usage->report.users[0].runs, 1);
}

TEST_F(JobManagerDiskFullTest, CancelWhileTheDiskIsFullStopsTheWorkers) {
  auto m = Create();
  ASSERT_NE(m, nullptr);
  auto reader = Reader();
  ASSERT_NE(reader, nullptr);
  observer_.SetOnStep([](const runtime::StepReport& r) {
    if (r.step == 1) FullDiskVfs::SetFull(true);
  });
  absl::StatusOr<JobView> submitted = m->Submit(admin_, "", Spec("long", 400, 100000));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->record.id;
  ASSERT_TRUE(Eventually([] { return FullDiskVfs::full(); }, 120));

  absl::StatusOr<JobView> cancelled = m->Cancel(admin_, id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  JobView done = WaitTerminal(*m, id);
  EXPECT_EQ(done.record.state, JobState::kCancelled);
  EXPECT_EQ(done.record.state_reason, "cancelled by tester");
  EXPECT_LT(done.record.steps_done, 400);
  EXPECT_EQ(m->Status().running, 0);
  EXPECT_EQ(Stored(*reader, id), JobState::kRunning);
  EXPECT_EQ(Watched(*m, id).back(), "CANCELLED");
  // Cancelled already: a second cancel is refused as for a stored end.
  EXPECT_EQ(m->Cancel(admin_, id).status().code(), absl::StatusCode::kFailedPrecondition);

  FullDiskVfs::SetFull(false);
  EXPECT_TRUE(Eventually([&] { return Stored(*reader, id) == JobState::kCancelled; }));
}

TEST_F(JobManagerDiskFullTest, AJobIsNotStartedUntilTheStoreTakesRunning) {
  auto m = Create();
  ASSERT_NE(m, nullptr);
  auto reader = Reader();
  ASSERT_NE(reader, nullptr);
  ASSERT_TRUE(m->SetDraining(admin_, true).ok());
  absl::StatusOr<JobView> a = m->Submit(admin_, "", Spec("a", 3));
  absl::StatusOr<JobView> b = m->Submit(admin_, "", Spec("b", 3));
  ASSERT_TRUE(a.ok() && b.ok());

  FullDiskVfs::SetFull(true);
  ASSERT_TRUE(m->SetDraining(admin_, false).ok());  // the scheduler would start both
  JobView waiting = WaitFor(*m, a->record.id, [](const JobView& v) {
    return absl::StrContains(v.pending_reason, "job store cannot be written");
  });
  EXPECT_EQ(waiting.record.state, JobState::kQueued);
  EXPECT_GE(waiting.queue_position, 1);
  // A queued job is cancelled in memory.
  ASSERT_TRUE(m->Cancel(admin_, b->record.id).ok());
  absl::StatusOr<JobView> b_now = m->Get(admin_, b->record.id);
  ASSERT_TRUE(b_now.ok());
  EXPECT_EQ(b_now->record.state, JobState::kCancelled);
  // Retried a few times meanwhile (20 ms doubling to 200 ms): still nothing runs.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(m->Status().running, 0);
  EXPECT_EQ(Stored(*reader, a->record.id), JobState::kQueued);
  EXPECT_EQ(Listed(*m, {JobState::kQueued}), (std::vector<std::string>{a->record.id + ":QUEUED"}));

  FullDiskVfs::SetFull(false);
  JobView done = WaitTerminal(*m, a->record.id);
  EXPECT_EQ(done.record.state, JobState::kSucceeded) << done.record.state_reason;
  EXPECT_EQ(Stored(*reader, a->record.id), JobState::kSucceeded);
  EXPECT_TRUE(Eventually([&] { return Stored(*reader, b->record.id) == JobState::kCancelled; }));
}

TEST_F(JobManagerDiskFullTest, ShutdownWithTheDiskFullThenARestartFindsTheCompletionRecord) {
  std::string id;
  {
    auto m = Create();
    ASSERT_NE(m, nullptr);
    observer_.SetOnStep([](const runtime::StepReport& r) {
      if (r.step == 2) FullDiskVfs::SetFull(true);
    });
    absl::StatusOr<JobView> submitted = m->Submit(admin_, "", Spec("full", 4));
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    id = submitted->record.id;
    EXPECT_EQ(WaitTerminal(*m, id).record.state, JobState::kSucceeded);
    m->Shutdown();  // the last write fails too: the store keeps RUNNING
    observer_.SetOnStep({});
  }
  auto reader = Reader();  // may open: reads do not need room
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(Stored(*reader, id), JobState::kRunning);

  // Restarted with the disk still full: SUCCEEDED from the completion record, served from memory.
  auto m = Create();
  ASSERT_NE(m, nullptr);
  absl::StatusOr<JobView> v = m->Get(admin_, id);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->record.state, JobState::kSucceeded);
  EXPECT_TRUE(absl::StartsWith(v->record.state_reason,
                               "completed before the daemon stopped: job " + id + ", 4 steps"))
      << v->record.state_reason;
  EXPECT_EQ(v->record.restarts, 0);
  EXPECT_EQ(m->Status().running, 0);
  EXPECT_EQ(Stored(*reader, id), JobState::kRunning);

  FullDiskVfs::SetFull(false);
  EXPECT_TRUE(Eventually([&] { return Stored(*reader, id) == JobState::kSucceeded; }));
}

}  // namespace
}  // namespace mobius::jobs
