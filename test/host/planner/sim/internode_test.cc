// Several nodes in the simulator (sim/internode.h): the ring formula, and hand-computed timelines
// of the per-stage all-reduce between the gradient offload and the optimizer.
#include "host/planner/sim/internode.h"

#include <limits>

#include "gtest/gtest.h"
#include "test/host/planner/sim/sim_test_util.h"

namespace mobius::planner::sim {
namespace {

constexpr double kEps = 1e-9;

TEST(RingAllReduce, Formula) {
  const InterNodeLink link{1e9, 0};
  EXPECT_EQ(RingAllReduceSeconds(int64_t{1'000'000'000}, 1, link), 0);
  // 2 (N - 1) / N x B / rate: N = 2 -> 1 x, N = 4 -> 1.5 x, N = 8 -> 1.75 x.
  EXPECT_NEAR(RingAllReduceSeconds(int64_t{1'000'000'000}, 2, link), 1.0, kEps);
  EXPECT_NEAR(RingAllReduceSeconds(int64_t{1'000'000'000}, 4, link), 1.5, kEps);
  EXPECT_NEAR(RingAllReduceSeconds(int64_t{1'000'000'000}, 8, link), 1.75, kEps);
  // + 2 (N - 1) latencies.
  EXPECT_NEAR(RingAllReduceSeconds(int64_t{1'000'000'000}, 4, {1e9, 1e-3}), 1.5 + 6e-3, kEps);
  EXPECT_EQ(RingAllReduceSeconds(0, 4, {1e9, 1e-3}), 0);
  // An ideal link leaves only the latency.
  EXPECT_EQ(RingAllReduceSeconds(int64_t{1} << 40, 8,
                                 {std::numeric_limits<double>::infinity(), 0}),
            0);
  EXPECT_EQ(RingAllReduceSentBytes(int64_t{1'000'000'000}, 4), int64_t{1'500'000'000});
  EXPECT_EQ(RingAllReduceSentBytes(int64_t{1'000'000'000}, 1), 0);
  EXPECT_EQ(AllReduceBuckets(10, 4), (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(AllReduceBuckets(10, 0), (std::vector<int64_t>{10}));
  EXPECT_TRUE(AllReduceBuckets(0, 4).empty());
  InterNodeConfig c;
  c.nodes = 4;
  c.link = {1e9, 1e-3};
  c.bucket_bytes = 400'000'000;  // 3 buckets: 3 latency terms
  EXPECT_NEAR(StageAllReduceSeconds(int64_t{1'000'000'000}, c), 1.5 + 3 * 6e-3, kEps);
}

TEST(RingAllReduce, BadConfigNamesTheField) {
  InterNodeConfig c;
  EXPECT_TRUE(ValidateInterNode(c).ok());
  c.nodes = 0;
  EXPECT_NE(ValidateInterNode(c).message().find("internode.nodes"), std::string::npos);
  c = {};
  c.link.bytes_per_s = 0;
  EXPECT_NE(ValidateInterNode(c).message().find("internode.bytes_per_s"), std::string::npos);
  c.link.bytes_per_s = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(ValidateInterNode(c).ok());
  c = {};
  c.link.latency_seconds = -1;
  EXPECT_NE(ValidateInterNode(c).message().find("internode.latency_seconds"), std::string::npos);
  c = {};
  c.bucket_bytes = -1;
  EXPECT_NE(ValidateInterNode(c).message().find("internode.bucket_bytes"), std::string::npos);
}

SimConfig Config(Schedule s, int nodes, double rate) {
  SimConfig c;
  c.schedule = s;
  c.num_microbatches = 1;
  c.chunk_bytes = 0;
  c.internode.nodes = nodes;
  c.internode.link = {rate, 0};
  return c;
}

// sim_test.cc's one-GPU two-stage timeline (link 1 GB/s): compute B1 [5,7], B0 [7,10]; grads s1
// D2H [7,8], adam s1 [8,8.5]; grads s0 [10,11], adam s0 [11,12]: step 12 on one node.
std::vector<SimStage> TwoStages() {
  SimStage s0{1, 3, 0, int64_t{2'000'000'000}, int64_t{1'000'000'000}, 0, 1.0};
  SimStage s1{2, 2, 0, int64_t{1'000'000'000}, int64_t{1'000'000'000}, 0, 0.5};
  return {s0, s1};
}

TEST(InterNodeSim, OneNodeIsTheSingleNodeGraph) {
  const SimMachine m = HandMachine(1, 1e9);
  SimConfig one = Config(Schedule::kMobius, 1, 1e9);
  absl::StatusOr<SimResult> a = Simulate(m, TwoStages(), one);
  SimConfig plain;
  plain.num_microbatches = 1;
  plain.chunk_bytes = 0;
  absl::StatusOr<SimResult> b = Simulate(m, TwoStages(), plain);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->graph.tasks.size(), b->graph.tasks.size());
  EXPECT_EQ(a->graph.streams.size(), b->graph.streams.size());
  EXPECT_EQ(a->step_seconds, b->step_seconds);
  EXPECT_EQ(a->allreduce_bytes, 0);
}

// Two nodes at 2 GB/s: each stage's 1 GB all-reduce takes 2 (1/2) 1 GB / 2 GB/s = 0.5 s.
//   AR s1 [8, 8.5] (under B0's compute [7, 10]), adam s1 [8.5, 9]
//   AR s0 [11, 11.5], adam s0 [11.5, 12.5]            -> step 12.5: only stage 0's AR is exposed
TEST(InterNodeSim, OnlyTheLastStagesAllReduceIsExposed) {
  const SimMachine m = HandMachine(1, 1e9);
  absl::StatusOr<SimResult> r = Simulate(m, TwoStages(), Config(Schedule::kMobius, 2, 2e9));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectInvariants(*r);
  EXPECT_NEAR(r->step_seconds, 12.5, kEps);
  EXPECT_NEAR(r->stages[1].allreduce_start, 8, kEps);
  EXPECT_NEAR(r->stages[1].allreduce_end, 8.5, kEps);
  EXPECT_NEAR(r->stages[1].optimizer_end, 9, kEps);
  EXPECT_NEAR(r->stages[0].allreduce_start, 11, kEps);
  EXPECT_NEAR(r->stages[0].allreduce_end, 11.5, kEps);
  EXPECT_NEAR(r->stages[0].optimizer_end, 12.5, kEps);
  EXPECT_EQ(r->allreduce_bytes, int64_t{2'000'000'000});
  EXPECT_NEAR(r->allreduce_seconds, 1.0, kEps);
  ExpectValidTrace(ChromeTraceJson(m, *r), r->graph.tasks.size());
}

// A slow link (0.25 GB/s: 4 s per stage) queues: AR s1 [8, 12], AR s0 waits for the link
// [12, 16], adam s0 [16, 17]: 5 s exposed, more than stage 0's own 4 s.
TEST(InterNodeSim, ASlowLinkQueuesTheAllReduces) {
  const SimMachine m = HandMachine(1, 1e9);
  absl::StatusOr<SimResult> r = Simulate(m, TwoStages(), Config(Schedule::kMobius, 2, 0.25e9));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectInvariants(*r);
  EXPECT_NEAR(r->stages[1].allreduce_end, 12, kEps);
  EXPECT_NEAR(r->stages[0].allreduce_start, 12, kEps);
  EXPECT_NEAR(r->step_seconds, 17, kEps);
}

// The optimizer after the whole backward (gradient clipping): adam s1 and s0 both wait for the
// last all-reduce [11, 11.5]; the CPU runs them one after the other: [11.5, 12], [12, 13].
TEST(InterNodeSim, OptimizerBarrierWaitsForEveryAllReduce) {
  const SimMachine m = HandMachine(1, 1e9);
  SimConfig c = Config(Schedule::kMobius, 2, 2e9);
  c.paper_barrier = true;
  absl::StatusOr<SimResult> r = Simulate(m, TwoStages(), c);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectInvariants(*r);
  EXPECT_NEAR(r->stages[0].allreduce_end, 11.5, kEps);
  EXPECT_NEAR(r->step_seconds, 13, kEps);
}

// Buckets of 0.5 GB follow the offload's 0.5 GB chunks (0.5 s each at 1 GB/s), 0.25 s each:
//   s1: chunks [7, 7.5] [7.5, 8] -> buckets [7.5, 7.75] [8, 8.25]; adam s1 [8.25, 8.75]
//   s0: chunks [10, 10.5] [10.5, 11] -> buckets [10.5, 10.75] [11, 11.25]; adam s0 [11.25, 12.25]
TEST(InterNodeSim, BucketsStartBeforeTheWholeOffload) {
  const SimMachine m = HandMachine(1, 1e9);
  SimConfig c = Config(Schedule::kMobius, 2, 2e9);
  c.chunk_bytes = 500'000'000;
  c.internode.bucket_bytes = 500'000'000;
  absl::StatusOr<SimResult> r = Simulate(m, TwoStages(), c);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectInvariants(*r);
  EXPECT_NEAR(r->stages[1].allreduce_start, 7.5, kEps);
  EXPECT_NEAR(r->stages[1].allreduce_end, 8.25, kEps);
  EXPECT_NEAR(r->stages[0].allreduce_start, 10.5, kEps);
  EXPECT_NEAR(r->step_seconds, 12.25, kEps);
}

TEST(InterNodeSim, RoundRobinAndStagesWithoutGradients) {
  const SimMachine m = HandMachine(2, 1e9);
  std::vector<SimStage> st = TwoStages();
  st[0].gradient_bytes = 0;  // e.g. LoRA's embedding: nothing to reduce
  absl::StatusOr<SimResult> r = Simulate(m, st, Config(Schedule::kRoundRobin, 4, 1e9));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectInvariants(*r);
  int allreduces = 0;
  for (const Task& t : r->graph.tasks) allreduces += t.kind == TaskKind::kAllReduce;
  EXPECT_EQ(allreduces, 1);
  EXPECT_EQ(r->allreduce_bytes, int64_t{1'000'000'000});
  EXPECT_NEAR(r->allreduce_seconds, 1.5, kEps);
  EXPECT_EQ(r->stages[0].allreduce_end, 0);
}

TEST(InterNodeSim, BadInput) {
  const SimMachine m = HandMachine(2, 1e9);
  for (Schedule s : {Schedule::kResident, Schedule::kZeroOffload}) {
    absl::StatusOr<SimResult> r = Simulate(m, TwoStages(), Config(s, 2, 1e9));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("internode.nodes"), std::string::npos);
  }
  absl::StatusOr<SimResult> r = Simulate(m, TwoStages(), Config(Schedule::kMobius, 2, -1));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("internode.bytes_per_s"), std::string::npos);
}

}  // namespace
}  // namespace mobius::planner::sim
