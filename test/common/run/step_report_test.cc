// The worker's step report line (common/run/step_report.h): every field survives the line, the
// launcher's aggregate takes maxima of times and sums of counts, and bad lines are refused.
#include "common/run/step_report.h"

#include <gtest/gtest.h>

namespace mobius::runtime {
namespace {

WorkerStepReport Sample(int rank) {
  WorkerStepReport r;
  r.rank = rank;
  r.step = 7;
  r.total_steps = 20;
  r.lr = 3e-4;
  r.grad_norm = 1.5;
  r.tokens = 4096;
  r.step_seconds = 1.25 + rank;
  r.compute_seconds = 0.5 + rank;
  r.stall_seconds = 0.25 * rank;
  r.optimizer_seconds = 0.125;
  r.h2d_bytes = 1000 + rank;
  r.d2h_bytes = 2000;
  r.peer_bytes = 30;
  r.internode_bytes = 40;
  r.passes = 3;
  r.uploads_on_demand = rank;
  return r;
}

TEST(StepReportTest, LineRoundTripsEveryField) {
  WorkerStepReport r = Sample(2);
  r.loss = 3.5f;
  r.eval_loss = 3.75f;
  r.loss_scale = 1024;
  r.skipped = true;
  r.checkpoint = "/ckpt/step-7";
  r.checkpoint_step = 7;
  const std::string line = WorkerReportToLine(r);
  ASSERT_EQ(line.rfind(kReportPrefix, 0), 0u) << line;
  absl::StatusOr<WorkerStepReport> back = ParseWorkerReportLine(line);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rank, 2);
  EXPECT_EQ(back->step, 7);
  EXPECT_EQ(back->total_steps, 20);
  EXPECT_DOUBLE_EQ(back->lr, 3e-4);
  EXPECT_DOUBLE_EQ(back->grad_norm, 1.5);
  EXPECT_EQ(back->loss_scale, 1024);
  EXPECT_TRUE(back->skipped);
  EXPECT_EQ(back->tokens, 4096);
  EXPECT_DOUBLE_EQ(back->step_seconds, 3.25);
  EXPECT_DOUBLE_EQ(back->compute_seconds, 2.5);
  EXPECT_DOUBLE_EQ(back->stall_seconds, 0.5);
  EXPECT_DOUBLE_EQ(back->optimizer_seconds, 0.125);
  EXPECT_EQ(back->h2d_bytes, 1002u);
  EXPECT_EQ(back->d2h_bytes, 2000u);
  EXPECT_EQ(back->peer_bytes, 30u);
  EXPECT_EQ(back->internode_bytes, 40u);
  EXPECT_EQ(back->passes, 3);
  EXPECT_EQ(back->uploads_on_demand, 2);
  ASSERT_TRUE(back->loss.has_value());
  EXPECT_EQ(*back->loss, 3.5f);
  ASSERT_TRUE(back->eval_loss.has_value());
  EXPECT_EQ(*back->eval_loss, 3.75f);
  EXPECT_EQ(back->checkpoint, "/ckpt/step-7");
  EXPECT_EQ(back->checkpoint_step, 7);
}

TEST(StepReportTest, AnOlderWorkersLineWithoutNewFieldsParses) {
  absl::StatusOr<WorkerStepReport> r =
      ParseWorkerReportLine(std::string(kReportPrefix) + R"({"rank":1,"step":3})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->uploads_on_demand, 0);
  EXPECT_FALSE(r->loss.has_value());
}

TEST(StepReportTest, BadLinesAreRefused) {
  EXPECT_FALSE(ParseWorkerReportLine("step 3").ok());
  EXPECT_FALSE(ParseWorkerReportLine(std::string(kReportPrefix) + "{").ok());
  EXPECT_FALSE(ParseWorkerReportLine(std::string(kReportPrefix) + "[1,2]").ok());
  EXPECT_FALSE(ParseWorkerReportLine(std::string(kReportPrefix) + R"({"step":3})").ok());
  EXPECT_FALSE(ParseWorkerReportLine(std::string(kReportPrefix) + R"({"rank":"x","step":3})").ok());
}

TEST(StepReportTest, AggregateTakesMaximaOfTimesAndSumsOfCounts) {
  std::vector<WorkerStepReport> ranks = {Sample(1), Sample(0), Sample(3)};
  ranks[2].loss = 2.5f;
  const StepReport a = AggregateStep(ranks, 2.0, /*emulated=*/true);
  EXPECT_EQ(a.step, 7);
  EXPECT_DOUBLE_EQ(a.step_seconds, 2.0);
  EXPECT_DOUBLE_EQ(a.tokens_per_second, 2048);
  EXPECT_DOUBLE_EQ(a.compute_seconds, 3.5);
  EXPECT_DOUBLE_EQ(a.stall_seconds, 0.75);
  EXPECT_EQ(a.h2d_bytes, 1001u + 1000u + 1003u);
  EXPECT_EQ(a.uploads_on_demand, 4);
  EXPECT_EQ(a.loss, 2.5f);
  ASSERT_EQ(a.ranks.size(), 3u);
  EXPECT_EQ(a.ranks[0].rank, 0);
  EXPECT_EQ(a.ranks[2].rank, 3);
}

}  // namespace
}  // namespace mobius::runtime
