// Several nodes (host/planner/nodes/nodes.h, PlanOptions::internode): one node is the
// single-node plan exactly, an ideal link gives the per-node time of the node's share, a slow link
// is exposed and can make the job slower than one node (said, not clamped), LoRA's all-reduce is
// tiny, and the overlap leaves only the last stage's all-reduce exposed. Prints the numbers
// docs/planner.md quotes ("Several nodes").
#include "host/planner/nodes/nodes.h"

#include <cstdio>
#include <limits>
#include <string>

#include "common/model/model_config_parse.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/topology/hwloc_source.h"
#include "test/testing/paths.h"

namespace mobius::planner {
namespace {

using ::testing::HasSubstr;

struct Fixture {
  topology::Topology topology;
  topology::TopologyFacts facts;
};

Fixture Load(const char* name) {
  auto loaded = topology::MakeHwlocXmlFileSource(testing::TopologyFixture(name))->Load();
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return {loaded->topology, topology::Analyze(loaded->topology)};
}

model::ModelDescription Model(const std::string& name) {
  auto config = model::LoadModelConfig(testing::SourcePath("test/data/models/" + name));
  EXPECT_TRUE(config.ok()) << config.status();
  auto m = model::DescribeModel(*config);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

JobShape Job(int64_t batch, int64_t seq) {
  JobShape j;
  j.global_batch = batch;
  j.microbatch = 1;
  j.seq_len = seq;
  return j;
}

PlanOptions Options() {
  PlanOptions o;
  o.compare = false;
  return o;
}

constexpr char kPaper[] = "paper_testbed_2s_2sw_8x3090.xml";

TEST(PlanNodes, OneNodeIsTheSingleNodePlanExactly) {
  const Fixture f = Load(kPaper);
  const model::ModelDescription m = Model("llama-2-7b.json");
  NodesOptions n;
  n.nodes = {1};
  absl::StatusOr<NodesReport> r = PlanNodes(m, f.topology, f.facts, Job(16, 1024), Options(), n);
  absl::StatusOr<PlanReport> alone = MakePlan(m, f.topology, f.facts, Job(16, 1024), Options());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(alone.ok()) << alone.status();
  ASSERT_EQ(r->rows.size(), 1u);
  const NodeScaling& one = r->rows[0];
  EXPECT_EQ(one.node_batch, 16);
  EXPECT_EQ(one.step_seconds, alone->step_seconds);
  EXPECT_EQ(one.plan.plan.num_stages(), alone->plan.num_stages());
  EXPECT_EQ(one.plan.plan.mapping.gpu_order, alone->plan.mapping.gpu_order);
  EXPECT_EQ(one.tokens_per_second, alone->tokens_per_second);
  EXPECT_EQ(r->single_node.step_seconds, alone->step_seconds);
  EXPECT_EQ(one.speedup, 1.0);
  EXPECT_EQ(one.efficiency, 1.0);
  EXPECT_EQ(one.plan.internode.nodes, 1);
  EXPECT_EQ(one.plan.internode.allreduce_bytes, 0);
}

// An ideal link (infinite rate, no latency): N nodes take exactly one node's time for B / N.
TEST(PlanNodes, AnIdealLinkGivesThePerNodeTimeOfTheShare) {
  const Fixture f = Load(kPaper);
  const model::ModelDescription m = Model("llama-2-7b.json");
  NodesOptions n;
  n.nodes = {2, 4};
  n.link = {std::numeric_limits<double>::infinity(), 0};
  absl::StatusOr<NodesReport> r = PlanNodes(m, f.topology, f.facts, Job(16, 1024), Options(), n);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const NodeScaling& row : r->rows) {
    absl::StatusOr<PlanReport> share =
        MakePlan(m, f.topology, f.facts, Job(16 / row.nodes, 1024), Options());
    ASSERT_TRUE(share.ok()) << share.status();
    EXPECT_EQ(row.step_seconds, share->step_seconds) << row.nodes;
    EXPECT_EQ(row.plan.internode.exposed_seconds, 0) << row.nodes;
    EXPECT_EQ(row.plan.internode.allreduce_seconds, 0) << row.nodes;
    EXPECT_GT(row.plan.internode.allreduce_bytes, 0);
    // Smaller per-node batches: faster steps, but not N times (the pipeline's bubble and the
    // weights' uploads do not shrink with the batch).
    EXPECT_LT(row.step_seconds, r->single_node.step_seconds);
    EXPECT_GT(row.speedup, 1.0);
    EXPECT_LT(row.efficiency, 1.0);
  }
}

// A slow link (1 Gb/s): the all-reduce of ~27 GB of fp32 gradients cannot hide behind the
// backward; two nodes are slower than one, and the report says so (efficiency < 0.5).
TEST(PlanNodes, ASlowLinkIsExposedAndSlowerThanOneNode) {
  const Fixture f = Load(kPaper);
  const model::ModelDescription m = Model("llama-2-7b.json");
  NodesOptions n;
  n.nodes = {2};
  n.link = {1e9 / 8, 20e-6};
  absl::StatusOr<NodesReport> r = PlanNodes(m, f.topology, f.facts, Job(16, 1024), Options(), n);
  ASSERT_TRUE(r.ok()) << r.status();
  const NodeScaling& two = r->rows[0];
  const InterNodeReport& in = two.plan.internode;
  EXPECT_EQ(in.nodes, 2);
  // Every parameter's fp32 gradient, once: 4 bytes x 6.74 B.
  EXPECT_EQ(in.allreduce_bytes, 4 * two.plan.parameters);
  EXPECT_EQ(in.sent_bytes, in.allreduce_bytes);  // 2 (N - 1) / N = 1 for two nodes
  double ring = 0;
  for (const StageAllReduce& s : in.stages) ring += s.seconds;
  EXPECT_NEAR(in.allreduce_seconds, ring, 1e-6);
  EXPECT_GT(in.allreduce_seconds, 200);  // 27 GB at 0.125 GB/s
  EXPECT_GT(in.exposed_seconds, 0.5 * in.allreduce_seconds);
  EXPECT_NEAR(two.step_seconds, in.step_without_allreduce_seconds + in.exposed_seconds, 1e-9);
  EXPECT_GT(two.step_seconds, r->single_node.step_seconds);
  EXPECT_LT(two.speedup, 1.0);
  EXPECT_LT(two.efficiency, 0.5);
  std::printf("7B, 2 nodes at 1 Gb/s: step %.2f s (alone %.2f s, exposed %.2f s of %.2f s), "
              "one node %.2f s\n",
              two.step_seconds, in.step_without_allreduce_seconds, in.exposed_seconds,
              in.allreduce_seconds, r->single_node.step_seconds);
}

// With every all-reduce shorter than the backward after it, only the last stage's (stage 0, whose
// backward ends the step) is exposed: the step grows by exactly its ring time. One GPU and six
// stages of 5-6 units, so that the backward after a stage is the next stage's whole backward (on
// several GPUs the pipeline's last stages finish one microbatch apart, and with a stage 0 of the
// embedding alone its backward is ~1 ms: the all-reduces of the stages before then trail into the
// exposed time, which the simulator counts).
TEST(PlanNodes, OverlapLeavesOnlyTheLastStagesAllReduceExposed) {
  const Fixture f = Load(kPaper);
  const model::ModelDescription m = Model("llama-2-7b.json");
  NodesOptions n;
  n.nodes = {2};
  n.link = {100e9 / 8, 20e-6};  // 100 GbE
  for (bool barrier : {false, true}) {
    PlanOptions o = Options();
    o.gpus = {0};
    o.num_stages = 6;
    o.optimizer_after_backward = barrier;
    absl::StatusOr<NodesReport> r = PlanNodes(m, f.topology, f.facts, Job(16, 1024), o, n);
    ASSERT_TRUE(r.ok()) << r.status();
    const InterNodeReport& in = r->rows[0].plan.internode;
    ASSERT_GE(in.stages.size(), 2u);
    const StageAllReduce& last = in.stages[0];
    for (size_t s = 1; s < in.stages.size(); ++s) {
      // Each earlier all-reduce runs after its stage's backward, hidden under the backward of
      // the stages after it.
      EXPECT_GE(in.stages[s].start, in.stages[s].backward_end) << s;
      EXPECT_LE(in.stages[s].end, last.backward_end) << s;
      EXPECT_LT(in.stages[s].seconds, in.stages[s - 1].backward_end - in.stages[s].backward_end);
    }
    EXPECT_GT(last.seconds, 0);
    EXPECT_NEAR(in.exposed_seconds, last.seconds, 1e-6) << barrier;
  }
}

// LoRA (r16 on all seven projections): only the adapters' gradients are reduced, ~0.5% of the
// full fine-tuning bytes, and the exposure disappears with them.
TEST(PlanNodes, LoraAllReduceIsFarSmaller) {
  const Fixture f = Load(kPaper);
  const model::ModelDescription m = Model("llama-2-7b.json");
  NodesOptions n;
  n.nodes = {4};
  PlanOptions o = Options();
  absl::StatusOr<NodesReport> full = PlanNodes(m, f.topology, f.facts, Job(16, 1024), o, n);
  o.lora.rank = 16;
  o.lora.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj",
                           "gate_proj", "up_proj", "down_proj"};
  absl::StatusOr<NodesReport> lora = PlanNodes(m, f.topology, f.facts, Job(16, 1024), o, n);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(lora.ok()) << lora.status();
  const InterNodeReport& a = full->rows[0].plan.internode;
  const InterNodeReport& b = lora->rows[0].plan.internode;
  EXPECT_EQ(b.allreduce_bytes, 4 * lora->rows[0].plan.adapter_parameters);
  EXPECT_LT(b.allreduce_bytes * 100, a.allreduce_bytes);
  EXPECT_LT(b.allreduce_seconds * 50, a.allreduce_seconds);
  EXPECT_LT(b.exposed_seconds, a.exposed_seconds);
  EXPECT_GT(lora->rows[0].efficiency, full->rows[0].efficiency);
}

TEST(PlanNodes, BadInputNamesTheField) {
  const Fixture f = Load(kPaper);
  const model::ModelDescription m = Model("gpt2.json");
  auto run = [&](NodesOptions n, PlanOptions o = Options()) {
    return PlanNodes(m, f.topology, f.facts, Job(8, 256), o, n).status();
  };
  NodesOptions n;
  n.nodes = {3};
  absl::Status s = run(n);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("nodes: 3 nodes do not split the global batch of 8"));
  EXPECT_THAT(s.message(), HasSubstr("1, 2, 4, 8"));
  n.nodes = {0};
  EXPECT_THAT(run(n).message(), HasSubstr("nodes: must be >= 1"));
  n.nodes = {};
  EXPECT_THAT(run(n).message(), HasSubstr("nodes:"));
  n.nodes = {16};  // 8 sequences over 16 nodes
  EXPECT_THAT(run(n).message(), HasSubstr("nodes: 16 nodes do not split"));
  n.nodes = {2};
  n.link.bytes_per_s = 0;
  EXPECT_THAT(run(n).message(), HasSubstr("internode.bytes_per_s"));
  n.link = {};
  n.link.latency_seconds = -1;
  EXPECT_THAT(run(n).message(), HasSubstr("internode.latency_seconds"));
  n.link = {};
  PlanOptions resident = Options();
  resident.schedule = runtime::Schedule::kResident;
  s = run(n, resident);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("internode.nodes"));
  // The comparison table marks the schedules it cannot model across nodes.
  PlanOptions compare = Options();
  compare.compare = true;
  absl::StatusOr<NodesReport> r =
      PlanNodes(m, f.topology, f.facts, Job(8, 256), compare, NodesOptions{{2}, {}, 0});
  ASSERT_TRUE(r.ok()) << r.status();
  int unavailable = 0;
  for (const Alternative& a : r->rows[0].plan.alternatives) {
    if (a.name == "resident" || a.name == "zero") {
      EXPECT_FALSE(a.available);
      EXPECT_THAT(a.note, HasSubstr("not modelled across nodes"));
      ++unavailable;
    }
  }
  EXPECT_EQ(unavailable, 2);
}

}  // namespace
}  // namespace mobius::planner
