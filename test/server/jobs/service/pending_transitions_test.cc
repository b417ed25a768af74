// PendingTransitions (pending_transitions.h): the overlay of state changes the store has not taken
// over the store's record, in order; the head written first; a failure streak per job.
#include "server/jobs/service/pending_transitions.h"

#include "gtest/gtest.h"

namespace mobius::jobs {
namespace {

JobRecord Running(const std::string& id) {
  JobRecord r;
  r.id = id;
  r.state = JobState::kRunning;
  r.state_reason = "started on GPUs 0,1";
  r.started_unix_ms = 100;
  r.restarts = 1;
  return r;
}

TEST(PendingTransitionsTest, TheOverlayAppliesEveryPendingChangeInOrder) {
  PendingTransitions p;
  EXPECT_TRUE(p.empty());
  JobRecord untouched = Running("j-000001");
  p.Apply(untouched);
  EXPECT_EQ(untouched, Running("j-000001"));

  EXPECT_TRUE(p.Add("j-000002", {.from = JobState::kRunning,
                                 .to = JobState::kQueued,
                                 .reason = "restart 2 of 3",
                                 .unix_ms = 200,
                                 .count_restart = true}));
  EXPECT_FALSE(p.Add("j-000002", {.from = JobState::kQueued,
                                  .to = JobState::kCancelled,
                                  .reason = "cancelled by ann",
                                  .unix_ms = 300}));
  JobRecord r = Running("j-000002");
  p.Apply(r);
  EXPECT_EQ(r.state, JobState::kCancelled);
  EXPECT_EQ(r.state_reason, "cancelled by ann");
  EXPECT_EQ(r.started_unix_ms, 100);
  EXPECT_EQ(r.finished_unix_ms, 300);
  EXPECT_EQ(r.restarts, 2);  // the requeue counts one
  EXPECT_EQ(p.LastState("j-000002"), JobState::kCancelled);
  EXPECT_EQ(p.LastState("j-000001"), std::nullopt);

  // Its restart counted in the store: the overlay no longer adds it.
  p.RestartCounted("j-000002");
  r = Running("j-000002");
  r.restarts = 2;
  p.Apply(r);
  EXPECT_EQ(r.restarts, 2);
}

TEST(PendingTransitionsTest, HeadFirstAndAStreakPerJob) {
  PendingTransitions p;
  p.Add("j-000010", {.to = JobState::kSucceeded, .reason = "all 4 steps done"});
  p.Add("j-000003", {.to = JobState::kCancelled, .reason = "cancelled by ann"});
  EXPECT_EQ(p.Jobs(), (std::vector<std::string>{"j-000003", "j-000010"}));
  p.Failed("j-000010", absl::ResourceExhaustedError("database or disk is full"));
  p.Failed("j-000010", absl::ResourceExhaustedError("database or disk is full"));
  EXPECT_EQ(p.failures("j-000010"), 2);
  EXPECT_EQ(p.last_error("j-000010").code(), absl::StatusCode::kResourceExhausted);
  ASSERT_NE(p.Of("j-000010"), nullptr);
  EXPECT_EQ(p.Of("j-000010")->front().reason, "all 4 steps done");
  p.PopFront("j-000010");
  EXPECT_FALSE(p.Has("j-000010"));
  EXPECT_EQ(p.failures("j-000010"), 0);
  // A new streak begins with the next failure.
  EXPECT_TRUE(p.Add("j-000010", {.to = JobState::kFailed}));
}

TEST(PendingTransitionsTest, OnlyStorageErrorsAreRetried) {
  EXPECT_TRUE(StoreWriteMayRecover(absl::ResourceExhaustedError("disk full")));
  EXPECT_TRUE(StoreWriteMayRecover(absl::UnavailableError("locked")));
  EXPECT_TRUE(StoreWriteMayRecover(absl::PermissionDeniedError("read-only file system")));
  EXPECT_TRUE(StoreWriteMayRecover(absl::InternalError("I/O error")));
  EXPECT_FALSE(StoreWriteMayRecover(absl::FailedPreconditionError("illegal transition")));
  EXPECT_FALSE(StoreWriteMayRecover(absl::NotFoundError("no job")));
  EXPECT_FALSE(StoreWriteMayRecover(absl::InvalidArgumentError("bad id")));
  EXPECT_FALSE(StoreWriteMayRecover(absl::OkStatus()));
}

}  // namespace
}  // namespace mobius::jobs
