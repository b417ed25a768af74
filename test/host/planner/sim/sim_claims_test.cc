// The paper's qualitative claims, reproduced in the simulator on the hwloc fixtures
// (docs/planner.md, "Paper claims"). The numbers are printed for the table.
#include <cstdio>

#include "gtest/gtest.h"
#include "host/planner/mapping.h"
#include "host/planner/partition.h"
#include "host/topology/hwloc_source.h"
#include "test/host/planner/sim/sim_test_util.h"
#include "test/testing/paths.h"

namespace mobius::planner::sim {
namespace {

struct Fixture {
  topology::Topology topology;
  topology::TopologyFacts facts;
  std::vector<int> all;
};

Fixture Load(const std::string& name) {
  auto source = topology::MakeHwlocXmlFileSource(testing::TopologyFixture(name));
  absl::StatusOr<topology::LoadedTopology> loaded = source->Load();
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  Fixture f;
  if (!loaded.ok()) return f;
  f.topology = loaded->topology;
  f.facts = topology::Analyze(f.topology);
  for (size_t g = 0; g < f.topology.gpus.size(); ++g) f.all.push_back(static_cast<int>(g));
  return f;
}

// GPT-style decoder, ~2.8B parameters: 32 blocks of C = 2560, I = 6912, 32 heads, vocab 50257.
model::ModelDescription Gpt3B() {
  model::ModelConfig c;
  c.family = model::Family::kLlama;
  c.model_type = "llama";
  c.vocab_size = 50257;
  c.hidden_size = 2560;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 32;
  c.head_dim = 80;
  c.intermediate_size = 6912;
  c.max_position_embeddings = 2048;
  c.norm = model::NormKind::kRmsNorm;
  c.mlp = model::MlpKind::kSwiGlu;
  c.position = model::PositionKind::kRope;
  absl::StatusOr<model::ModelDescription> m = model::DescribeModel(c);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

struct Comparison {
  SimResult mobius, zero;
  int num_stages = 0;
  // Mobius's weight uploads by the two-slot rule (schedules.h): every stage in forward, and in
  // backward those not among their GPU's last two forward stages (s + 2N < S).
  int64_t expected_mobius_upload_bytes = 0;
};

// Mobius (exact partition, cross mapping) vs the ZeRO-offload model for the same job.
Comparison Compare(const Fixture& f, const DeviceSpec& device, int microbatches,
                   MicrobatchShape shape, double duplex) {
  Comparison out;
  const model::ModelDescription m = Gpt3B();
  absl::StatusOr<Profile> prof = AnalyticProfile(m, shape, device);
  EXPECT_TRUE(prof.ok()) << prof.status();
  absl::StatusOr<PartitionProblem> p =
      MakePartitionProblem(*prof, m, f.topology, f.facts, f.all, microbatches, device.memory_bytes);
  EXPECT_TRUE(p.ok()) << p.status();
  absl::StatusOr<Partition> part = ExactPartition(*p);
  EXPECT_TRUE(part.ok()) << part.status();
  absl::StatusOr<Mapping> map = CrossMapping(f.facts, f.all, part->num_stages());
  MachineOptions mo;
  mo.duplex_factor = duplex;
  absl::StatusOr<SimMachine> machine = MakeMachine(f.topology, f.facts, f.all, mo);
  EXPECT_TRUE(machine.ok()) << machine.status();
  SimConfig c;
  c.num_microbatches = microbatches;
  c.gpu_order = map->gpu_order;
  const std::vector<SimStage> stages = MakeSimStages(*p, *part);
  absl::StatusOr<SimResult> mob = Simulate(*machine, stages, c);
  const int n = static_cast<int>(map->gpu_order.size());
  for (int s = 0; s < static_cast<int>(stages.size()); ++s) {
    out.expected_mobius_upload_bytes +=
        stages[s].weight_bytes * (s + 2 * n < static_cast<int>(stages.size()) ? 2 : 1);
  }
  c.schedule = Schedule::kZeroOffload;
  c.gpu_order.clear();
  absl::StatusOr<SimResult> zero =
      Simulate(*machine, MakeZeroSimStages(*p, prof->gradient_bytes_per_parameter), c);
  EXPECT_TRUE(mob.ok() && zero.ok());
  ExpectInvariants(*mob);
  ExpectInvariants(*zero);
  out.mobius = *mob;
  out.zero = *zero;
  out.num_stages = part->num_stages();
  return out;
}

TEST(PaperClaims, MobiusTrafficIsAboutOneNthOfZeroOffload) {
  const Fixture f = Load("paper_testbed_2s_2sw_8x3090.xml");
  ASSERT_EQ(f.all.size(), 8u);
  for (int mb : {2, 4, 8}) {
    const Comparison c = Compare(f, Rtx3090Spec(), mb, {1, 1024}, 1.0);
    const double weights = double(c.mobius.weight_upload_bytes) / c.zero.weight_upload_bytes;
    const double h2d = double(c.mobius.h2d_bytes) / c.zero.h2d_bytes;
    std::printf("paper testbed, 2.8B, M=%d, S=%d: weight H2D mobius/zero = %.4f (1/N = 0.125), "
                "all H2D = %.4f, all traffic = %.4f; step mobius %.2f s, zero %.2f s (%.2fx)\n",
                mb, c.num_stages, weights, h2d,
                double(c.mobius.h2d_bytes + c.mobius.d2h_bytes) / (c.zero.h2d_bytes + c.zero.d2h_bytes),
                c.mobius.step_seconds, c.zero.step_seconds,
                c.zero.step_seconds / c.mobius.step_seconds);
    // ZeRO uploads every weight once per GPU per pass (2N times), Mobius at most once per pass:
    // 1/N, less the backward uploads the two slots save.
    EXPECT_EQ(c.mobius.weight_upload_bytes, c.expected_mobius_upload_bytes);
    EXPECT_LE(weights, 1.0 / 8 + 1e-9);
    EXPECT_GE(weights, 1.0 / 16 - 1e-9);
    EXPECT_LT(h2d, 2.0 / 8);
    EXPECT_LT(c.mobius.step_seconds, c.zero.step_seconds);
  }
}

// PCIe-bound stages (1.2 GB of weights, a few ms of compute): cross vs sequential.
double StepWithMapping(const Fixture& f, bool cross, int num_stages, int microbatches) {
  absl::StatusOr<SimMachine> machine = MakeMachine(f.topology, f.facts, f.all);
  EXPECT_TRUE(machine.ok());
  std::vector<SimStage> st(num_stages, SimStage{0.005, 0.015, 0.001, int64_t{1200} << 20,
                                                int64_t{1200} << 20, int64_t{8} << 20, 0.1});
  st[0].input_bytes = 0;
  absl::StatusOr<Mapping> map = cross ? CrossMapping(f.facts, f.all, num_stages)
                                      : SequentialMapping(f.facts, f.all, num_stages);
  EXPECT_TRUE(map.ok());
  SimConfig c;
  c.num_microbatches = microbatches;
  c.gpu_order = map->gpu_order;
  absl::StatusOr<SimResult> r = Simulate(*machine, st, c);
  EXPECT_TRUE(r.ok()) << r.status();
  ExpectInvariants(*r);
  return r->step_seconds;
}

TEST(PaperClaims, CrossBeatsSequentialWhenPcieBound) {
  const Fixture paper = Load("paper_testbed_2s_2sw_8x3090.xml");
  const Fixture ports = Load("root_ports_1s_4gpu.xml");
  for (auto [stages, mb] : {std::pair{16, 2}, std::pair{24, 4}, std::pair{32, 1}}) {
    const double seq = StepWithMapping(paper, false, stages, mb);
    const double cross = StepWithMapping(paper, true, stages, mb);
    std::printf("paper testbed, PCIe-bound, S=%d M=%d: sequential %.3f s, cross %.3f s (%.2fx)\n",
                stages, mb, seq, cross, seq / cross);
    EXPECT_LT(cross, seq * 0.99);
    // Every GPU on its own root port: cross == sequential.
    EXPECT_DOUBLE_EQ(StepWithMapping(ports, true, stages, mb),
                     StepWithMapping(ports, false, stages, mb));
  }
}

TEST(PaperClaims, NvlinkServerShrinksOrReversesTheAdvantage) {
  const Fixture paper = Load("paper_testbed_2s_2sw_8x3090.xml");
  const Fixture dgx = Load("nvlink_dgx_8xh100.xml");
  ASSERT_EQ(dgx.all.size(), 8u);
  const Comparison pc = Compare(paper, Rtx3090Spec(), 4, {1, 1024}, 1.0);
  const Comparison nv = Compare(dgx, H100Spec(), 4, {1, 1024}, 1.0);
  const double pc_speedup = pc.zero.step_seconds / pc.mobius.step_seconds;
  const double nv_speedup = nv.zero.step_seconds / nv.mobius.step_seconds;
  std::printf("zero/mobius step: paper testbed %.2fx (%.2f vs %.2f s), DGX H100 %.2fx (%.2f vs "
              "%.2f s)\n",
              pc_speedup, pc.zero.step_seconds, pc.mobius.step_seconds, nv_speedup,
              nv.zero.step_seconds, nv.mobius.step_seconds);
  EXPECT_LT(nv_speedup, pc_speedup);
}

TEST(PaperClaims, TraceOfARealPlanParses) {
  const Fixture f = Load("paper_testbed_2s_2sw_8x3090.xml");
  const Comparison c = Compare(f, Rtx3090Spec(), 2, {1, 512}, 0.6);
  absl::StatusOr<SimMachine> machine = MakeMachine(f.topology, f.facts, f.all);
  ASSERT_TRUE(machine.ok());
  ExpectValidTrace(ChromeTraceJson(*machine, c.mobius), c.mobius.graph.tasks.size());
  for (const GpuStats& g : c.mobius.gpus) EXPECT_LE(g.max_resident_stages, 2);
}

}  // namespace
}  // namespace mobius::planner::sim
