#include "host/planner/cost_model.h"

#include "gtest/gtest.h"
#include "test/host/planner/test_models.h"

namespace mobius::planner {
namespace {

TEST(Links, PaperTestbedUplinkSharedByFour) {
  LoadedFixture f = LoadFixture("paper_testbed_2s_2sw_8x3090.xml");
  ASSERT_EQ(f.topology.gpus.size(), 8u);
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(GpusInContentionGroup(f.facts, all, 0), 4);
  EXPECT_EQ(GpusInContentionGroup(f.facts, {0, 4}, 0), 1);
  EXPECT_EQ(GpusInContentionGroup(f.facts, {0, 1, 4}, 1), 2);
  // Gen3 x16 = 15.75 GB/s, 80% DMA efficiency; four loaders share one uplink.
  EXPECT_NEAR(EffectiveHostGBytesPerSecond(f.facts, 0, 1, 0.8), 12.6, 0.01);
  EXPECT_NEAR(EffectiveHostGBytesPerSecond(f.facts, 0, 4, 0.8), 3.15, 0.01);
  EXPECT_NEAR(EffectiveHostGBytesPerSecond(f.facts, 5, 2, 1.0), 7.875, 0.01);
}

TEST(Links, OwnRootPortsDoNotContend) {
  LoadedFixture f = LoadFixture("root_ports_1s_4gpu.xml");
  ASSERT_EQ(f.topology.gpus.size(), 4u);
  for (int g = 0; g < 4; ++g) {
    EXPECT_EQ(GpusInContentionGroup(f.facts, {0, 1, 2, 3}, g), 1);
    EXPECT_NEAR(EffectiveHostGBytesPerSecond(f.facts, g, 1, 0.8), 25.2, 0.01);  // Gen4 x16
  }
}

TEST(Links, BoundaryTransferThroughHostCrossesTheUplinkTwice) {
  LoadedFixture f = LoadFixture("paper_testbed_2s_2sw_8x3090.xml");
  const int64_t gb = 1000000000;
  // GeForce: no P2P; D2H at 12.6 then H2D at 12.6.
  EXPECT_NEAR(BoundaryTransferSeconds(f.topology, f.facts, 0, 1, gb, 1, 1, 0.8), 2 / 12.6, 1e-3);
  // With the group busy (4 copying) each leg runs at 3.15 GB/s.
  EXPECT_NEAR(BoundaryTransferSeconds(f.topology, f.facts, 0, 1, gb, 4, 4, 0.8), 2 / 3.15, 1e-3);
  EXPECT_EQ(BoundaryTransferSeconds(f.topology, f.facts, 2, 2, gb, 1, 1, 0.8), 0);

  LoadedFixture dgx = LoadFixture("nvlink_dgx_8xh100.xml");
  ASSERT_TRUE(dgx.facts.p2p[0][1]);
  // NVLink: one crossing at 450 GB/s x 0.8.
  EXPECT_NEAR(BoundaryTransferSeconds(dgx.topology, dgx.facts, 0, 1, gb, 1, 1, 0.8), 1 / 360.0,
              1e-5);
}

TEST(Optimizer, PointThreeSecondsPerBillion) {
  EXPECT_NEAR(OptimizerSeconds(7000000000, 0.3), 2.1, 1e-12);
}

PartitionProblem TwoUnits() {
  PartitionProblem p;
  p.units = {{1, 3, 100, 100, 10}, {1, 3, 100, 100, 10}};
  p.num_gpus = 2;
  p.num_microbatches = 2;
  p.h2d_bytes_per_s = 100;
  p.d2h_bytes_per_s = 100;
  p.boundary_bytes = 5;
  p.gpu_memory_bytes = 1000;
  p.reserved_bytes = 100;
  p.memory_model = MemoryModel::kTwoSlot;  // the by-hand numbers below; kRuntime: StageMemory
  return p;
}

TEST(Stage, ComputeBoundByHand) {
  const StageCost c = EvaluateStage(TwoUnits(), 0, 2);
  EXPECT_DOUBLE_EQ(c.forward_compute_seconds, 4);  // 2 microbatches x 2 units x 1 s
  EXPECT_DOUBLE_EQ(c.backward_compute_seconds, 12);
  EXPECT_DOUBLE_EQ(c.load_seconds, 2);  // 200 bytes at 100 B/s
  EXPECT_DOUBLE_EQ(c.forward_seconds, 4);
  EXPECT_DOUBLE_EQ(c.backward_seconds, 12);
  EXPECT_DOUBLE_EQ(c.slot_seconds, 16);
  EXPECT_EQ(c.slot_bytes, 420);
  EXPECT_EQ(c.memory_bytes, 840);
}

TEST(Stage, LoadBoundByHand) {
  PartitionProblem p = TwoUnits();
  p.h2d_bytes_per_s = 10;  // H2D (200 + 2*5) / 10 = 21 s per pass
  p.d2h_bytes_per_s = 20;  // D2H backward (200 + 10) / 20 = 10.5 s
  const StageCost c = EvaluateStage(p, 0, 2);
  EXPECT_DOUBLE_EQ(c.forward_seconds, 21);
  EXPECT_DOUBLE_EQ(c.backward_seconds, 21);
  EXPECT_DOUBLE_EQ(EvaluateStage(p, 1, 2).slot_seconds, 2 * 11.0);
}

// The backward charged without its weight upload (the two-slot reuse): the H2D term keeps only the
// checkpoints, M h = 10 bytes at 10 B/s = 1 s, so tau_B = max(12 s compute, 1 s, 10.5 s D2H) = 12.
TEST(Stage, BackwardWithoutUploadByHand) {
  PartitionProblem p = TwoUnits();
  p.h2d_bytes_per_s = 10;
  p.d2h_bytes_per_s = 20;
  const StageCost c = EvaluateStage(p, 0, 2, /*backward_upload=*/false);
  EXPECT_FALSE(c.backward_upload);
  EXPECT_DOUBLE_EQ(c.forward_seconds, 21);  // the forward still uploads
  EXPECT_DOUBLE_EQ(c.backward_seconds, 12);
  EXPECT_DOUBLE_EQ(c.slot_seconds, 33);
  EXPECT_EQ(c.memory_bytes, 840);  // the slots are the same
  // Symmetric links and G >= W: the gradient offload (G + M h) / d2h already bounds tau_B from
  // below by the upload's (W + M h) / h2d, so dropping the upload changes nothing (TwoUnits: 12).
  EXPECT_DOUBLE_EQ(EvaluateStage(TwoUnits(), 0, 2, false).slot_seconds,
                   EvaluateStage(TwoUnits(), 0, 2, true).slot_seconds);
}

TEST(Stage, ReusedBackwardStagesAreTheLastMinSAnd2N) {
  PartitionProblem p = TwoUnits();  // N = 2
  EXPECT_EQ(ReusedBackwardStages(p, 1), 1);
  EXPECT_EQ(ReusedBackwardStages(p, 4), 4);  // S <= 2N: every backward from the slots
  EXPECT_EQ(ReusedBackwardStages(p, 7), 4);  // stages 3..6 (s + 2N >= S), 0..2 upload
  p.backward_uploads = BackwardUploads::kEveryStage;
  EXPECT_EQ(ReusedBackwardStages(p, 7), 0);
  p.backward_uploads = BackwardUploads::kTwoSlotReuse;
  EXPECT_EQ(ReusedBackwardStages(PassProblem(p, Pass::kBackward), 7), 0);  // round-robin
  EXPECT_EQ(ReusedBackwardStages(PassProblem(p, Pass::kForward), 7), 0);
}

TEST(Objective, PipelineSlots) {
  EXPECT_DOUBLE_EQ(PipelineSlots(1, 4, 4), 1);
  EXPECT_DOUBLE_EQ(PipelineSlots(2, 4, 4), 1.25);  // GPipe fill over 2 stages
  EXPECT_DOUBLE_EQ(PipelineSlots(8, 4, 4), 2.75);  // 2 rounds + 3/4 fill
  EXPECT_DOUBLE_EQ(PipelineSlots(8, 4, 2), 4.5);   // M < N: 1 + 7/2 chain dominates
  EXPECT_DOUBLE_EQ(PipelineSlots(9, 4, 8), 3 + 3.0 / 8);
  // Bubble fraction N(N-1)/(MS + N(N-1)) of design/mobius.md: S = 8, N = 4, M = 4 -> 12/44.
  EXPECT_NEAR((3.0 / 4) / PipelineSlots(8, 4, 4), 12.0 / 44, 1e-12);
}

TEST(Objective, AddsOverheadAndOptimizer) {
  PartitionProblem p = TwoUnits();
  p.stage_overhead_seconds = 1;
  p.optimizer_seconds = 5;
  EXPECT_DOUBLE_EQ(Objective(p, 2, 16), 1.5 * 17 + 5);  // S=2, N=2, M=2: K = 1.5
}

// kRuntime (the runtime's allocations): two slots of W + G, every unit's input once; the unit
// internals are one workspace in reserved. TwoUnits: W = G = 100, activations 10 per unit.
TEST(StageMemory, RuntimeModelByHand) {
  PartitionProblem p = TwoUnits();
  p.memory_model = MemoryModel::kRuntime;
  const StageCost c = EvaluateStage(p, 0, 2);
  EXPECT_EQ(c.memory_bytes, 2 * (200 + 200) + 20);
  EXPECT_EQ(c.weight_bytes, 200);
  EXPECT_EQ(c.gradient_bytes, 200);
  EXPECT_EQ(c.activation_bytes, 20);
  EXPECT_EQ(UnitStageMemoryBytes(p, 0) + UnitStageMemoryBytes(p, 1), c.memory_bytes);
  PartitionProblem f = PassProblem(p, Pass::kForward);  // no gradients on a forward pass
  EXPECT_EQ(EvaluateStage(f, 0, 2).memory_bytes, 2 * 200 + 20);
  EXPECT_EQ(UnitStageMemoryBytes(f, 0), 2 * 100 + 10);
}

TEST(MakePartitionProblem, FromProfileAndTopology) {
  const model::ModelDescription m = TinyLlama();
  LoadedFixture f = LoadFixture("paper_testbed_2s_2sw_8x3090.xml");
  absl::StatusOr<Profile> prof = AnalyticProfile(m, {2, 8}, Rtx3090Spec());
  ASSERT_TRUE(prof.ok());
  absl::StatusOr<PartitionProblem> p =
      MakePartitionProblem(*prof, m, f.topology, f.facts, {0, 1, 4}, 4, 0);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->num_gpus, 3);
  EXPECT_EQ(p->num_microbatches, 4);
  EXPECT_NEAR(p->h2d_bytes_per_s, 6.3e9, 1e7);  // GPUs 0 and 1 share the socket-0 uplink
  EXPECT_EQ(p->gpu_memory_bytes, int64_t{24850752} * 1024);
  EXPECT_EQ(p->boundary_bytes, 128 * 16);
  // kRuntime: reserved = margin + the largest workspace + the fixed activation buffers (6 hidden
  // states + 8 bytes per token); a unit keeps its input.
  EXPECT_EQ(p->memory_model, MemoryModel::kRuntime);
  EXPECT_EQ(p->reserved_bytes,
            (int64_t{1} << 30) + prof->MaxWorkspaceBytes() + 6 * 128 * 16 + 8 * 16);
  EXPECT_EQ(RuntimeActivationBufferBytes(*prof), 6 * 128 * 16 + 8 * 16);
  EXPECT_NEAR(p->optimizer_seconds, 210240 * 0.3e-9, 1e-15);
  EXPECT_EQ(p->units[1].activation_bytes, prof->units[1].boundary_bytes);
  CostOptions two_slot;
  two_slot.memory_model = MemoryModel::kTwoSlot;
  absl::StatusOr<PartitionProblem> q =
      MakePartitionProblem(*prof, m, f.topology, f.facts, {0, 1, 4}, 4, 0, two_slot);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->reserved_bytes, (int64_t{1} << 30) + prof->MaxWorkspaceBytes());
  EXPECT_EQ(q->units[1].activation_bytes,
            prof->units[1].boundary_bytes + prof->units[1].saved_activation_bytes);

