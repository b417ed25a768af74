// The job store's operations on a real SQLite file: jobs, idempotent creation, transitions, run
// info, step reports, logs, quotas, audit, and reopening.
#include "server/jobs/store/job_store.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/server/jobs/store/store_test_util.h"

namespace mobius::jobs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::NewJob;
using testing::TempDir;

class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = JobStore::Open(dir_.File("jobs.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  JobRecord Create(uint32_t uid, const std::string& submission_id) {
    auto created = store_->CreateJob(NewJob(uid, submission_id));
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? created->job : JobRecord();
  }

  TempDir dir_;
  std::unique_ptr<JobStore> store_;
};

TEST_F(JobStoreTest, CreateAssignsIdsAndDefaults) {
  JobRecord input = NewJob(1000, "sub-a");
  input.state = JobState::kFailed;  // ignored: new jobs are QUEUED
  input.restarts = 7;               // ignored
  auto created = store_->CreateJob(input);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE(created->existed);
  const JobRecord& job = created->job;
  EXPECT_EQ(job.id, "j-000001");
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_EQ(job.restarts, 0);
  EXPECT_EQ(job.uid, 1000u);
  EXPECT_EQ(job.user, "user1000");
  EXPECT_EQ(job.submission_id, "sub-a");
  EXPECT_EQ(job.name, "job-sub-a");
  EXPECT_EQ(job.priority, 5);
  EXPECT_EQ(job.spec_json, input.spec_json);
  EXPECT_EQ(job.state_reason, "waiting for GPUs");
  EXPECT_EQ(job.created_unix_ms, 1700000000000);
  EXPECT_EQ(job.total_steps, 100);
  EXPECT_EQ(job.started_unix_ms, 0);
  EXPECT_TRUE(job.gpus.empty());
  EXPECT_FALSE(job.cancel_requested);

  auto got = store_->GetJob("j-000001");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, job);
  EXPECT_EQ(Create(1000, "sub-b").id, "j-000002");
  EXPECT_EQ(Create(1000, "").id, "j-000003");
}

