// The job manager's start-up with jobs the store still has RUNNING (job_manager.h, "restart"): a
// completion record for that job with at least its total steps makes it SUCCEEDED; none, another
// job's, or one with too few steps leaves the old behaviour (requeued as a restart, FAILED once
// the restarts are used up; a requeued job whose spec names its own checkpoint directory resumes
// there). The record is read through options.read_completion, from the job's checkpoint directory
// (job_dirs.h).
#include <map>
#include <mutex>
#include <string>

#include "absl/strings/match.h"
#include "common/jobspec/json.h"
#include "common/run/checkpoint_owner.h"
#include "common/run/completion_record.h"
#include "server/jobs/service/job_dirs.h"
#include "server/jobs/service/state_dirs.h"
#include "server/jobs/store/job_store.h"
#include "test/server/jobs/service/job_manager_test_util.h"

namespace mobius::jobs {
namespace {

class JobManagerRestartTest : public testing::JobManagerFixture {
 protected:
  // A job the store has RUNNING, as a daemon that died under it leaves it.
  JobRecord Running(JobStore& store, const jobspec::JobSpec& spec, int64_t total_steps) {
    JobRecord r;
    r.uid = admin_.uid;
    r.user = admin_.user;
    r.name = spec.name;
    r.spec_json = jobspec::JobSpecToJson(spec);
    r.created_unix_ms = 1;
    r.total_steps = total_steps;
    absl::StatusOr<JobStore::CreateResult> created = store.CreateJob(r);
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return r;
    absl::StatusOr<JobRecord> running =
        store.Transition(created->job.id, JobState::kRunning, "started on GPUs 0,1", 2);
    EXPECT_TRUE(running.ok()) << running.status();
    return running.ok() ? *running : created->job;
  }
  void WriteRecord(const JobRecord& job, const jobspec::JobSpec& spec, const std::string& for_id,
                   int64_t steps) {
    const std::string dir = JobCheckpointDir(Options(), job, spec);
    std::filesystem::create_directories(dir);
    absl::Status st =
        runtime::WriteCompletionRecord(dir, {.job_id = for_id,
                                             .steps_done = steps,
                                             .final_checkpoint = dir + "/checkpoint-4",
                                             .finished_unix_ms = 1700000000000});
    ASSERT_TRUE(st.ok()) << st;
  }
};

TEST_F(JobManagerRestartTest, ACompletionRecordForTheJobMakesItSucceeded) {
  jobspec::JobSpec done_spec = Spec("done", 4);
  jobspec::JobSpec own_dir = Spec("own-dir", 4);
  own_dir.checkpoint.dir = (root_ / "user-checkpoints").string();  // the spec's, not the default
  jobspec::JobSpec none = Spec("none", 4);
  none.max_restarts = 0;
  jobspec::JobSpec other = Spec("other", 4);
  other.max_restarts = 0;
  jobspec::JobSpec short_spec = Spec("short", 4);
  short_spec.max_restarts = 0;
  JobRecord done, own, no_record, others, too_short;
  {
    auto store = JobStore::Open(state_dir_ + "/jobs.db");
    ASSERT_TRUE(store.ok()) << store.status();
    done = Running(**store, done_spec, 4);
    own = Running(**store, own_dir, 4);
    no_record = Running(**store, none, 4);
    others = Running(**store, other, 4);
    too_short = Running(**store, short_spec, 4);
  }
  WriteRecord(done, done_spec, done.id, 4);
  WriteRecord(own, own_dir, own.id, 4);
  WriteRecord(others, other, done.id, 4);  // a record, but another job's
  WriteRecord(too_short, short_spec, too_short.id, 3);

  JobManagerOptions o = Options();
  std::mutex mu;
  std::map<std::string, std::string> asked;  // job id -> checkpoint dir
  o.read_completion = [&](const JobRecord& job, const std::string& dir) {
    std::lock_guard<std::mutex> lock(mu);
    asked[job.id] = dir;
    return runtime::ReadCompletionRecord(dir);
  };
  auto m = Create(std::move(o));
  ASSERT_NE(m, nullptr);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(asked.size(), 5u);
    EXPECT_EQ(asked[done.id], DefaultCheckpointDir(state_dir_, admin_.uid, done.id));
    EXPECT_EQ(asked[own.id], own_dir.checkpoint.dir);
  }
  for (const JobRecord* job : {&done, &own}) {
    absl::StatusOr<JobView> v = m->Get(admin_, job->id);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->record.state, JobState::kSucceeded) << job->id;
    EXPECT_TRUE(absl::StartsWith(
        v->record.state_reason,
        "completed before the daemon stopped: job " + job->id + ", 4 steps, final checkpoint "))
        << v->record.state_reason;
    EXPECT_EQ(v->record.restarts, 0);
    EXPECT_EQ(v->record.steps_done, 4);
    EXPECT_TRUE(absl::EndsWith(v->record.checkpoint, "/checkpoint-4")) << v->record.checkpoint;
  }
  // The old behaviour for the others: no restart left, so FAILED.
  for (const JobRecord* job : {&no_record, &others, &too_short}) {
    absl::StatusOr<JobView> v = m->Get(admin_, job->id);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->record.state, JobState::kFailed) << job->id;
    EXPECT_EQ(v->record.state_reason,
              "the daemon stopped while it ran and its 0 restart(s) are used up");
  }
}

