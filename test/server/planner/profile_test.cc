#include "server/planner/profile.h"

#include "gtest/gtest.h"
#include "test/server/planner/test_models.h"

namespace mobius::planner {
namespace {

DeviceSpec TestDevice() {
  DeviceSpec d;
  d.name = "test";
  d.peak_flops_per_s = 1e12;
  d.efficiency = 0.5;  // 5e11 FLOP/s
  d.memory_bytes = int64_t{1} << 30;
  return d;
}

TEST(AnalyticProfile, TinyLlamaByHand) {
  const model::ModelDescription m = TinyLlama();
  absl::StatusOr<Profile> p = AnalyticProfile(m, {2, 8}, TestDevice());
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->units.size(), 4u);
  EXPECT_EQ(p->source, "analytic");
  const double tokens = 16, rate = 5e11;
  // Block forward FLOPs per token at T = 8: matmuls 2 * (4*64*64 + 3*64*128) = 81920; attention
  // 2 * 2 * 4 heads * 16 * (8 + 1) / 2 keys = 1152.
  const double block = (81920 + 1152) * tokens / rate;
  EXPECT_DOUBLE_EQ(p->units[0].forward_seconds, 0);
  EXPECT_DOUBLE_EQ(p->units[1].forward_seconds, block);
  EXPECT_DOUBLE_EQ(p->units[1].backward_seconds, 3 * block);  // 2x backward + recompute
  EXPECT_DOUBLE_EQ(p->units[3].forward_seconds, 2.0 * 1000 * 64 * tokens / rate);  // LM head
  EXPECT_EQ(p->units[0].parameter_bytes, 2 * 64000);
  EXPECT_EQ(p->units[1].parameter_bytes, 2 * 41088);
  EXPECT_EQ(p->units[3].parameter_bytes, 2 * 64064);
  EXPECT_EQ(p->units[1].gradient_bytes, 4 * 41088);  // fp32 gradients (the runtime)
  EXPECT_EQ(p->gradient_bytes_per_parameter, 4);
  EXPECT_EQ(p->units[0].boundary_bytes, 4 * 16);    // token ids
  EXPECT_EQ(p->units[1].boundary_bytes, 128 * 16);  // bf16 hidden state
  // Block saved bytes per token: bf16 {norm1 C, q, k, v, attn out, residual C, norm2 C} = 7*64,
  // SwiGLU 3*128, plus fp32 RMSNorm stats 2*4 and flash logsumexp 4*4 heads.
  EXPECT_EQ(p->units[1].saved_activation_bytes, ((7 * 64 + 3 * 128) * 2 + 8 + 16) * 16);
  // Workspace: 64 MiB + 2 * tokens * max(C, I) * 2 bytes.
  EXPECT_EQ(p->units[1].workspace_bytes, (int64_t{64} << 20) + 2 * 16 * 128 * 2);
  EXPECT_EQ(p->ParameterBytes(0, 4), 2 * 210240);
  EXPECT_DOUBLE_EQ(p->ForwardSeconds(1, 3), 2 * block);
}

TEST(AnalyticProfile, WithoutRecomputeBackwardIsTwiceForward) {
  AnalyticOptions o;
  o.recompute = false;
  absl::StatusOr<Profile> p = AnalyticProfile(TinyLlama(), {1, 16}, TestDevice(), o);
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ(p->units[2].backward_seconds, 2 * p->units[2].forward_seconds);
}

TEST(AnalyticProfile, RejectsBadShapeAndDevice) {
  EXPECT_EQ(AnalyticProfile(TinyLlama(), {0, 8}, TestDevice()).status().code(),
            absl::StatusCode::kInvalidArgument);
  DeviceSpec d = TestDevice();
  d.peak_flops_per_s = 0;
  EXPECT_EQ(AnalyticProfile(TinyLlama(), {1, 8}, d).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DeviceSpec, PresetsByGpuName) {
  auto s = DeviceSpecForGpuName("NVIDIA GeForce RTX 3090");
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->peak_flops_per_s, 71e12);
  s = DeviceSpecForGpuName("NVIDIA GeForce RTX 4090", uint64_t{20} << 30);
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->peak_flops_per_s, 165.2e12);
  EXPECT_EQ(s->memory_bytes, int64_t{20} << 30);  // the topology's figure wins
  s = DeviceSpecForGpuName("NVIDIA RTX A6000");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->memory_bytes, int64_t{49853760} * 1024);
  EXPECT_EQ(DeviceSpecForGpuName("NVIDIA H100 80GB HBM3")->name, "H100");
  EXPECT_EQ(DeviceSpecForGpuName("NVIDIA H200")->name, "H200");
  EXPECT_FALSE(DeviceSpecForGpuName("Matrox G200").has_value());
}

}  // namespace
}  // namespace mobius::planner