TEST_F(JobStoreTest, GetJobErrors) {
  Create(1, "x");
  EXPECT_EQ(store_->GetJob("j-000002").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(store_->GetJob("j-000002").status().message(), HasSubstr("j-000002"));
  EXPECT_EQ(store_->GetJob("bogus").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(JobStoreTest, CreateValidatesFields) {
  JobRecord job = NewJob(1, "s");
  job.spec_json.clear();
  EXPECT_EQ(store_->CreateJob(job).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store_->CreateJob(job).status().message(), HasSubstr("spec_json"));
  job = NewJob(1, std::string(300, 's'));
  EXPECT_THAT(store_->CreateJob(job).status().message(), HasSubstr("submission_id"));
  job = NewJob(1, "s");
  job.total_steps = -1;
  EXPECT_THAT(store_->CreateJob(job).status().message(), HasSubstr("total_steps"));
}

TEST_F(JobStoreTest, IdempotentOnUidAndSubmissionId) {
  const JobRecord first = Create(1000, "sub-1");
  auto again = store_->CreateJob(NewJob(1000, "sub-1"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->existed);
  EXPECT_EQ(again->job, first);

  auto conflict = store_->CreateJob(NewJob(1000, "sub-1", R"({"model":"llama"})"));
  EXPECT_EQ(conflict.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(conflict.status().message(), HasSubstr(first.id));
  EXPECT_THAT(conflict.status().message(), HasSubstr("sub-1"));

  // Another user may use the same submission id; an empty one never deduplicates.
  auto other_user = store_->CreateJob(NewJob(1001, "sub-1"));
  ASSERT_TRUE(other_user.ok());
  EXPECT_FALSE(other_user->existed);
  EXPECT_NE(other_user->job.id, first.id);
  EXPECT_NE(Create(1000, "").id, Create(1000, "").id);

  // A retry after the job moved on still finds it.
  ASSERT_TRUE(store_->Transition(first.id, JobState::kRunning, "", 1).ok());
  auto retry = store_->CreateJob(NewJob(1000, "sub-1"));
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(retry->existed);
  EXPECT_EQ(retry->job.state, JobState::kRunning);
}

TEST_F(JobStoreTest, TransitionsFollowTheStateMachine) {
  const std::string id = Create(1, "t").id;
  auto t = store_->Transition(id, JobState::kRunning, "started on GPUs 0,1", 1000);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->state, JobState::kRunning);
  EXPECT_EQ(t->state_reason, "started on GPUs 0,1");
  EXPECT_EQ(t->started_unix_ms, 1000);
  EXPECT_EQ(t->finished_unix_ms, 0);

  ASSERT_TRUE(store_->Transition(id, JobState::kQueued, "daemon restart", 2000).ok());
  ASSERT_TRUE(store_->Transition(id, JobState::kRunning, "resumed", 3000).ok());
  t = store_->Transition(id, JobState::kSucceeded, "done", 4000);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->started_unix_ms, 3000);
  EXPECT_EQ(t->finished_unix_ms, 4000);
  EXPECT_EQ(*store_->GetJob(id), *t);

  auto transitions = store_->Transitions(id);
  ASSERT_TRUE(transitions.ok()) << transitions.status();
  ASSERT_EQ(transitions->size(), 4u);
  const auto& tr = *transitions;
  EXPECT_EQ(tr[0].from, JobState::kQueued);
  EXPECT_EQ(tr[0].to, JobState::kRunning);
  EXPECT_EQ(tr[0].reason, "started on GPUs 0,1");
  EXPECT_EQ(tr[0].unix_ms, 1000);
  EXPECT_EQ(tr[1].to, JobState::kQueued);
  EXPECT_EQ(tr[1].reason, "daemon restart");
  EXPECT_EQ(tr[3].from, JobState::kRunning);
  EXPECT_EQ(tr[3].to, JobState::kSucceeded);
  EXPECT_EQ(tr[3].job_id, id);
  EXPECT_LT(tr[2].seq, tr[3].seq);
}

TEST_F(JobStoreTest, IllegalTransitionsAreRejectedAndChangeNothing) {
  const std::string queued = Create(1, "q").id;
  EXPECT_EQ(store_->Transition(queued, JobState::kSucceeded, "", 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Transition(queued, JobState::kQueued, "", 1).status().code(),
            absl::StatusCode::kFailedPrecondition);

  for (JobState terminal : {JobState::kSucceeded, JobState::kFailed, JobState::kCancelled}) {
    const std::string id = Create(1, "term-" + std::string(JobStateName(terminal))).id;
    ASSERT_TRUE(store_->Transition(id, JobState::kRunning, "", 1).ok());
    ASSERT_TRUE(store_->Transition(id, terminal, "end", 2).ok());
    const JobRecord before = *store_->GetJob(id);
    for (JobState to : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded,
                        JobState::kFailed, JobState::kCancelled}) {
      auto t = store_->Transition(id, to, "again", 3);
      EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_THAT(t.status().message(), HasSubstr(id));
    }
    EXPECT_EQ(*store_->GetJob(id), before);
    EXPECT_EQ(store_->Transitions(id)->size(), 2u);
  }
  // Queued jobs can fail or be cancelled directly.
  EXPECT_TRUE(store_->Transition(queued, JobState::kCancelled, "by user", 5).ok());
  EXPECT_EQ(store_->Transition("j-000999", JobState::kRunning, "", 1).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Transitions("j-000999").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobStoreTest, RunInfoCheckpointRestartsCancel) {
  const std::string id = Create(1, "r").id;
  ASSERT_TRUE(store_->UpdateRunInfo(id, {0, 1, 4}, R"({"stages":3})").ok());
  ASSERT_TRUE(store_->SetCheckpoint(id, "/ckpt/checkpoint-00000040", 40).ok());
  EXPECT_EQ(*store_->IncrementRestarts(id), 1);
  EXPECT_EQ(*store_->IncrementRestarts(id), 2);
  ASSERT_TRUE(store_->SetCancelRequested(id).ok());
  JobRecord job = *store_->GetJob(id);
  EXPECT_EQ(job.gpus, (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(job.plan_json, R"({"stages":3})");
  EXPECT_EQ(job.checkpoint, "/ckpt/checkpoint-00000040");
  EXPECT_EQ(job.checkpoint_step, 40);
  EXPECT_EQ(job.steps_done, 40);
  EXPECT_EQ(job.restarts, 2);
  EXPECT_TRUE(job.cancel_requested);

  EXPECT_THAT(store_->UpdateRunInfo(id, {0, -1}, "").message(), HasSubstr("gpus[1]"));
  EXPECT_EQ(store_->SetCheckpoint(id, "", 1).code(), absl::StatusCode::kInvalidArgument);
  const std::string missing = "j-000777";
  EXPECT_EQ(store_->UpdateRunInfo(missing, {}, "").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->SetCheckpoint(missing, "/x", 1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->IncrementRestarts(missing).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->SetCancelRequested(missing).code(), absl::StatusCode::kNotFound);
}

StepReportRow Report(int64_t step, double loss) {
  StepReportRow r;
  r.step = step;
  r.total_steps = 100;
  r.loss = loss;
  r.lr = 3e-4;
  r.grad_norm = 1.25;
  r.tokens = 4096;
  r.tokens_per_second = 12345.5;
  r.step_seconds = 0.33;
  r.compute_seconds = 0.25;
  r.h2d_bytes = int64_t{5} << 32;
  r.d2h_bytes = 123456789;
  r.stall_seconds = 0.01;
  r.optimizer_seconds = 0.05;
  r.unix_ms = 1700000000000 + step;
  if (step % 10 == 0) r.eval_loss = loss + 0.25;  // an eval step
  return r;
}

TEST_F(JobStoreTest, SetTotalSteps) {
  const std::string id = Create(1, "t").id;
  ASSERT_TRUE(store_->SetTotalSteps(id, 122).ok());
  EXPECT_EQ(store_->GetJob(id)->total_steps, 122);
  EXPECT_EQ(store_->SetTotalSteps(id, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->SetTotalSteps("j-000404", 1).code(), absl::StatusCode::kNotFound);
}

TEST_F(JobStoreTest, StepReports) {
  const std::string id = Create(1, "s").id;
  for (int step = 1; step <= 30; ++step) {
    ASSERT_TRUE(store_->AppendStepReport(id, Report(step, 10.0 / step)).ok());
  }
  EXPECT_EQ(store_->GetJob(id)->steps_done, 30);
  auto reports = store_->StepReports(id, 0, 1000);
  ASSERT_TRUE(reports.ok()) << reports.status();
  ASSERT_EQ(reports->size(), 30u);
  EXPECT_EQ((*reports)[6], Report(7, 10.0 / 7));  // every field, exactly
  EXPECT_EQ((*reports)[9], Report(10, 1.0));       // with an eval loss
  EXPECT_FALSE((*reports)[6].eval_loss.has_value());

  auto tail = store_->StepReports(id, 25, 3);
  ASSERT_EQ(tail->size(), 3u);
  EXPECT_EQ((*tail)[0].step, 26);
  EXPECT_EQ((*tail)[2].step, 28);

  // A resume from step 20 reports 21.. again: the newer report wins, progress falls back.
  ASSERT_TRUE(store_->AppendStepReport(id, Report(21, 0.5)).ok());
  EXPECT_EQ(store_->GetJob(id)->steps_done, 21);
  EXPECT_EQ(store_->StepReports(id, 20, 1)->at(0).loss, 0.5);
  EXPECT_EQ(store_->StepReports(id, 0, 1000)->size(), 30u);

  EXPECT_EQ(store_->AppendStepReport("j-000404", Report(1, 1)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->StepReports("j-000404", 0, 10).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->StepReports(id, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->StepReports(id, 0, kMaxReadLimit + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(JobStoreTest, LatestStepReport) {
  const std::string id = Create(1, "latest").id;
  EXPECT_FALSE(store_->LatestStepReport(id, 100)->has_value());  // no reports yet
  for (int step = 1; step <= 25; ++step) {
    ASSERT_TRUE(store_->AppendStepReport(id, Report(step, 10.0 / step)).ok());
  }
  EXPECT_EQ(store_->LatestStepReport(id, 25)->value(), Report(25, 10.0 / 25));
  EXPECT_EQ(store_->LatestStepReport(id, 25, /*eval_only=*/true)->value(), Report(20, 0.5));
  // After a resume from step 12 only steps <= steps_done count; 13..25 are stale.
  ASSERT_TRUE(store_->AppendStepReport(id, Report(13, 0.75)).ok());
  EXPECT_EQ(store_->LatestStepReport(id, 13)->value().loss, 0.75);
  EXPECT_EQ(store_->LatestStepReport(id, 13, /*eval_only=*/true)->value().step, 10);
  EXPECT_FALSE(store_->LatestStepReport(id, 9, /*eval_only=*/true)->has_value());
  EXPECT_EQ(store_->LatestStepReport("j-000404", 1).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobStoreTest, LogsAreNumberedPerJobAndKeptExactly) {
  const std::string a = Create(1, "a").id;
  const std::string b = Create(1, "b").id;
  EXPECT_EQ(*store_->AppendLogs(a, {}), 0);
  std::vector<LogLine> batch;
  for (int i = 0; i < 250; ++i) {
    batch.push_back(LogLine{0, 1000 + i, "worker-0", "line " + std::to_string(i)});
  }
  EXPECT_EQ(*store_->AppendLogs(a, batch), 250);
  EXPECT_EQ(*store_->AppendLogs(b, {LogLine{0, 5, "daemon", "b first"}}), 1);
  const std::string odd =
      std::string("tab\there, NUL \0 inside, ", 25) + "UTF-8 \xc3\xa9\xe2\x82\xac";
  EXPECT_EQ(*store_->AppendLogs(a, {LogLine{0, 2000, "worker-1", odd}, LogLine{0, 2001, "", ""}}),
            252);
  EXPECT_EQ(*store_->AppendLogs(a, {}), 252);

  auto all = store_->ReadLogs(a, 1, kMaxReadLimit);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 252u);
  for (int i = 0; i < 252; ++i) EXPECT_EQ((*all)[i].seq, i + 1);
  EXPECT_EQ((*all)[0], (LogLine{1, 1000, "worker-0", "line 0"}));
  EXPECT_EQ((*all)[250], (LogLine{251, 2000, "worker-1", odd}));
  EXPECT_EQ((*all)[251], (LogLine{252, 2001, "", ""}));

  auto page = store_->ReadLogs(a, 100, 10);
  ASSERT_EQ(page->size(), 10u);
  EXPECT_EQ(page->front().seq, 100);
  EXPECT_EQ(page->back().text, "line 108");
  EXPECT_TRUE(store_->ReadLogs(a, 253, 10)->empty());
  EXPECT_THAT(*store_->ReadLogs(b, 0, 10), ElementsAre(LogLine{1, 5, "daemon", "b first"}));
  EXPECT_EQ(store_->AppendLogs("j-000050", batch).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ReadLogs("j-000050", 1, 1).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobStoreTest, Quotas) {
  EXPECT_EQ(store_->GetQuota(1000).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store_->SetQuota({1000, 4, 2}).ok());
  ASSERT_TRUE(store_->SetQuota({7, 8, 1}).ok());
  EXPECT_EQ(*store_->GetQuota(1000), (Quota{1000, 4, 2}));
  ASSERT_TRUE(store_->SetQuota({1000, 2, 0}).ok());  // replaces
  EXPECT_EQ(*store_->GetQuota(1000), (Quota{1000, 2, 0}));
  EXPECT_THAT(*store_->ListQuotas(), ElementsAre(Quota{7, 8, 1}, Quota{1000, 2, 0}));
  EXPECT_THAT(store_->SetQuota({5, -1, 1}).message(), HasSubstr("max_gpus"));
  EXPECT_THAT(store_->SetQuota({5, 1, -1}).message(), HasSubstr("max_running_jobs"));
  ASSERT_TRUE(store_->DeleteQuota(7).ok());
  EXPECT_EQ(store_->DeleteQuota(7).code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(*store_->ListQuotas(), ElementsAre(Quota{1000, 2, 0}));
  ASSERT_TRUE(store_->SetQuota({4294967295u, 1, 1}).ok());  // uid range is full uint32
  EXPECT_EQ(store_->GetQuota(4294967295u)->uid, 4294967295u);
  // Queued-job and host-memory limits (migration 5).
  const Quota full{.uid = 42, .max_gpus = 2, .max_running_jobs = 1, .max_queued_jobs = 3,
                   .max_host_bytes = int64_t{64} << 30};
  ASSERT_TRUE(store_->SetQuota(full).ok());
  EXPECT_EQ(*store_->GetQuota(42), full);
  EXPECT_THAT(store_->SetQuota({.uid = 5, .max_queued_jobs = -1}).message(),
              HasSubstr("max_queued_jobs"));
  EXPECT_THAT(store_->SetQuota({.uid = 5, .max_host_bytes = -1}).message(),
              HasSubstr("max_host_bytes"));
}

TEST_F(JobStoreTest, MaxQueuedJobsIsCountedWhenAJobIsCreated) {
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(store_->CreateJob(NewJob(1000, "q" + std::to_string(i)), 2).ok());
  }
  absl::StatusOr<JobStore::CreateResult> third = store_->CreateJob(NewJob(1000, "q2"), 2);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("max_queued_jobs=2: 2 jobs of yours are queued"));
  // The same submission again is not a new job: it returns the existing one.
  absl::StatusOr<JobStore::CreateResult> again = store_->CreateJob(NewJob(1000, "q1"), 2);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->existed);
  // Another user has a queue of their own; a started job leaves the count.
  EXPECT_TRUE(store_->CreateJob(NewJob(2000, "other"), 2).ok());
  ASSERT_TRUE(store_->Transition("j-000001", JobState::kRunning, "started", 1).ok());
  EXPECT_TRUE(store_->CreateJob(NewJob(1000, "q2"), 2).ok());
  ListJobsFilter mine;
  mine.uid = 1000;
  EXPECT_EQ(store_->ListJobs(mine)->jobs.size(), 3u);  // the refused one left nothing
}

TEST_F(JobStoreTest, AuditIsNewestFirst) {
  for (int i = 0; i < 5; ++i) {
    AuditEntry e{0,
                 100 + i,
                 1000u + i,
                 "JobService.CancelJob",
                 "j-00000" + std::to_string(i),
                 "by owner",
                 i % 2 ? absl::StatusCode::kPermissionDenied : absl::StatusCode::kOk};
    EXPECT_EQ(*store_->AppendAudit(e), i + 1);
  }
  auto entries = store_->ListAudit(3);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0], (AuditEntry{5, 104, 1004, "JobService.CancelJob", "j-000004", "by owner",
                                       absl::StatusCode::kOk}));
  EXPECT_EQ((*entries)[1].result, absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*entries)[2].seq, 3);
  EXPECT_EQ(store_->ListAudit(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(JobStoreTest, JobsInStatesForRecovery) {
  const std::string q = Create(1, "q").id;
  const std::string r = Create(1, "r").id;
  const std::string d = Create(1, "d").id;
  ASSERT_TRUE(store_->Transition(r, JobState::kRunning, "", 1).ok());
  ASSERT_TRUE(store_->Transition(d, JobState::kCancelled, "", 1).ok());
  auto active = store_->JobsInStates({JobState::kQueued, JobState::kRunning});
  ASSERT_TRUE(active.ok()) << active.status();
  ASSERT_EQ(active->size(), 2u);
  EXPECT_EQ((*active)[0].id, q);
  EXPECT_EQ((*active)[1].id, r);
  EXPECT_TRUE(store_->JobsInStates({})->empty());
  EXPECT_EQ(store_->JobsInStates(JobStateSet::All())->size(), 3u);
}

TEST_F(JobStoreTest, ReopenKeepsEverythingAndNeverReusesIds) {
  const std::string id = Create(1000, "keep").id;
  ASSERT_TRUE(store_->Transition(id, JobState::kRunning, "go", 10).ok());
  ASSERT_TRUE(store_->UpdateRunInfo(id, {2, 3}, "{}").ok());
  ASSERT_TRUE(store_->AppendStepReport(id, Report(1, 2.5)).ok());
  ASSERT_TRUE(store_->AppendLogs(id, {LogLine{0, 1, "w", "hello"}}).ok());
  ASSERT_TRUE(store_->SetQuota({1000, 3, 1}).ok());
  ASSERT_TRUE(store_->AppendAudit({0, 1, 1000, "JobService.SubmitJob", id, "", {}}).ok());
  const JobRecord before = *store_->GetJob(id);
  store_.reset();

  auto reopened = JobStore::Open(dir_.File("jobs.db"));
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  store_ = *std::move(reopened);
  EXPECT_EQ(*store_->GetJob(id), before);
  EXPECT_EQ(store_->Transitions(id)->size(), 1u);
  EXPECT_EQ(store_->StepReports(id, 0, 10)->at(0), Report(1, 2.5));
  EXPECT_EQ(store_->ReadLogs(id, 1, 10)->at(0).text, "hello");
  EXPECT_EQ(*store_->GetQuota(1000), (Quota{1000, 3, 1}));
  EXPECT_EQ(store_->ListAudit(10)->size(), 1u);
  EXPECT_TRUE(store_->CreateJob(NewJob(1000, "keep"))->existed);
  EXPECT_EQ(Create(1000, "next").id, "j-000002");
}

TEST_F(JobStoreTest, TwoConnectionsSeeEachOthersCommits) {
  auto second = JobStore::Open(dir_.File("jobs.db"));
  ASSERT_TRUE(second.ok()) << second.status();
  const std::string id = Create(1, "shared").id;
  EXPECT_EQ((*second)->GetJob(id)->submission_id, "shared");
  ASSERT_TRUE((*second)->Transition(id, JobState::kRunning, "", 1).ok());
  EXPECT_EQ(store_->GetJob(id)->state, JobState::kRunning);
  EXPECT_TRUE((*second)->CreateJob(NewJob(1, "shared"))->existed);
}

}  // namespace
}  // namespace mobius::jobs
