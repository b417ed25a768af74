// MakePlan in LoRA mode (PlanOptions::lora, host/planner/lora.h): the host estimate against full
// fine-tuning on Llama-3.1-8B, a PCIe-bound step that LoRA makes faster (and why, in bytes and
// seconds), every schedule of the comparison table, and the mode's validation. Prints the numbers
// docs/planner.md quotes ("LoRA").
#include <cstdio>
#include <string>

#include "common/model/model_config_parse.h"
#include "common/numeric/nf4.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/planner/api/make_plan.h"
#include "host/topology/hwloc_source.h"
#include "test/testing/paths.h"

namespace mobius::planner {
namespace {

using ::testing::ElementsAre;
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

JobShape Job(int64_t batch, int64_t microbatch, int64_t seq) {
  JobShape j;
  j.global_batch = batch;
  j.microbatch = microbatch;
  j.seq_len = seq;
  return j;
}

// Llama-3.1-8B, rank 8 on q_proj and v_proj (PEFT's default): 3,407,872 adapter parameters in
// 128 tensors of one grad-norm chunk each.
TEST(MakePlanLora, Llama8bHostEstimateAgainstFullFineTuning) {
  const Fixture f = Load("rtx4090_2s_4sw_8gpu.xml");
  const model::ModelDescription m = Model("llama-3.1-8b-instruct.json");
  PlanOptions o;
  o.compare = false;
  o.num_stages = 16;  // the same stages for both, so the activations match
  auto full = MakePlan(m, f.topology, f.facts, Job(256, 1, 2048), o);
  o.lora.rank = 8;
  auto lora = MakePlan(m, f.topology, f.facts, Job(256, 1, 2048), o);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(lora.ok()) << lora.status();
  const int64_t p = full->parameters;
  EXPECT_EQ(lora->lora_rank, 8);
  EXPECT_THAT(lora->lora_targets, ElementsAre("q_proj", "v_proj"));
  EXPECT_EQ(lora->adapter_parameters, 3407872);
  const MemoryEstimate& fm = full->plan.memory;
  const MemoryEstimate& lm = lora->plan.memory;
  EXPECT_EQ(fm.host_model_state_bytes, 18 * p);
  EXPECT_EQ(lm.host_model_state_bytes, 2 * p + 16 * 3407872 + 8 * 128);
  EXPECT_EQ(lm.host_activation_bytes, fm.host_activation_bytes);
  EXPECT_EQ(lm.host_activation_grad_bytes, fm.host_activation_grad_bytes);
  EXPECT_EQ(fm.host_bytes - lm.host_bytes, 16 * p - 16 * 3407872 - 8 * 128);
  // The GPU slots lose the fp32 base gradients (4 bytes/parameter) and gain the adapters and
  // their gradients (8 bytes/adapter parameter).
  EXPECT_LT(lm.max_gpu_bytes, fm.max_gpu_bytes);
  EXPECT_EQ(lora->plan.partition.costs[2].slot_bytes,
            full->plan.partition.costs[2].slot_bytes -
                4 * (full->stage_parameter_bytes[2] / 2) +
                8 * (lora->stage_parameter_bytes[2] - full->stage_parameter_bytes[2]) / 4);
  std::printf("Llama-3.1-8B, 8x4090, 256 x 2048, 16 stages: host %.1f GiB full (%.2f B/param), "
              "%.1f GiB LoRA (%.3f B/param of model state); GPU max %.2f / %.2f GiB\n",
              fm.host_bytes / 1073741824.0, double(fm.host_model_state_bytes) / p,
              lm.host_bytes / 1073741824.0, double(lm.host_model_state_bytes) / p,
              fm.max_gpu_bytes / 1073741824.0, lm.max_gpu_bytes / 1073741824.0);
}

// The paper's testbed (8 RTX 3090 behind two Gen3 switches: 3.15 GB/s per GPU when all copy):
// Llama-2-7B at 2 x 1024 tokens is PCIe-bound (a stage's weight upload and its gradient offload
// take longer than its compute). LoRA removes the fp32 gradient offload (4 bytes/parameter D2H per
// step), a third of the backward's compute and the CPU optimizer's time; the forward still
// uploads the bf16 weights. With 16 stages on 8 GPUs every backward runs from the weights still
// in its GPU's two slots, so a LoRA backward moves almost nothing and is compute-bound.
TEST(MakePlanLora, PcieBoundStepIsFasterAndWhy) {
  const Fixture f = Load("paper_testbed_2s_2sw_8x3090.xml");
  const model::ModelDescription m = Model("llama-2-7b.json");
  PlanOptions o;
  o.compare = false;
  o.num_stages = 16;
  o.optimizer_after_backward = true;  // the job clips (the default grad_clip)
  auto full = MakePlan(m, f.topology, f.facts, Job(2, 1, 1024), o);
  o.lora.rank = 8;
  auto lora = MakePlan(m, f.topology, f.facts, Job(2, 1, 1024), o);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(lora.ok()) << lora.status();
  const int64_t p = full->parameters, a = lora->adapter_parameters;
  EXPECT_EQ(a, 4194304);  // 8 x (8192 + 8192) x 32 blocks
  // Traffic: the same stages upload the same bf16 weights (+ the fp32 adapters); the backward
  // offloads 4 bytes per adapter parameter instead of 4 per parameter; activations unchanged.
  EXPECT_EQ(full->d2h_bytes - lora->d2h_bytes, 4 * p - 4 * a);
  EXPECT_GT(lora->weight_upload_bytes, full->weight_upload_bytes);
  EXPECT_LT(lora->weight_upload_bytes, 1.01 * full->weight_upload_bytes);
  // Per stage (the cost model): full fine-tuning's backward is bound by its gradient offload, LoRA's
  // is not; LoRA's backward compute is ~2/3 of full's (one GEMM per weight instead of two, plus
  // the recompute forward).
  const Partition& fp = full->plan.partition;
  const Partition& lp = lora->plan.partition;
  for (int s = 1; s + 1 < fp.num_stages(); ++s) {
    const StageCost& fc = fp.costs[s];
    const StageCost& lc = lp.costs[s];
    EXPECT_GT(fc.backward_seconds, 3 * fc.backward_compute_seconds) << s;
    EXPECT_FALSE(lc.backward_upload) << s;  // S = 16 <= 2N: every backward runs from the slots
    EXPECT_DOUBLE_EQ(lc.backward_seconds, lc.backward_compute_seconds) << s;
    // The forward uploads the same weights in both (PCIe-bound: W / h2d > compute).
    EXPECT_GT(fc.forward_seconds, 1.5 * fc.forward_compute_seconds) << s;
    EXPECT_NEAR(lc.forward_seconds / fc.forward_seconds, 1, 0.01) << s;
    EXPECT_NEAR(lc.backward_compute_seconds / fc.backward_compute_seconds, 2.0 / 3, 0.02) << s;
  }
  // The step: faster, with the optimizer (0.3 s per billion parameters after the backward) nearly
  // gone, and still faster with a free optimizer (traffic and compute alone).
  EXPECT_LT(lora->step_seconds, 0.6 * full->step_seconds);
  o.cost.optimizer_seconds_per_billion_params = 0;
  auto lora0 = MakePlan(m, f.topology, f.facts, Job(2, 1, 1024), o);
  o.lora = {};
  auto full0 = MakePlan(m, f.topology, f.facts, Job(2, 1, 1024), o);
  ASSERT_TRUE(full0.ok() && lora0.ok());
  EXPECT_LT(lora0->step_seconds, 0.8 * full0->step_seconds);
  std::printf("Llama-2-7B, paper testbed, 2 x 1024, 16 stages: step %.3f s full, %.3f s LoRA "
              "(free optimizer: %.3f / %.3f s); D2H %.2f / %.2f GiB; H2D %.2f / %.2f GiB\n",
              full->step_seconds, lora->step_seconds, full0->step_seconds, lora0->step_seconds,
              full->d2h_bytes / 1073741824.0, lora->d2h_bytes / 1073741824.0,
              full->h2d_bytes / 1073741824.0, lora->h2d_bytes / 1073741824.0);
}

TEST(MakePlanLora, EverySchedulePlansIt) {
  const Fixture f = Load("rtx4090_2s_4sw_8gpu.xml");
  const model::ModelDescription m = Model("llama-3.1-8b-instruct.json");
  PlanOptions o;
  o.mip_time_limit_seconds = 2;
  auto full = MakePlan(m, f.topology, f.facts, Job(32, 1, 2048), o);
  o.lora.rank = 16;
  o.lora.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj"};
  auto lora = MakePlan(m, f.topology, f.facts, Job(32, 1, 2048), o);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(lora.ok()) << lora.status();
  auto row = [](const PlanReport& r, const std::string& name) {
    for (const Alternative& a : r.alternatives) {
      if (a.name == name) return a;
    }
    ADD_FAILURE() << name;
    return Alternative{};
  };
  for (const char* name : {"mobius", "roundrobin", "rr-shared", "zero"}) {
    EXPECT_LT(row(*lora, name).step_seconds, row(*full, name).step_seconds) << name;
    EXPECT_LT(row(*lora, name).d2h_bytes, row(*full, name).d2h_bytes) << name;
  }
  // Resident full fine-tuning needs 18 bytes/parameter on 8 GPUs of 24 GB (~6 GPUs' worth for
  // 8B, and stage 0 does not fit); with LoRA the frozen base is 2 bytes/parameter.
  EXPECT_FALSE(row(*full, "resident").available);
  EXPECT_TRUE(row(*lora, "resident").available);
  EXPECT_THAT(row(*lora, "zero").note, HasSubstr("LoRA: the frozen base still"));
  // The partitioners run on the LoRA problem: exact's J-optimum is no worse than the MIP's.
  if (MipAvailable()) {
    o.choose_by_simulation = false;
    auto exact = MakePlan(m, f.topology, f.facts, Job(32, 1, 2048), o);
    ASSERT_TRUE(exact.ok()) << exact.status();
    const Alternative mip = row(*exact, "mip");
    ASSERT_TRUE(mip.available) << mip.note;
    EXPECT_LE(exact->objective_seconds, mip.objective_seconds * (1 + 1e-9));
  }
}

// QLoRA (issue 33): an NF4 base holds every linear of the blocks as its blob (numeric::Nf4Bytes,
// ~0.52 bytes per value) in the host store and in every upload; the embedding, the norms and the
// head stay bf16. Llama-3.1-8B: per block q, o 4096 x 4096; k, v 1024 x 4096; gate, up, down
// 14336 x 4096.
TEST(MakePlanLora, Nf4BaseHostBytesAndUploads) {
  const Fixture f = Load("rtx4090_2s_4sw_8gpu.xml");
  const model::ModelDescription m = Model("llama-3.1-8b-instruct.json");
  PlanOptions o;
  o.compare = false;
  o.num_stages = 16;
  o.lora.rank = 8;
  auto bf16 = MakePlan(m, f.topology, f.facts, Job(32, 1, 2048), o);
  o.lora.base_nf4 = true;
  auto nf4 = MakePlan(m, f.topology, f.facts, Job(32, 1, 2048), o);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  ASSERT_TRUE(nf4.ok()) << nf4.status();
  EXPECT_FALSE(bf16->lora_base_nf4);
  EXPECT_TRUE(nf4->lora_base_nf4);
  int64_t saved = 0;
  for (int64_t n : {int64_t{4096} * 4096, int64_t{1024} * 4096, int64_t{1024} * 4096,
                    int64_t{4096} * 4096, int64_t{14336} * 4096, int64_t{14336} * 4096,
                    int64_t{14336} * 4096}) {
    saved += 32 * (2 * n - numeric::Nf4Bytes(n));
  }
  const MemoryEstimate& bm = bf16->plan.memory;
  const MemoryEstimate& nm = nf4->plan.memory;
  EXPECT_EQ(bm.host_model_state_bytes - nm.host_model_state_bytes, saved);
  EXPECT_EQ(bm.host_activation_bytes, nm.host_activation_bytes);
  // 6.98B of the 8.03B parameters are block linears: 0.52 x 6.98 + 2 x 1.05 bytes.
  const double per_param =
      static_cast<double>(nm.host_model_state_bytes) / static_cast<double>(nf4->parameters);
  EXPECT_GT(per_param, 0.70);
  EXPECT_LT(per_param, 0.75);
  // The same 16 stages upload a quarter of the linears' bytes, and the GPU slots shrink.
  EXPECT_LT(nf4->weight_upload_bytes, 0.40 * static_cast<double>(bf16->weight_upload_bytes));
  EXPECT_LT(nm.max_gpu_bytes, bm.max_gpu_bytes);
  std::printf("Llama-3.1-8B LoRA, 16 stages: host model state %.2f GiB bf16 base, %.2f GiB NF4 "
              "(%.3f B/param); weight uploads %.1f / %.1f GiB per step; step %.3f / %.3f s\n",
              bm.host_model_state_bytes / 1073741824.0, nm.host_model_state_bytes / 1073741824.0,
              per_param, bf16->weight_upload_bytes / 1073741824.0,
              nf4->weight_upload_bytes / 1073741824.0, bf16->step_seconds, nf4->step_seconds);
}

// The "done when": Llama-3.1-70B LoRA on the 8x RTX 4090 fixture with a 64 GiB host plans
// with an NF4 base and is refused, with the NF4 base named as the fix, with a bf16 one.
TEST(MakePlanLora, Llama70bNf4FitsA64GiBHost) {
  const Fixture f = Load("rtx4090_2s_4sw_8gpu.xml");
  const model::ModelDescription m = Model("llama-3.1-70b.json");
  PlanOptions o;
  o.compare = false;
  o.schedule = runtime::Schedule::kRoundRobin;
  o.mip_time_limit_seconds = 2;
  o.host_memory_bytes = int64_t{64} << 30;
  o.lora.rank = 8;
  auto bf16 = MakePlan(m, f.topology, f.facts, Job(4, 1, 1024), o);
  EXPECT_EQ(bf16.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bf16.status().message(), HasSubstr("host RAM too small"));
  EXPECT_THAT(bf16.status().message(), HasSubstr("or an NF4 base"));
  o.lora.base_nf4 = true;
  auto nf4 = MakePlan(m, f.topology, f.facts, Job(4, 1, 1024), o);
  ASSERT_TRUE(nf4.ok()) << nf4.status();
  EXPECT_LE(nf4->plan.memory.host_bytes, o.host_memory_bytes);
  EXPECT_LE(nf4->plan.memory.max_gpu_bytes, nf4->plan.memory.gpu_capacity_bytes);
  std::printf("Llama-3.1-70B NF4 LoRA, 8x4090, 4 x 1024: host %.2f GiB of 64 (model state %.2f "
              "GiB), GPU max %.2f GiB, %.0f tokens/s\n",
              nf4->plan.memory.host_bytes / 1073741824.0,
              nf4->plan.memory.host_model_state_bytes / 1073741824.0,
              nf4->plan.memory.max_gpu_bytes / 1073741824.0, nf4->tokens_per_second);
}

// The runtime's resident schedule does not train adapters (pipeline_worker.cc): a runtime plan
// with both is refused, so the configuration search never picks one; and a resident runtime plan
// needs the host store like any other.
TEST(MakePlanLora, RuntimeResidentRefusesLoraAndChecksTheHost) {
  const Fixture f = Load("rtx4090_2s_4sw_8gpu.xml");
  const model::ModelDescription m = Model("llama-3.1-8b-instruct.json");
  PlanOptions o;
  o.compare = false;
  o.schedule = runtime::Schedule::kResident;
  o.lora.rank = 8;
  auto lora = MakePlan(m, f.topology, f.facts, Job(8, 1, 1024), o);
  EXPECT_EQ(lora.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(lora.status().message(), HasSubstr("does not train adapters"));
  // Qwen3-0.6B full fine-tuning fits the eight GPUs resident, not a 4 GiB host's store.
  o.lora.rank = 0;
  o.host_memory_bytes = int64_t{4} << 30;
  auto full = MakePlan(Model("qwen3-0.6b.json"), f.topology, f.facts, Job(8, 1, 1024), o);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(full.status().message(), HasSubstr("host RAM too small"));
}

TEST(MakePlanLora, BadLoraOptions) {
  const Fixture f = Load("rtx4090_2s_4sw_8gpu.xml");
  const model::ModelDescription m = Model("qwen3-0.6b.json");
  auto plan = [&](PlanOptions o) {
    o.compare = false;
    return MakePlan(m, f.topology, f.facts, Job(8, 1, 512), o).status();
  };
  PlanOptions o;
  o.lora.rank = 8;
  o.optimizer_staleness = 1;
  EXPECT_THAT(plan(o).message(), HasSubstr("staleness 1 with LoRA"));
  o.optimizer_staleness = 0;
  o.lora.target_modules = {"c_attn"};
  EXPECT_EQ(plan(o).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan(o).message(), HasSubstr("lora.target_modules[0]"));
  o.lora.target_modules = {};
  o.lora.rank = 100000;
  EXPECT_THAT(plan(o).message(), HasSubstr("lora.rank"));
  o.lora.rank = -1;
  EXPECT_EQ(plan(o).code(), absl::StatusCode::kInvalidArgument);

  // A job's adapter options.
  train::AdapterOptions adapter;
  auto none = LoraFromAdapterOptions(adapter);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->enabled());
  adapter.type = "lora";
  adapter.rank = 32;
  adapter.target_modules = {"q_proj"};
  auto lora = LoraFromAdapterOptions(adapter);
  ASSERT_TRUE(lora.ok());
  EXPECT_EQ(lora->rank, 32);
  EXPECT_THAT(lora->target_modules, ElementsAre("q_proj"));
  adapter.type = "ia3";
  EXPECT_THAT(LoraFromAdapterOptions(adapter).status().message(), HasSubstr("adapter.type"));
}

}  // namespace
}  // namespace mobius::planner
