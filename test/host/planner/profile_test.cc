#include "host/planner/profile.h"

#include <optional>

#include "common/model/unit_workspace.h"
#include "gtest/gtest.h"
#include "host/planner/host_spec.h"
#include "test/host/planner/test_models.h"

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
  // 2x backward + the recompute, which leaves out the MLP output projection (down_proj [64, 128]:
  // 2 x 8192 FLOPs per token) as the runtime does.
  EXPECT_DOUBLE_EQ(p->units[1].backward_seconds, 3 * block - 2.0 * 8192 * tokens / rate);
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
  // Workspace (MemoryModel::kRuntime, the default): 64 MiB + the unit runners' own layout
  // (common/model/unit_workspace.h, checked by hand in unit_workspace_test).
  for (int u = 0; u < 4; ++u) {
    EXPECT_EQ(p->units[u].workspace_bytes,
              (int64_t{64} << 20) +
                  static_cast<int64_t>(
                      model::MakeWorkspaceLayout(m.config, m.units[u].kind, 2, 8).total))
        << "unit " << u;
  }
  // kTwoSlot (the published systems' rule): 64 MiB + 2 * tokens * max(C, I) * 2 bytes.
  AnalyticOptions two_slot;
  two_slot.memory_model = MemoryModel::kTwoSlot;
  absl::StatusOr<Profile> q = AnalyticProfile(m, {2, 8}, TestDevice(), two_slot);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->units[1].workspace_bytes, (int64_t{64} << 20) + 2 * 16 * 128 * 2);
  EXPECT_EQ(p->ParameterBytes(0, 4), 2 * 210240);
  EXPECT_DOUBLE_EQ(p->ForwardSeconds(1, 3), 2 * block);
}

// The published systems' setups recompute the whole forward (recompute_skips_mlp_output false).
TEST(AnalyticProfile, FullRecomputeIsThreeForwards) {
  AnalyticOptions o;
  o.recompute_skips_mlp_output = false;
  absl::StatusOr<Profile> p = AnalyticProfile(TinyLlama(), {2, 8}, TestDevice(), o);
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ(p->units[1].backward_seconds, 3 * p->units[1].forward_seconds);
  EXPECT_DOUBLE_EQ(p->units[3].backward_seconds, 3 * p->units[3].forward_seconds);  // the head
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

TEST(HostSpec, PresetsAndTheOptimizerRate) {
  LoadedFixture f = LoadFixture("rtx4090_2s_4sw_8gpu.xml");
  std::optional<HostSpec> h = HostSpecForTopology(f.topology);
  ASSERT_TRUE(h.has_value());
  // 2 sockets x 8 channels x DDR4-3200 x 8 bytes x 0.7.
  EXPECT_NEAR(h->memory_bytes_per_s, 0.7 * 2 * 8 * 3200e6 * 8, 1);
  // 8 threads x 400 M params/s: thread-bound, 0.3125 s per billion parameters.
  EXPECT_NEAR(h->OptimizerSeconds(1'000'000'000), 0.3125, 1e-9);
  EXPECT_NEAR(h->OptimizerThreadBytesPerSecond(), 8 * 4e8 * 30, 1);
  // 64 threads would want 768 GB/s: the DRAM caps them.
  h->optimizer_threads = 64;
  EXPECT_NEAR(h->OptimizerParamsPerSecond(), h->memory_bytes_per_s / 30, 1);
  EXPECT_TRUE(HostSpecForCpu("Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz", 2).has_value());
  EXPECT_FALSE(HostSpecForCpu("Some Future CPU", 1).has_value());
  EXPECT_FALSE(HostSpecForTopology(topology::Topology{}).has_value());
}

TEST(DeviceSpec, Rtx4090CarriesTheCalibratedProfile) {
  const DeviceSpec d = Rtx4090Spec();
  EXPECT_DOUBLE_EQ(d.gemm_peak_flops_per_s(false), 165.2e12);
  EXPECT_DOUBLE_EQ(d.gemm_peak_flops_per_s(true), 330.3e12);
  EXPECT_TRUE(d.has_kernel_model());
  EXPECT_DOUBLE_EQ(d.host_link_duplex_factor, 0.54);
  const DeviceSpec h = H100Spec();  // one rate for both accumulations, no calibration
  EXPECT_DOUBLE_EQ(h.gemm_peak_flops_per_s(true), h.peak_flops_per_s);
  EXPECT_FALSE(h.has_kernel_model());
  EXPECT_DOUBLE_EQ(h.host_link_duplex_factor, 1.0);
}

}  // namespace
}  // namespace mobius::planner
