// MakePlan with the runtime's optimizer modes and the calibrated model's options: staleness,
// dispatch, precision, the host, Megatron's resident pipeline, and their validation.
#include <cstdio>
#include <string>

#include "common/model/model_config_parse.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/planner/api/make_plan.h"
#include "host/topology/hwloc_source.h"
#include "test/testing/paths.h"

namespace mobius::planner {
namespace {

using ::testing::HasSubstr;

struct Fixture {
  topology::Topology topology;
  topology::TopologyFacts facts;
};

Fixture Rtx4090Box() {
  auto loaded =
      topology::MakeHwlocXmlFileSource(testing::TopologyFixture("rtx4090_2s_4sw_8gpu.xml"))->Load();
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return {loaded->topology, topology::Analyze(loaded->topology)};
}

model::ModelDescription Load(const std::string& name) {
  auto config = model::LoadModelConfig(testing::SourcePath("test/data/models/" + name));
  EXPECT_TRUE(config.ok()) << config.status();
  auto m = model::DescribeModel(*config);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

JobShape Job(int64_t batch, int64_t microbatch, int64_t seq) {
  JobShape j;
  j.global_batch = batch;
  j.microbatch = microbatch;
  j.seq_len = seq;
  return j;
}

TEST(MakePlanModes, AsynchronousOptimizerOverlapsAndKeepsASecondWeightCopy) {
  const Fixture f = Rtx4090Box();
  const model::ModelDescription m = Load("qwen3-1.7b.json");
  PlanOptions o;
  o.compare = false;
  o.schedule = runtime::Schedule::kRoundRobin;
  o.optimizer_after_backward = true;
  o.host = HostSpecForTopology(f.topology);
  auto sync = MakePlan(m, f.topology, f.facts, Job(64, 4, 2048), o);
  o.optimizer_after_backward = false;
  o.optimizer_staleness = 1;
  auto async = MakePlan(m, f.topology, f.facts, Job(64, 4, 2048), o);
  ASSERT_TRUE(sync.ok()) << sync.status();
  ASSERT_TRUE(async.ok()) << async.status();
  EXPECT_EQ(async->plan.memory.host_model_state_bytes - sync->plan.memory.host_model_state_bytes,
            2 * async->parameters);
  EXPECT_LT(async->step_seconds, sync->step_seconds);
  bool dram = false;
  for (const LinkTraffic& l : async->links) dram = dram || l.name == "host.memory";
  EXPECT_TRUE(dram);
  o.dispatch = "pool";
  auto pool = MakePlan(m, f.topology, f.facts, Job(64, 4, 2048), o);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_GT(pool->step_seconds, 0);
}

TEST(MakePlanModes, Fp16AccumulationPicksTheDoublePeak) {
  const Fixture f = Rtx4090Box();
  const model::ModelDescription m = Load("qwen3-1.7b.json");
  PlanOptions o;
  o.compare = false;
  o.schedule = runtime::Schedule::kRoundRobin;
  o.optimizer_after_backward = true;  // a clipping job: both wait for the global norm
  auto ratio = [&](MemoryModel model) {
    o.cost.memory_model = model;
    JobShape j = Job(64, 4, 2048);
    auto bf16 = MakePlan(m, f.topology, f.facts, j, o);
    j.dtype = "fp16";
    j.fp16_accumulate = true;
    auto fp16 = MakePlan(m, f.topology, f.facts, j, o);
    EXPECT_TRUE(bf16.ok()) << bf16.status();
    EXPECT_TRUE(fp16.ok()) << fp16.status();
    return bf16.ok() && fp16.ok() ? fp16->tokens_per_second / bf16->tokens_per_second : 0.0;
  };
  // The published systems (all GEMMs fp16): not 2x, attention (fp32 accumulate in
  // FlashAttention) and the elementwise work keep their time.
  const double published = ratio(MemoryModel::kTwoSlot);
  EXPECT_GT(published, 1.4);
  EXPECT_LT(published, 2.0);
  // Our runtime: every GEMM sums in fp16 too (the fp16 backward and head), but each microbatch's
  // fp16 weight gradients are added into fp32 ones, while its fp16 logits move half the bytes of
  // fp32 ones: within 5% of the published setups' gain.
  const double ours = ratio(MemoryModel::kRuntime);
  std::printf("  fp16 / bf16 tokens/s: published setups %.3f, our runtime %.3f\n", published, ours);
  EXPECT_GT(ours, 1.3);
  EXPECT_NEAR(ours / published, 1.0, 0.05);
}

// Llama-3.1-8B under Megatron's pipeline: 8 stages of 4 blocks, the embedding with the first and
// the head with the last. Our memory rule puts stage 7 (4 blocks + head, 1.4 B parameters at 16
// bytes, the fp32 logits of a 4096-token microbatch) just over 24 GB; Megatron ran it.
TEST(MakePlanModes, MegatronResidentLayout) {
  const Fixture f = Rtx4090Box();
  const model::ModelDescription m = Load("llama-3.1-8b-instruct.json");
  PlanOptions o;
  o.compare = false;
  o.schedule = runtime::Schedule::kResident;
  o.megatron_resident = true;
  o.gradient_bytes_per_parameter = 2;
  o.cost.memory_model = MemoryModel::kTwoSlot;  // another system's memory: the two-slot rule
  JobShape j = Job(256, 2, 2048);
  j.dtype = "fp16";
  j.fp16_accumulate = true;
  auto r = MakePlan(m, f.topology, f.facts, j, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("stage 7 (units 29..33)"));
  o.resident_memory_check = false;
  r = MakePlan(m, f.topology, f.facts, j, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->plan.num_stages(), 8);
  EXPECT_EQ(r->plan.partition.stages.front().begin, 0);
  EXPECT_EQ(r->plan.partition.stages.front().end, 5);
  for (int s = 1; s < 7; ++s) {
    EXPECT_EQ(r->plan.partition.stages[s].end - r->plan.partition.stages[s].begin, 4) << s;
  }
  EXPECT_EQ(r->plan.partition.stages.back().begin, 29);
  EXPECT_EQ(r->plan.partition.stages.back().end, 34);
  // 1F1B with 128 microbatches: bubble (S - 1) / (M + S - 1) = 7 / 135 plus the imbalance of
  // the last stage (4 blocks + the head, ~1.5x the others' work).
  EXPECT_GT(r->bubble_fraction, 7.0 / 135);
  EXPECT_LT(r->bubble_fraction, 0.4);
}

TEST(MakePlanModes, BadModes) {
  const Fixture f = Rtx4090Box();
  const model::ModelDescription m = Load("qwen3-0.6b.json");
  auto plan = [&](PlanOptions o, JobShape j) {
    o.compare = false;
    return MakePlan(m, f.topology, f.facts, j, o).status();
  };
  PlanOptions o;
  o.schedule = runtime::Schedule::kResident;
  o.optimizer_staleness = 1;
  EXPECT_THAT(plan(o, Job(8, 1, 512)).message(), HasSubstr("1 only for mobius and roundrobin"));
  o = {};
  o.optimizer_staleness = 2;
  EXPECT_EQ(plan(o, Job(8, 1, 512)).code(), absl::StatusCode::kInvalidArgument);
  o = {};
  o.dispatch = "pool";
  EXPECT_THAT(plan(o, Job(8, 1, 512)).message(), HasSubstr("needs schedule roundrobin"));
  o.dispatch = "greedy";
  EXPECT_THAT(plan(o, Job(8, 1, 512)).message(), HasSubstr("unknown dispatch"));
  o = {};
  JobShape j = Job(8, 1, 512);
  j.fp16_accumulate = true;
  EXPECT_THAT(plan(o, j).message(), HasSubstr("needs fp16 weights"));
  j.dtype = "fp8";
  EXPECT_THAT(plan(o, j).message(), HasSubstr("(bf16, fp16)"));
  o.simulated_steps = 17;
  EXPECT_EQ(plan(o, Job(8, 1, 512)).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mobius::planner
