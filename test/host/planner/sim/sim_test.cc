// Hand-computed timelines of the simulator (engine, machine links, schedules) and its invariants.
#include <cmath>
#include <set>
#include <utility>

#include "gtest/gtest.h"
#include "host/planner/partition.h"
#include "test/host/planner/sim/sim_test_util.h"

namespace mobius::planner::sim {
namespace {

constexpr double kEps = 1e-9;

SimConfig Config(Schedule s, int m) {
  SimConfig c;
  c.schedule = s;
  c.num_microbatches = m;
  c.chunk_bytes = 0;
  return c;
}

// One GPU, link 1 GB/s, two stages. Passes F0 F1 B1 B0 through the GPU's two weight slots: F0
// loads slot a, F1 slot b; B1 and B0 find their weights still loaded (S <= 2N: no backward upload).
//   h2d:  F0 w [0,2]  F1 w [2,3]
//   comp: F0 [2,3]    F1 [3,5]    B1 [5,7]    B0 [7,10]
//   d2h:  grads s1 [7,8], grads s0 [10,11];  cpu: adam s1 [8,8.5], adam s0 [11,12]  -> step 12
// The step is what it was when the backward uploaded again (B1 w [3,4], B0 w [5,7], both hidden
// behind compute); the uploads halve (6 -> 3 GB). Serially the same work takes 3 (uploads) + 8
// (compute) + 2 (grads) + 1.5 (adam) = 14.5.
// Slots held: a from F0's upload to s0's gradients [0,11], b from F1's upload to s1's [2,8].
std::vector<SimStage> TwoStages() {
  SimStage s0{1, 3, 0, int64_t{2'000'000'000}, int64_t{1'000'000'000}, 0, 1.0};
  SimStage s1{2, 2, 0, int64_t{1'000'000'000}, int64_t{1'000'000'000}, 0, 0.5};
  return {s0, s1};
}

TEST(Simulator, OneGpuTwoStagesPrefetchOverlapsCompute) {
  const SimMachine m = HandMachine(1, 1e9);
  absl::StatusOr<SimResult> r = Simulate(m, TwoStages(), Config(Schedule::kMobius, 1));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectInvariants(*r);
  EXPECT_NEAR(r->step_seconds, 12, kEps);
  EXPECT_NEAR(r->compute_end_seconds, 10, kEps);
  const auto& st = r->stages;
  EXPECT_NEAR(st[0].forward_start, 2, kEps);
  EXPECT_NEAR(st[1].forward_end, 5, kEps);
  EXPECT_NEAR(st[1].backward_start, 5, kEps);
  EXPECT_NEAR(st[0].backward_start, 7, kEps);
  EXPECT_NEAR(st[1].optimizer_end, 8.5, kEps);
  EXPECT_NEAR(st[0].optimizer_end, 12, kEps);
  EXPECT_NEAR(r->gpus[0].busy_seconds, 8, kEps);
  EXPECT_NEAR(r->gpus[0].stall_prefetch_seconds, 2, kEps);  // only the first upload is exposed
  EXPECT_NEAR(r->bubble_fraction, 0.2, kEps);
  EXPECT_EQ(r->gpus[0].max_resident_stages, 2);
  ASSERT_EQ(r->residencies.size(), 2u);
  EXPECT_NEAR(r->residencies[0].begin, 0, kEps);
  EXPECT_NEAR(r->residencies[0].end, 11, kEps);
  EXPECT_NEAR(r->residencies[1].begin, 2, kEps);
  EXPECT_NEAR(r->residencies[1].end, 8, kEps);
  EXPECT_EQ(r->weight_upload_bytes, int64_t{3'000'000'000});
  EXPECT_EQ(r->d2h_bytes, int64_t{2'000'000'000});
  EXPECT_NEAR(r->links[0].busy_seconds, 3, kEps);  // gpu0.h2d: 2 + 1

  SimConfig barrier = Config(Schedule::kMobius, 1);
  barrier.paper_barrier = true;  // adam s1 [11,11.5], adam s0 [11.5,12.5]
  absl::StatusOr<SimResult> b = Simulate(m, TwoStages(), barrier);
  ASSERT_TRUE(b.ok());
  ExpectInvariants(*b);
  EXPECT_NEAR(b->step_seconds, 12.5, kEps);
}

TEST(Engine, FairSharingOfAnUplinkHalvesTheRate) {
  // Two GPUs under one 2 GB/s uplink, own links 2 GB/s. 1 GB and 3 GB start together: 1 GB/s
  // each until t=1, then the 3 GB copy has the uplink alone: 2 GB left at 2 GB/s -> t=2.
  const SimMachine m = HandMachine(2, 2e9, 2e9);
  TaskGraph g;
  const int h0 = g.AddStream({"h2d0", StreamKind::kH2D, 0, false, 1});
  const int h1 = g.AddStream({"h2d1", StreamKind::kH2D, 1, false, 1});
  Task a;
  a.stream = h0;
  a.bytes = 1'000'000'000;
  a.path = m.gpus[0].h2d_path;
  Task b = a;
  b.stream = h1;
  b.bytes = 3'000'000'000;
  b.path = m.gpus[1].h2d_path;
  g.Add(a);
  g.Add(b);
  absl::StatusOr<EngineResult> r = RunEngine(g, m.links, 1.0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->timings[0].end, 1.0, kEps);
  EXPECT_NEAR(r->timings[1].end, 2.0, kEps);
  EXPECT_EQ(r->links[0].bytes, int64_t{4'000'000'000});  // uplink.h2d
  EXPECT_NEAR(r->links[0].busy_seconds, 2.0, kEps);
}

TEST(Simulator, TwoGpusSharingAnUplinkExactTimes) {
  // N = 2, M = 1, W = 2 GB per stage, uplink 2 GB/s shared, own links 2 GB/s.
  //   h2d: F w s0 (gpu0) and F w s1 (gpu1) share the uplink: [0,2]; no backward upload (S <= 2N)
  //   comp gpu0: F s0 [2,3];  gpu1: F s1 [3,4], B s1 [4,5];  gpu0: B s0 [5,6]
  //   d2h: grads s1 (1 GB alone at 2 GB/s) [5,5.5]; grads s0 [6,6.5]  -> step 6.5
  const SimMachine m = HandMachine(2, 2e9, 2e9);
  SimStage s{1, 1, 0, int64_t{2'000'000'000}, int64_t{1'000'000'000}, 0, 0};
  absl::StatusOr<SimResult> r = Simulate(m, {s, s}, Config(Schedule::kMobius, 1));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectInvariants(*r);
  EXPECT_NEAR(r->stages[0].forward_start, 2, kEps);
  EXPECT_NEAR(r->stages[1].forward_start, 3, kEps);
  EXPECT_NEAR(r->stages[1].backward_start, 4, kEps);
  EXPECT_NEAR(r->stages[0].backward_end, 6, kEps);
  EXPECT_NEAR(r->step_seconds, 6.5, kEps);
  EXPECT_EQ(r->weight_upload_bytes, int64_t{4'000'000'000});
  // Without the shared uplink each upload alone takes 1 s: F s0 [1,2], F s1 [2,3], B s1 [3,4],
  // B s0 [4,5], grads s0 [5,5.5].
  absl::StatusOr<SimResult> own = Simulate(HandMachine(2, 2e9), {s, s}, Config(Schedule::kMobius, 1));
  ASSERT_TRUE(own.ok());
  EXPECT_NEAR(own->step_seconds, 5.5, kEps);
}

TEST(Engine, FullDuplexDegradation) {
  // One link of 1 GB/s per direction, factor 0.6: H2D 1.2 GB and D2H 0.6 GB together run at
  // 0.6 GB/s each; D2H ends at 1.0, then H2D has 0.6 GB left at 1 GB/s -> 1.6.
  for (double factor : {0.6, 1.0}) {
    const SimMachine m = HandMachine(1, 1e9, 0, factor);
    TaskGraph g;
    Task up;
    up.stream = g.AddStream({"h2d", StreamKind::kH2D, 0, false, 1});
    up.bytes = 1'200'000'000;
    up.path = m.gpus[0].h2d_path;
    Task down;
    down.stream = g.AddStream({"d2h", StreamKind::kD2H, 0, false, 1});
    down.bytes = 600'000'000;
    down.path = m.gpus[0].d2h_path;
    g.Add(up);
    g.Add(down);
    absl::StatusOr<EngineResult> r = RunEngine(g, m.links, m.duplex_factor);
    ASSERT_TRUE(r.ok());
    EXPECT_NEAR(r->timings[1].end, factor == 1.0 ? 0.6 : 1.0, kEps);
    EXPECT_NEAR(r->timings[0].end, factor == 1.0 ? 1.2 : 1.6, kEps);
  }
}

// Which passes upload weights: {stage, backward} of every weight upload task.
std::set<std::pair<int, bool>> Uploads(const SimResult& r) {
  std::set<std::pair<int, bool>> out;
  for (const Task& t : r.graph.tasks) {
    if (t.kind == TaskKind::kWeightUpload) out.insert({t.stage, t.backward});
  }
  return out;
}

// The runtime's two weight slots (worker/runtime/pipeline_passes.cc): a GPU's last two forward
// stages are still loaded when its backward starts, so the backward of stage s uploads nothing
// iff s + 2N >= S. Every forward uploads.
TEST(Simulator, MobiusBackwardRunsItsGpusLastTwoForwardStagesFromTheirSlots) {
  const int64_t w = 1'000'000'000;
  for (auto [n, s_count] :
       {std::pair{2, 6}, std::pair{3, 4}, std::pair{2, 3}, std::pair{1, 3}, std::pair{4, 13}}) {
    std::vector<SimStage> st(s_count, SimStage{1, 3, 0, w, w, 0, 0});
    absl::StatusOr<SimResult> r = Simulate(HandMachine(n, 1e9), st, Config(Schedule::kMobius, 2));
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectInvariants(*r);
    const std::set<std::pair<int, bool>> up = Uploads(*r);
    int backward_uploads = 0;
    for (int s = 0; s < s_count; ++s) {
      EXPECT_TRUE(up.count({s, false})) << "N=" << n << " S=" << s_count << " forward " << s;
      const bool expected = s + 2 * n < s_count;
      EXPECT_EQ(up.count({s, true}) == 1, expected)
          << "N=" << n << " S=" << s_count << " stage " << s;
      backward_uploads += expected;
    }
    EXPECT_EQ(r->weight_upload_bytes, (s_count + backward_uploads) * w);
    for (const GpuStats& g : r->gpus) EXPECT_LE(g.max_resident_stages, 2);
  }
  // Spelled out for S = 6 on N = 2 (GPU 0: stages 0 2 4, GPU 1: 1 3 5): backward of 5, 4, 3, 2
  // from the slots, of 1 and 0 uploaded. S = N + 1 = 4 on N = 3: GPU 0 holds stages 0 and 3, the
  // others one each; no backward uploads at all.
  std::vector<SimStage> six(6, SimStage{1, 3, 0, w, w, 0, 0});
  absl::StatusOr<SimResult> r = Simulate(HandMachine(2, 1e9), six, Config(Schedule::kMobius, 1));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Uploads(*r), (std::set<std::pair<int, bool>>{{0, false}, {1, false}, {2, false},
                                                          {3, false}, {4, false}, {5, false},
                                                          {0, true}, {1, true}}));
  std::vector<SimStage> four(4, SimStage{1, 3, 0, w, w, 0, 0});
  r = Simulate(HandMachine(3, 1e9), four, Config(Schedule::kMobius, 1));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Uploads(*r), (std::set<std::pair<int, bool>>{{0, false}, {1, false}, {2, false},
                                                          {3, false}}));
}

// One GPU, three stages (1 GB weights and gradients, link 1 GB/s each way, forward 1 s, backward
// 2 s, M = 1). B2 and B1 run from the slots F2 and F1 loaded; B0 uploads into the slot used less
// recently, F2's, once B2's gradients are out (not into F1's, which B1 used last).
//   h2d:  F0 w [0,1]  F1 w [1,2]  F2 w [2,3] (into F0's slot, after F0 ends at 2)  B0 w [7,8]
//   comp: F0 [1,2]    F1 [2,3]    F2 [3,4]    B2 [4,6]    B1 [6,8]    B0 [8,10]
//   d2h:  grads s2 [6,7], grads s1 [8,9], grads s0 [10,11]  -> step 11
// (Evicting B1's slot instead would start B0's upload after grads s1, at 9: step 13.)
TEST(Simulator, MobiusBackwardUploadEvictsTheSlotUsedLessRecently) {
  std::vector<SimStage> st(3, SimStage{1, 2, 0, int64_t{1'000'000'000}, int64_t{1'000'000'000},
                                       0, 0});
  absl::StatusOr<SimResult> r = Simulate(HandMachine(1, 1e9), st, Config(Schedule::kMobius, 1));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectInvariants(*r);
  EXPECT_NEAR(r->stages[2].forward_start, 3, kEps);
  EXPECT_NEAR(r->stages[2].backward_start, 4, kEps);
  EXPECT_NEAR(r->stages[1].backward_start, 6, kEps);
  EXPECT_NEAR(r->stages[0].backward_start, 8, kEps);
  EXPECT_NEAR(r->step_seconds, 11, kEps);
  EXPECT_EQ(r->weight_upload_bytes, int64_t{4'000'000'000});
  EXPECT_EQ(r->gpus[0].max_resident_stages, 2);
  EXPECT_NEAR(r->gpus[0].stall_prefetch_seconds, 1, kEps);  // only F0's upload is exposed
}

// The cost model's two-slot rule agrees with the simulator where it changes the partition
// (partition_test.cc, TwoSlotReuseChangesTheChosenPartition): one GPU, five units of 1 s forward,
// 1 s backward, 2 bytes of weights and of gradients, H2D 1 B/s, D2H 2 B/s, at most 2 units a
// stage. The paper's model picks five singletons (J 20 vs 24), the reuse-aware one (1, 2, 2)
// (J 18 vs 20). Simulated (no optimizer, no activations):
//   singletons: h2d F0 [0,2] F1 [2,4] F2 [4,6] F3 [6,8] F4 [8,10]; comp F_s [2s+2, 2s+3];
//     B4 [11,12], B3 [12,13] from the slots; B2 uploads into F4's slot once grads s4 are out
//     (d2h [12,13]): h2d [13,15], comp [15,16]; B1: h2d [15,17], comp [17,18]; B0: h2d [17,19]
//     (B2's grads [16,17]), comp [19,20], grads [20,21]                                -> step 21
//   (1, 2, 2): h2d F0 [0,2] F1 [2,6] F2 [6,10]; comp F0 [2,3] F1 [6,8] F2 [10,12]; B2 [12,14],
//     B1 [14,16] from the slots; B0 uploads into B2's slot after its grads (d2h [14,16]):
//     h2d [16,18], comp [18,19], grads [19,20]                                         -> step 20
TEST(Simulator, AgreesWithTheCostModelsTwoSlotRule) {
  PartitionProblem p;
  for (int u = 0; u < 5; ++u) p.units.push_back({1, 1, 2, 2, 0});
  p.num_gpus = 1;
  p.h2d_bytes_per_s = 1;
  p.d2h_bytes_per_s = 2;
  p.gpu_memory_bytes = 16;
  SimMachine m = HandMachine(1, 1);
  m.links[1].bytes_per_s = 2;  // gpu0.d2h
  auto step = [&](const std::vector<StageRange>& ranges) {
    absl::StatusOr<Partition> part = ScorePartition(p, ranges);
    EXPECT_TRUE(part.ok()) << part.status();
    absl::StatusOr<SimResult> r =
        Simulate(m, MakeSimStages(p, *part), Config(Schedule::kMobius, 1));
    EXPECT_TRUE(r.ok()) << r.status();
    ExpectInvariants(*r);
    return r->step_seconds;
  };
  EXPECT_NEAR(step({{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}), 21, kEps);
  EXPECT_NEAR(step({{0, 1}, {1, 3}, {3, 5}}), 20, kEps);
}

// Round-robin keys the slots by unit range, like the runtime: with one partition for both passes a
// backward pass finds its weights loaded only where its forward ran on the same GPU with at most
// one other range in between. N = 3, S = 6: passes 0-5 forward, 6-11 backward of stages 5..0 on
// GPU j mod 3. GPU 1 runs F1 (pass 1), F4 (4), B4 (7), B1 (10): B4 and B1 from the slots. GPU 0:
// F0 F3 B5 B2, GPU 2: F2 F5 B3 B0: all uploaded. N = 2, S = 6 (even N): no backward from a slot.
TEST(Simulator, RoundRobinReusesASlotOnlyForTheSameUnitsOnTheSameGpu) {
  std::vector<SimStage> six(6, SimStage{1, 3, 0, int64_t{1'000'000'000}, 0, 0, 0});
  absl::StatusOr<SimResult> odd =
      Simulate(HandMachine(3, 1e9), six, Config(Schedule::kRoundRobin, 2));
  ASSERT_TRUE(odd.ok()) << odd.status();
  ExpectInvariants(*odd);
  const std::set<std::pair<int, bool>> up = Uploads(*odd);
  for (int s = 0; s < 6; ++s) {
    EXPECT_TRUE(up.count({s, false})) << s;
    EXPECT_EQ(up.count({s, true}) == 0, s == 4 || s == 1) << s;
  }
  EXPECT_EQ(odd->weight_upload_bytes, int64_t{10'000'000'000});
  for (const GpuStats& g : odd->gpus) EXPECT_LE(g.max_resident_stages, 2);
  absl::StatusOr<SimResult> even =
      Simulate(HandMachine(2, 1e9), six, Config(Schedule::kRoundRobin, 2));
  ASSERT_TRUE(even.ok());
  EXPECT_EQ(even->weight_upload_bytes, int64_t{12'000'000'000});
}

TEST(Simulator, BubbleMatchesTheFormula) {
  // Compute only: N GPUs, S = 2N stages, M >= N microbatches, forward t = 1, backward 3. Idle per
  // GPU is (N-1)(t+b), so bubble = N(N-1) / (M S + N(N-1)) and step = (S M / N + N - 1)(t + b).
  for (auto [n, m] : {std::pair{4, 8}, std::pair{2, 2}, std::pair{3, 5}}) {
    const int s_count = 2 * n;
    std::vector<SimStage> st(s_count, SimStage{1, 3, 0, 0, 0, 0, 0});
    absl::StatusOr<SimResult> r = Simulate(HandMachine(n, 1e9), st, Config(Schedule::kMobius, m));
    ASSERT_TRUE(r.ok()) << r.status();
    ExpectInvariants(*r);
    const double formula = double(n * (n - 1)) / (m * s_count + n * (n - 1));
    EXPECT_NEAR(r->bubble_fraction, formula, 1e-9) << n << " " << m;
    EXPECT_NEAR(r->step_seconds, (double(s_count) * m / n + n - 1) * 4, 1e-9);
  }
}

TEST(Simulator, ResidentMovesOnlyActivations) {
  SimStage s{1, 3, 0, int64_t{1} << 30, int64_t{1} << 30, 1'000'000, 0.1};
  const SimMachine m = HandMachine(2, 1e9);
  absl::StatusOr<SimResult> r = Simulate(m, {s, s}, Config(Schedule::kResident, 2));
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectInvariants(*r);
  EXPECT_EQ(r->weight_upload_bytes, 0);
  // Forward s0 -> s1 and backward s1 -> s0 for 2 microbatches, host-staged: 4 x 1 MB each way.
  EXPECT_EQ(r->h2d_bytes, 4'000'000);
  EXPECT_EQ(r->d2h_bytes, 4'000'000);
}

TEST(Simulator, MobiusNeverHoldsMoreThanTwoStagesAndTracesParse) {
  const SimMachine m = HandMachine(4, 12.6e9, 12.6e9, 0.6);
  std::vector<SimStage> st;
  for (int s = 0; s < 13; ++s) {
    st.push_back({0.01 * (1 + s % 3), 0.03, 0.001, int64_t{600} << 20, int64_t{600} << 20,
                  s == 0 ? 0 : int64_t{8} << 20, 0.05});
  }
  for (Schedule sched : {Schedule::kMobius, Schedule::kRoundRobin, Schedule::kResident,
                         Schedule::kZeroOffload}) {
    for (int mb : {1, 3, 8}) {
      SimConfig c;
      c.schedule = sched;
      c.num_microbatches = mb;
      absl::StatusOr<SimResult> r = Simulate(m, st, c);
      ASSERT_TRUE(r.ok()) << r.status();
      ExpectInvariants(*r);
      for (const GpuStats& g : r->gpus) EXPECT_LE(g.max_resident_stages, 2) << ScheduleName(sched);
      EXPECT_GT(r->step_seconds, 0);
      ExpectValidTrace(ChromeTraceJson(m, *r), r->graph.tasks.size());
    }
  }
}

// Round-robin with separate partitions: forward one stage F0 = units [0, 2) (2 s, 1 GB weights);
// backward B0 = [0, 1), B1 = [1, 2) (2 s each, 1 GB weights; B1's input 0.5 GB). Two GPUs with
// own 1 GB/s links, M = 1. Passes: F0 -> gpu0, B1 -> gpu1, B0 -> gpu0.
//   gpu0 h2d: F0 w [0,1], B0 w [1,2]; compute F0 [1,3]; d2h: checkpoint of unit 1 [3,3.5]
//   gpu1 h2d: B1 w [0,1], B1 checkpoint [3.5,4]; compute B1 [4,6]; d2h: B1's input grad [6,6.5]
//   gpu0 h2d: the gradient [6.5,7]; compute B0 [7,9]  -> step 9
TEST(Simulator, RoundRobinSeparateBackwardPartition) {
  const SimMachine m = HandMachine(2, 1e9);
  const std::vector<SimStage> forward = {{2, 0, 0, int64_t{1'000'000'000}, 0, 0, 0, 0, 2}};
  SimConfig c = Config(Schedule::kRoundRobin, 1);
  c.backward_stages = {{0, 2, 0, int64_t{1'000'000'000}, 0, 0, 0, 0, 1},
                       {0, 2, 0, int64_t{1'000'000'000}, 0, 500'000'000, 0, 1, 2}};
  // 3 passes on 2 GPUs rotate (the next step starts on gpu1): left alone, Simulate runs the
  // cycle of 2 steps + 1 (+ the drain) and reports their mean, here the same 9 s (the steps mirror
  // each other).
  absl::StatusOr<SimResult> cycle = Simulate(m, forward, c);
  ASSERT_TRUE(cycle.ok()) << cycle.status();
  ExpectInvariants(*cycle);
  EXPECT_EQ(cycle->steps, 4);
  EXPECT_EQ(cycle->reported_steps, 2);
  EXPECT_NEAR(cycle->step_seconds, 9, kEps);
  c.pass_gpus = {0, 1, 0};  // this one step alone (by hand above)
  absl::StatusOr<SimResult> r = Simulate(m, forward, c);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectInvariants(*r);
  EXPECT_NEAR(r->step_seconds, 9, kEps);
  ASSERT_EQ(r->stages.size(), 2u);
  EXPECT_EQ(r->stages[0].forward_gpu, 0);
  EXPECT_NEAR(r->stages[0].forward_end, 3, kEps);
  EXPECT_EQ(r->stages[1].backward_gpu, 1);
  EXPECT_NEAR(r->stages[1].backward_start, 4, kEps);
  EXPECT_EQ(r->stages[0].backward_gpu, 0);
  EXPECT_NEAR(r->stages[0].backward_start, 7, kEps);
  EXPECT_EQ(r->weight_upload_bytes, int64_t{3'000'000'000});
  // The internal checkpoint went D2H once and came back once; the gradient crossed once each way.
  EXPECT_EQ(r->d2h_bytes, int64_t{1'000'000'000});
  EXPECT_EQ(r->h2d_bytes, int64_t{4'000'000'000});
  for (const GpuStats& g : r->gpus) EXPECT_LE(g.max_resident_stages, 2);

  // Backward stages that do not cover the forward's units.
  c.backward_stages.pop_back();
  EXPECT_EQ(Simulate(m, forward, c).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Simulator, BadInput) {
  const SimMachine m = HandMachine(1, 1e9);
  EXPECT_EQ(Simulate(m, {}, {}).status().code(), absl::StatusCode::kInvalidArgument);
  SimConfig c;
  c.num_microbatches = 0;
  EXPECT_EQ(Simulate(m, TwoStages(), c).status().code(), absl::StatusCode::kInvalidArgument);
  c.num_microbatches = 1;
  c.gpu_order = {5};
  EXPECT_EQ(Simulate(m, TwoStages(), c).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSchedule("gpipe").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseSchedule("roundrobin"), Schedule::kRoundRobin);
}

}  // namespace
}  // namespace mobius::planner::sim