TEST_F(JobManagerRestartTest, WithoutARecordTheJobIsRequeuedAsARestartAndResumes) {
  jobspec::JobSpec spec = Spec("requeued", 4);  // max_restarts 1
  // One whose spec names its checkpoint directory, which its first run claimed (OWNER.json): the
  // re-plan after the restart takes it as the job's own, not another job's.
  jobspec::JobSpec own_spec = Spec("own-dir", 4);
  own_spec.checkpoint.dir = (root_ / "own-checkpoints").string();
  JobRecord job, own;
  std::unique_ptr<JobStore> store;
  {
    auto opened = JobStore::Open(state_dir_ + "/jobs.db");
    ASSERT_TRUE(opened.ok()) << opened.status();
    store = *std::move(opened);
    job = Running(*store, spec, 4);
    own = Running(*store, own_spec, 4);
  }
  // The dead daemon's accounting of the run it lost: open, last written 3 s after its start.
  UsageRecord lost;
  lost.job_id = job.id;
  lost.uid = job.uid;
  lost.gpus = 2;
  lost.started_unix_ms = 1'000'000;
  lost.last_unix_ms = 1'003'000;
  ASSERT_TRUE(store->PutUsage(lost).ok());
  ASSERT_TRUE(checkpoint::ClaimCheckpointDir(own_spec.checkpoint.dir, own.id).ok());
  auto m = Create();
  ASSERT_NE(m, nullptr);
  for (const JobRecord* j : {&job, &own}) {
    JobView done = WaitTerminal(*m, j->id);
    EXPECT_EQ(done.record.state, JobState::kSucceeded) << j->id << ": " << done.record.state_reason;
    EXPECT_EQ(done.record.restarts, 1);
    absl::StatusOr<std::vector<TransitionRecord>> transitions = store->Transitions(j->id);
    ASSERT_TRUE(transitions.ok()) << transitions.status();
    ASSERT_GE(transitions->size(), 3u);
    EXPECT_EQ((*transitions)[1].from, JobState::kRunning);
    EXPECT_EQ((*transitions)[1].to, JobState::kQueued);
    EXPECT_EQ((*transitions)[1].reason, "the daemon stopped while it ran; starts over");
  }
  // Accounting: the lost run closed where its last write left it (6 GPU-seconds, not a second
  // more), the new run a record of its own, ended, with the steps it ran.
  EXPECT_TRUE(Eventually([&] {
    absl::StatusOr<std::vector<UsageRecord>> rows = store->ListUsage(0, job.uid);
    if (!rows.ok()) return false;
    int ended = 0;
    for (const UsageRecord& r : *rows) ended += r.job_id == job.id && r.ended;
    return ended == 2;
  }));
  absl::StatusOr<std::vector<UsageRecord>> rows = store->ListUsage(0, job.uid);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::vector<UsageRecord> of_job;
  for (const UsageRecord& r : *rows) {
    if (r.job_id == job.id) of_job.push_back(r);
  }
  ASSERT_EQ(of_job.size(), 2u);
  EXPECT_EQ(of_job[0].last_unix_ms, 1'003'000);
  EXPECT_DOUBLE_EQ(of_job[0].gpu_seconds(), 6.0);
  EXPECT_EQ(of_job[1].gpus, 2);
  EXPECT_GT(of_job[1].started_unix_ms, of_job[0].last_unix_ms);
  EXPECT_GT(of_job[1].steps, 0);
  EXPECT_GT(of_job[1].tokens, 0);
  // This run wrote its own record: a restart now would find it.
  absl::StatusOr<runtime::CompletionRecord> record =
      runtime::ReadCompletionRecord(JobCheckpointDir(Options(), job, spec));
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->job_id, job.id);
}

}  // namespace
}  // namespace mobius::jobs
