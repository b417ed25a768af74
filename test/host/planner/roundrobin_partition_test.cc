// Round-robin (RoundPipe) partitions: K_rr by hand, the exact forward/backward partitioner against
// brute force over all pairs of compositions, coverage and memory, and backward stages being the
// smaller ones when backward costs ~3x forward.
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/planner/partition.h"

namespace mobius::planner {
namespace {

using ::testing::ElementsAre;

// Every composition of [0, n) into ranges, as cut masks.
std::vector<std::vector<StageRange>> Compositions(int n) {
  std::vector<std::vector<StageRange>> all;
  for (uint32_t cuts = 0; cuts < (1u << (n - 1)); ++cuts) {
    std::vector<StageRange> r;
    int begin = 0;
    for (int u = 1; u <= n; ++u) {
      if (u < n && !(cuts & (1u << (u - 1)))) continue;
      r.push_back({begin, u});
      begin = u;
    }
    all.push_back(std::move(r));
  }
  return all;
}

// min J_rr over all (forward, backward) composition pairs that fit; +inf when none does.
double BruteForce(const PartitionProblem& p) {
  double best = std::numeric_limits<double>::infinity();
  const auto all = Compositions(p.num_units());
  for (const auto& f : all) {
    absl::StatusOr<Partition> fp = ScorePartition(PassProblem(p, Pass::kForward), f);
    if (!fp.ok()) continue;
    for (const auto& b : all) {
      absl::StatusOr<Partition> bp = ScorePartition(PassProblem(p, Pass::kBackward), b);
      if (!bp.ok()) continue;
      const double t = std::max(fp->max_slot_seconds, bp->max_slot_seconds);
      best = std::min(best, RoundRobinObjective(p, fp->num_stages() + bp->num_stages(), t));
    }
  }
  return best;
}

void ExpectCovers(const Partition& part, int units) {
  int next = 0;
  for (const StageRange& r : part.stages) {
    EXPECT_EQ(r.begin, next);
    EXPECT_GT(r.end, r.begin);
    next = r.end;
  }
  EXPECT_EQ(next, units);
}

TEST(RoundRobinSlots, ByHand) {
  // N = 2, M = 2: passes start at 0, 0.5, max(1, 0 + 1) = 1, 1.5; the stream ends at 2.5.
  EXPECT_DOUBLE_EQ(RoundRobinSlots(4, 2, 2), 2.5);
  // M = 1 (< N): each pass waits for the previous one's only microbatch: P slots.
  EXPECT_DOUBLE_EQ(RoundRobinSlots(3, 4, 1), 3);
  // M >= N: GPUs busy back to back after the fill: 6 passes on 2 GPUs, M = 4: starts 0, .25, 1,
  // 1.25, 2, 2.25 -> 3.25.
  EXPECT_DOUBLE_EQ(RoundRobinSlots(6, 2, 4), 3.25);
  EXPECT_DOUBLE_EQ(RoundRobinSlots(1, 8, 8), 1);
}

// Four units, forward 1 s, backward 2 s each, no transfers, N = 2, M = 1 (K_rr(P) = P). By hand:
// bound 2: forward 2 + 2 units, backward 1 unit each -> P = 6, J = 12; bound 4: forward 4 units,
// backward 2 + 2 -> P = 3, J = 12; bound 3: P = 6, J = 18; bound 8: P = 2, J = 16. The optimum is
// 12, first reached at bound 2 (backward stages half the forward stages' size).
TEST(ExactRoundRobinPartition, HandComputed) {
  PartitionProblem p;
  for (int u = 0; u < 4; ++u) p.units.push_back({1.0, 2.0, 0, 0, 0});
  p.num_gpus = 2;
  p.num_microbatches = 1;
  p.h2d_bytes_per_s = p.d2h_bytes_per_s = 1e12;
  p.gpu_memory_bytes = 1000;
  absl::StatusOr<RoundRobinPartition> rr = ExactRoundRobinPartition(p);
  ASSERT_TRUE(rr.ok()) << rr.status();
  EXPECT_DOUBLE_EQ(rr->objective_seconds, 12);
  EXPECT_DOUBLE_EQ(rr->max_pass_seconds, 2);
  EXPECT_THAT(rr->forward.stages, ElementsAre(StageRange{0, 2}, StageRange{2, 4}));
  EXPECT_THAT(rr->backward.stages,
              ElementsAre(StageRange{0, 1}, StageRange{1, 2}, StageRange{2, 3}, StageRange{3, 4}));
  EXPECT_DOUBLE_EQ(BruteForce(p), 12);
}

// Memory: forward slots hold no gradients, so a forward stage may hold more units than a backward
// one. Unit: W = 10, G = 20, A = 0; budget 60: forward 2 x 10u <= 60 -> u <= 3; backward
// 2 x 30u <= 60 -> u <= 1.
TEST(ExactRoundRobinPartition, PerPassMemory) {
  PartitionProblem p;
  for (int u = 0; u < 3; ++u) p.units.push_back({1.0, 1.0, 10, 20, 0});
  p.num_gpus = 1;
  p.num_microbatches = 1;
  p.h2d_bytes_per_s = p.d2h_bytes_per_s = 1e12;
  p.gpu_memory_bytes = 60;
  absl::StatusOr<RoundRobinPartition> rr = ExactRoundRobinPartition(p);
  ASSERT_TRUE(rr.ok()) << rr.status();
  for (const StageCost& c : rr->backward.costs) EXPECT_LE(c.memory_bytes, 60);
  for (const StageCost& c : rr->forward.costs) EXPECT_LE(c.memory_bytes, 60);
  EXPECT_EQ(rr->backward.num_stages(), 3);
  EXPECT_DOUBLE_EQ(rr->objective_seconds, BruteForce(p));
  // A unit that does not fit even the backward slot alone.
  p.gpu_memory_bytes = 50;
  EXPECT_EQ(ExactRoundRobinPartition(p).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ExactRoundRobinPartition, EqualsBruteForceOnRandomInstances) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> units(1, 7), gpus(1, 4), micro(1, 8);
  std::uniform_real_distribution<double> secs(0.0, 1.0), bw(50, 400);
  std::uniform_int_distribution<int64_t> bytes(0, 100), act(0, 30);
  int binding = 0;
  for (int trial = 0; trial < 150; ++trial) {
    PartitionProblem p;
    const int n = units(rng);
    for (int u = 0; u < n; ++u) {
      const double f = secs(rng);
      const int64_t w = bytes(rng);
      p.units.push_back({f, 3 * f, w, 2 * w, act(rng)});
    }
    p.num_gpus = gpus(rng);
    p.num_microbatches = micro(rng);
    p.h2d_bytes_per_s = bw(rng);
    p.d2h_bytes_per_s = bw(rng);
    p.boundary_bytes = act(rng);
    p.stage_overhead_seconds = secs(rng) * 0.2;
    p.optimizer_seconds = secs(rng);
    p.reserved_bytes = 50;
    p.gpu_memory_bytes = 50 + std::uniform_int_distribution<int64_t>(300, 2000)(rng);
    absl::StatusOr<RoundRobinPartition> rr = ExactRoundRobinPartition(p);
    const double brute = BruteForce(p);
    if (!rr.ok()) {
      EXPECT_EQ(brute, std::numeric_limits<double>::infinity()) << "trial " << trial;
      continue;
    }
    if (rr->num_passes() > 2) ++binding;
    EXPECT_NEAR(rr->objective_seconds, brute, 1e-9 * std::max(1.0, brute)) << "trial " << trial;
    ExpectCovers(rr->forward, n);
    ExpectCovers(rr->backward, n);
    for (const StageCost& c : rr->forward.costs) {
      EXPECT_LE(c.memory_bytes, p.stage_memory_budget_bytes());
    }
    for (const StageCost& c : rr->backward.costs) {
      EXPECT_LE(c.memory_bytes, p.stage_memory_budget_bytes());
    }
  }
  EXPECT_GT(binding, 20);
}

// Compute-bound units with backward = 3 x forward: the backward partition has more, smaller stages.
TEST(ExactRoundRobinPartition, BackwardStagesAreSmaller) {
  PartitionProblem p;
  for (int u = 0; u < 24; ++u) p.units.push_back({0.01, 0.03, 1000, 2000, 100});
  p.num_gpus = 4;
  p.num_microbatches = 8;
  p.h2d_bytes_per_s = p.d2h_bytes_per_s = 1e9;
  p.stage_overhead_seconds = 0.002;
  p.gpu_memory_bytes = int64_t{1} << 30;
  absl::StatusOr<RoundRobinPartition> rr = ExactRoundRobinPartition(p);
  ASSERT_TRUE(rr.ok()) << rr.status();
  EXPECT_GT(rr->backward.num_stages(), rr->forward.num_stages());
  // Balanced passes: the forward bottleneck is within one unit's backward time of the backward's.
  EXPECT_NEAR(rr->forward.max_slot_seconds, rr->backward.max_slot_seconds, 8 * 0.03 + 1e-12);
  // One shared partition for both passes is never better.
  absl::StatusOr<RoundRobinPartition> shared = SharedRoundRobinPartition(p, rr->forward.stages);
  ASSERT_TRUE(shared.ok());
  EXPECT_GE(shared->objective_seconds, rr->objective_seconds);
}

TEST(UniformRoundRobinPartition, EachPassFitsAndCovers) {
  PartitionProblem p;
  for (int u = 0; u < 10; ++u) p.units.push_back({1.0, 3.0, 10, 20, 0});
  p.num_gpus = 2;
  p.num_microbatches = 2;
  p.h2d_bytes_per_s = p.d2h_bytes_per_s = 1e12;
  p.gpu_memory_bytes = 130;  // forward: 2 x 10u <= 130 -> 6 units; backward: 2 x 30u -> 2 units
  absl::StatusOr<RoundRobinPartition> rr = UniformRoundRobinPartition(p);
  ASSERT_TRUE(rr.ok()) << rr.status();
  EXPECT_EQ(rr->forward.num_stages(), 2);   // smallest S >= N = 2 that fits: 5 + 5 units
  EXPECT_EQ(rr->backward.num_stages(), 5);  // 2 units each
  ExpectCovers(rr->forward, 10);
  ExpectCovers(rr->backward, 10);
}

}  // namespace
}  // namespace mobius::planner
