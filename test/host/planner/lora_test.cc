// LoRA mode in the planner's profile and cost model (host/planner/lora.h): the adapters'
// layout, FLOPs with the base frozen, the analytic profile (flat by hand, the kernel model's
// frozen GEMMs), a measured profile converted, and the optimizer's parameters in the problem and
// the simulator's stages.
#include "host/planner/lora.h"

#include "common/model/model_config_parse.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/planner/cost_model.h"
#include "host/planner/measured_profile.h"
#include "host/planner/profile.h"
#include "host/planner/sim/schedules.h"
#include "test/host/planner/test_models.h"

namespace mobius::planner {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

DeviceSpec TestDevice() {
  DeviceSpec d;
  d.name = "test";
  d.peak_flops_per_s = 1e12;
  d.efficiency = 0.5;  // 5e11 FLOP/s
  d.memory_bytes = int64_t{1} << 30;
  return d;
}

LoraLayout TinyLora(int64_t rank = 4) {
  absl::StatusOr<LoraLayout> l = MakeLoraLayout(TinyLlama(), {rank, {}});
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? *l : LoraLayout{};
}

model::ModelDescription Llama8b() {
  auto config =
      model::LoadModelConfig(testing::SourcePath("test/data/models/llama-3.1-8b-instruct.json"));
  EXPECT_TRUE(config.ok()) << config.status();
  auto m = model::DescribeModel(*config);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

TEST(LoraLayout, DefaultTargetsAndCounts) {
  // TinyLlama: C = 64, K = 64. q_proj 64 -> 64 and v_proj 64 -> 64 at rank 4: 4 x 128 each.
  const LoraLayout l = TinyLora();
  EXPECT_THAT(l.target_modules, ElementsAre("q_proj", "v_proj"));
  ASSERT_EQ(l.unit_modules.size(), 4u);
  EXPECT_TRUE(l.unit_modules[0].empty());
  EXPECT_EQ(l.unit_modules[1].size(), 2u);
  EXPECT_TRUE(l.unit_modules[3].empty());
  EXPECT_EQ(l.UnitParameters(0), 0);
  EXPECT_EQ(l.UnitParameters(1), 1024);
  EXPECT_EQ(l.UnitParameters(3), 0);
  EXPECT_EQ(l.parameters, 2048);
  EXPECT_EQ(l.norm_chunks, 8);  // A and B of 2 modules x 2 blocks, 256 elements each

  // Llama-3.1-8B, PEFT's default (q_proj 4096 -> 4096, v_proj 4096 -> 1024) at rank 8:
  // 8 x (8192 + 5120) = 106496 per block, 32 blocks; each tensor one 64 Ki-element chunk.
  absl::StatusOr<LoraLayout> big = MakeLoraLayout(Llama8b(), {8, {}});
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->parameters, 3407872);
  EXPECT_EQ(big->norm_chunks, 128);
  // All seven modules at rank 16: q 8192, k 5120, v 5120, o 8192, gate/up 18432, down 18432.
  big = MakeLoraLayout(
      Llama8b(),
      {16, {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}});
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->parameters, 16 * (8192 + 5120 + 5120 + 8192 + 3 * 18432) * 32);
}

TEST(LoraLayout, BadTargetsAndRanksNameTheField) {
  absl::StatusOr<LoraLayout> l = MakeLoraLayout(TinyLlama(), {4, {"c_attn"}});
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(l.status().message(), HasSubstr("lora.target_modules[0]"));
  l = MakeLoraLayout(TinyLlama(), {4, {"q_proj", "q_proj"}});
  EXPECT_THAT(l.status().message(), HasSubstr("listed twice"));
  l = MakeLoraLayout(TinyLlama(), {65, {}});
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(l.status().message(), HasSubstr("lora.rank"));
}