  EXPECT_EQ(MakePartitionProblem(*prof, m, f.topology, f.facts, {}, 4, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakePartitionProblem(*prof, m, f.topology, f.facts, {9}, 4, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakePartitionProblem(*prof, m, f.topology, f.facts, {0}, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A round-robin forward pass under recompute keeps no activations for a backward: with
// forward_keeps_boundaries_only its slot holds the weights, every unit's input and one unit's
// transient activations; a backward (and kBoth) still holds every unit's activations.
TEST(StageMemory, ForwardPassKeepsBoundariesOnly) {
  PartitionProblem p;
  p.num_gpus = 1;
  p.units = {{1, 3, 10, 20, 100, 4}, {1, 3, 10, 20, 300, 8}, {1, 3, 10, 20, 200, 8}};
  p.gpu_memory_bytes = 1 << 20;
  p.memory_model = MemoryModel::kTwoSlot;
  PartitionProblem f = PassProblem(p, Pass::kForward);
  EXPECT_EQ(EvaluateStage(f, 0, 3).slot_bytes, 30 + 600);  // weights + every activation
  f.forward_keeps_boundaries_only = true;
  EXPECT_EQ(EvaluateStage(f, 0, 3).slot_bytes, 30 + (4 + 8 + 8) + (300 - 8));
  EXPECT_EQ(EvaluateStage(f, 0, 3).memory_bytes, 2 * (30 + 20 + 292));
  PartitionProblem b = PassProblem(p, Pass::kBackward);
  b.forward_keeps_boundaries_only = true;
  EXPECT_EQ(EvaluateStage(b, 0, 3).slot_bytes, 30 + 60 + 600);
  // Still monotone in the range (what the exact partitioners need).
  EXPECT_LE(EvaluateStage(f, 0, 1).slot_bytes, EvaluateStage(f, 0, 2).slot_bytes);
  EXPECT_LE(EvaluateStage(f, 1, 3).slot_bytes, EvaluateStage(f, 0, 3).slot_bytes);
}

}  // namespace
}  // namespace mobius::planner