TEST(LoraProfile, FlatTinyLlamaByHand) {
  const model::ModelDescription m = TinyLlama();
  AnalyticOptions o;
  o.lora = TinyLora();
  absl::StatusOr<Profile> p = AnalyticProfile(m, {2, 8}, TestDevice(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(p->lora.has_value());
  const double tokens = 16, rate = 5e11;
  // Block per token at T = 8: matmuls 81920, attention 1152, adapters 2 x 1024 (x A^T, h B^T).
  // Backward with the base frozen: the matmuls' input gradients 81920, attention 2 x 1152, the
  // adapters 2 x 2048; plus the recompute forward.
  const double forward = 81920 + 1152 + 2048;
  EXPECT_DOUBLE_EQ(p->units[1].forward_seconds, forward * tokens / rate);
  // The recompute leaves out the MLP output projection (down_proj [64, 128], not adapted here).
  EXPECT_DOUBLE_EQ(p->units[1].backward_seconds,
                   (81920 + 2 * 1152 + 2 * 2048 + forward - 2 * 8192) * tokens / rate);
  // The head's LM head: dgrad only, so backward with recompute = 2 x forward (3 x in full FT).
  EXPECT_DOUBLE_EQ(p->units[3].backward_seconds, 2 * p->units[3].forward_seconds);
  EXPECT_DOUBLE_EQ(p->units[0].backward_seconds, 0);
  // W = bf16 base + fp32 adapters; G = fp32 adapter gradients only.
  EXPECT_EQ(p->units[1].parameter_bytes, 2 * 41088 + 4 * 1024);
  EXPECT_EQ(p->units[1].gradient_bytes, 4 * 1024);
  EXPECT_EQ(p->units[0].gradient_bytes, 0);
  EXPECT_EQ(p->units[3].parameter_bytes, 2 * 64064);
  EXPECT_EQ(p->units[3].gradient_bytes, 0);
  // Activations as in full fine-tuning; the workspace gains the adapters' part (the runtime's,
  // worker/model/unit_runner_internal.h): per adapted module h [N, r] fp32 and one gh, the
  // widest module's dropped-out input [N, in] fp32, and (every unit, the base frozen) the norm
  // gradients' sink, 2 x max(C, hd) fp32. TinyLora: rank 4 on q_proj and v_proj (in 64).
  absl::StatusOr<Profile> full = AnalyticProfile(m, {2, 8}, TestDevice());
  ASSERT_TRUE(full.ok());
  for (size_t u = 0; u < 4; ++u) {
    EXPECT_EQ(p->units[u].boundary_bytes, full->units[u].boundary_bytes);
    EXPECT_EQ(p->units[u].saved_activation_bytes, full->units[u].saved_activation_bytes);
    const bool block = u == 1 || u == 2;
    const int64_t adapters = block ? 4 * 16 * 4 * 3 + 4 * 16 * 64 : 0;
    EXPECT_EQ(p->units[u].workspace_bytes, full->units[u].workspace_bytes + adapters + 8 * 64)
        << "unit " << u;
  }
}

TEST(LoraProfile, KernelModelDropsTheWeightGradientGemms) {
  const model::ModelDescription m = Llama8b();
  absl::StatusOr<LoraLayout> lora = MakeLoraLayout(m, {8, {}});
  ASSERT_TRUE(lora.ok());
  const DeviceSpec d = Rtx4090Spec();
  KernelModel k = *d.kernels;
  k.elementwise_passes_forward = k.elementwise_passes_backward = 0;  // GEMMs and attention only
  KernelDevice kd{d.peak_flops_per_s, d.peak_flops_per_s, d.memory_bytes_per_s};
  const int64_t t = 8192;
  const UnitSeconds full = KernelUnitSeconds(m, 1, t, 2048, kd, k);
  const UnitSeconds frozen = KernelUnitSeconds(m, 1, t, 2048, kd, k, {}, &*lora);
  const double attention = model::UnitAttentionForwardFlopsPerToken(m, 1, 2048) * t /
                           (d.peak_flops_per_s * k.gemm_efficiency);
  const double gemms = full.forward - attention;
  // The adapters' GEMMs are memory-bound at rank 8: bytes a (T in + in r + T r) and
  // a (T r + r out + T out) over 0.9 x 1008 GB/s, for q (4096 -> 4096) and v (4096 -> 1024).
  auto bytes = [&](double in, double out) {
    return 2 * (t * in + in * 8 + t * 8) + 2 * (t * 8 + 8 * out + t * out);
  };
  const double adapters = (bytes(4096, 4096) + bytes(4096, 1024)) / (0.9 * 1008e9);
  EXPECT_NEAR(frozen.forward - full.forward, adapters, 1e-12);
  // Backward: one GEMM (dX) per frozen weight instead of two, attention unchanged, the adapters
  // twice their forward.
  EXPECT_NEAR(frozen.backward, full.backward - gemms + 2 * adapters, 1e-12);
  EXPECT_LT(frozen.backward, 0.7 * full.backward);
  // A frozen embedding has no backward at all (default elementwise passes included).
  EXPECT_GT(KernelUnitSeconds(m, 0, t, 2048, kd, *d.kernels).backward, 0);
  EXPECT_EQ(KernelUnitSeconds(m, 0, t, 2048, kd, *d.kernels, {}, &*lora).backward, 0);
}

TEST(LoraProfile, MeasuredProfileConvertsLikeTheFlatModel) {
  // The flat analytic profile is exactly FLOPs over one rate, so the conversion of the full
  // fine-tuning profile (scaling by the FLOP ratios) must give the LoRA profile.
  const model::ModelDescription m = TinyLlama();
  absl::StatusOr<Profile> full = AnalyticProfile(m, {2, 8}, TestDevice());
  AnalyticOptions o;
  o.lora = TinyLora();
  absl::StatusOr<Profile> want = AnalyticProfile(m, {2, 8}, TestDevice(), o);
  ASSERT_TRUE(full.ok() && want.ok());
  const Profile got = LoraFromMeasuredProfile(*full, m, *o.lora);
  ASSERT_TRUE(got.lora.has_value());
  for (size_t u = 0; u < got.units.size(); ++u) {
    EXPECT_NEAR(got.units[u].forward_seconds, want->units[u].forward_seconds, 1e-18) << u;
    EXPECT_NEAR(got.units[u].backward_seconds, want->units[u].backward_seconds, 1e-18) << u;
    EXPECT_EQ(got.units[u].parameter_bytes, want->units[u].parameter_bytes) << u;
    EXPECT_EQ(got.units[u].gradient_bytes, want->units[u].gradient_bytes) << u;
  }
}

TEST(LoraProfile, TheOptimizerUpdatesTheAdaptersOnly) {
  const model::ModelDescription m = TinyLlama();
  LoadedFixture f = LoadFixture("paper_testbed_2s_2sw_8x3090.xml");
  AnalyticOptions o;
  o.lora = TinyLora();
  absl::StatusOr<Profile> p = AnalyticProfile(m, {2, 8}, Rtx3090Spec(), o);
  ASSERT_TRUE(p.ok());
  absl::StatusOr<PartitionProblem> prob =
      MakePartitionProblem(*p, m, f.topology, f.facts, {0, 4}, 4, 0);
  ASSERT_TRUE(prob.ok()) << prob.status();
  EXPECT_DOUBLE_EQ(prob->optimizer_seconds, 2048 / 1e9 * 0.3);
  EXPECT_EQ(prob->units[0].optimizer_parameters, 0);
  EXPECT_EQ(prob->units[1].optimizer_parameters, 1024);
  EXPECT_EQ(prob->units[1].gradient_bytes, 4 * 1024);
  // The simulator's stages: the optimizer's parameters and time follow the adapters.
  absl::StatusOr<Partition> part = ScorePartition(*prob, {{0, 2}, {2, 4}});
  ASSERT_TRUE(part.ok());
  const std::vector<sim::SimStage> stages = sim::MakeSimStages(*prob, *part);
  EXPECT_EQ(stages[0].parameters, 1024);
  EXPECT_EQ(stages[1].parameters, 1024);
  EXPECT_DOUBLE_EQ(stages[0].optimizer_seconds, prob->optimizer_seconds / 2);
  EXPECT_EQ(stages[1].gradient_bytes, 4 * 1024);

  // Full fine-tuning: the bf16 weights' parameters (W / 2), as before.
  absl::StatusOr<Profile> fp = AnalyticProfile(m, {2, 8}, Rtx3090Spec());
  ASSERT_TRUE(fp.ok());
  absl::StatusOr<PartitionProblem> fprob =
      MakePartitionProblem(*fp, m, f.topology, f.facts, {0, 4}, 4, 0);
  ASSERT_TRUE(fprob.ok());
  EXPECT_EQ(fprob->units[1].optimizer_parameters, 41088);
  EXPECT_DOUBLE_EQ(fprob->optimizer_seconds, 210240 / 1e9 * 0.3);
}

}  // namespace
}  // namespace mobius::planner
