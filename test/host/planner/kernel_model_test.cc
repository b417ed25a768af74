// The calibrated kernel model against the measurements it was calibrated on (RoundPipe's per-layer
// timings on one RTX 4090), and its size and precision behaviour.
#include "host/planner/kernel_model.h"

#include "common/model/unit_workspace.h"

#include <cmath>
#include <cstdio>

#include "common/model/model_config_parse.h"
#include "gtest/gtest.h"
#include "host/planner/profile.h"
#include "test/testing/paths.h"

namespace mobius::planner {
namespace {

model::ModelDescription Load(const std::string& name) {
  auto config = model::LoadModelConfig(testing::SourcePath("test/data/models/" + name));
  EXPECT_TRUE(config.ok()) << config.status();
  auto m = model::DescribeModel(*config);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

KernelDevice Rtx4090(bool fp16_accumulate) {
  const DeviceSpec d = Rtx4090Spec();
  return {d.gemm_peak_flops_per_s(fp16_accumulate), d.peak_flops_per_s, d.memory_bytes_per_s};
}

// RoundPipe artifact (ITcarrot/RoundPipe-artifact, roundpipe-timing, pp-simulate/run.sh): ms per
// microbatch of 4 x 2048 tokens on one RTX 4090, fp16 with fp16-accumulate GEMMs; backward without
// recompute; the LM head with its chunked loss.
struct Measured {
  const char* model;
  double block_forward_ms, block_backward_ms, head_forward_ms, head_backward_ms;
};
constexpr Measured kRoundPipeTimings[] = {
    {"llama-3.1-8b-instruct.json", 18.50, 41.21, 37.23, 74.50},
    {"qwen3-32b.json", 40.56, 91.17, 54.93, 108.29},
};

TEST(KernelModel, ReproducesRoundPipesPerLayerTimings) {
  const KernelModel k = *Rtx4090Spec().kernels;
  model::ActivationOptions chunked_loss;
  chunked_loss.logits_bytes = 0;  // RoundPipe's chunked linear + cross-entropy keeps no logits
  for (const Measured& m : kRoundPipeTimings) {
    const model::ModelDescription d = Load(m.model);
    const UnitSeconds block = KernelUnitSeconds(d, 1, 8192, 2048, Rtx4090(true), k, chunked_loss);
    const UnitSeconds head =
        KernelUnitSeconds(d, d.num_units() - 1, 8192, 2048, Rtx4090(true), k, chunked_loss);
    const double predicted[] = {block.forward * 1e3, block.backward * 1e3, head.forward * 1e3,
                                head.backward * 1e3};
    const double measured[] = {m.block_forward_ms, m.block_backward_ms, m.head_forward_ms,
                               m.head_backward_ms};
    const char* what[] = {"block fwd", "block bwd", "head fwd", "head bwd"};
    for (int i = 0; i < 4; ++i) {
      std::printf("%-28s %-9s predicted %7.2f ms, RoundPipe measured %7.2f ms (%.3f)\n", m.model,
                  what[i], predicted[i], measured[i], predicted[i] / measured[i]);
      EXPECT_NEAR(predicted[i] / measured[i], 1.0, 0.05) << m.model << " " << what[i];
    }
  }
}

// The MLP output projection's share of a block's forward (what our runtime's recompute leaves out):
// Llama-3.1-8B's down_proj [4096, 14336] is 58.7M of the block's 218M matmul weights, and at 8192
// compute-bound tokens its GEMM takes that share of the GEMM time; no other unit has one.
TEST(KernelModel, MlpOutputProjectionIsItsShareOfTheBlock) {
  const model::ModelDescription d = Load("llama-3.1-8b-instruct.json");
  const KernelModel k = *Rtx4090Spec().kernels;
  const UnitSeconds block = KernelUnitSeconds(d, 1, 8192, 2048, Rtx4090(false), k);
  const double gemm = 2.0 * 8192 * 4096 * 14336 / (Rtx4090(false).gemm_peak_flops_per_s * k.gemm_efficiency);
  EXPECT_NEAR(block.mlp_output / gemm, 1.0, 1e-9);
  EXPECT_LT(block.mlp_output, 0.3 * block.forward);
  EXPECT_EQ(KernelUnitSeconds(d, d.num_units() - 1, 8192, 2048, Rtx4090(false), k).mlp_output, 0);
  ASSERT_NE(model::MlpOutputProjection(d, 1), nullptr);
  EXPECT_EQ(model::MlpOutputProjection(d, 1)->name, "model.layers.0.mlp.down_proj.weight");
  const model::ModelDescription gpt2 = Load("gpt2.json");
  ASSERT_NE(model::MlpOutputProjection(gpt2, 2), nullptr);
  EXPECT_EQ(model::MlpOutputProjection(gpt2, 2)->name, "transformer.h.1.mlp.c_proj.weight");
  EXPECT_EQ(model::MlpOutputProjection(gpt2, 0), nullptr);
}

TEST(KernelModel, SmallMicrobatchesAreMemoryBound) {
  const model::ModelDescription d = Load("llama-3.1-8b-instruct.json");
  const KernelModel k = *Rtx4090Spec().kernels;
  // Per-token cost is flat while the GEMMs are compute-bound and grows when they are not.
  auto per_token = [&](int64_t tokens) {
    return KernelUnitSeconds(d, 1, tokens, 2048, Rtx4090(true), k).forward / tokens;
  };
  EXPECT_NEAR(per_token(2048) / per_token(8192), 1.0, 0.01);
  EXPECT_GT(per_token(16) / per_token(8192), 10.0);  // 16 tokens: the weights' reads dominate
  EXPECT_GT(per_token(128) / per_token(8192), 1.5);  // below the ridge (~300 tokens at K, N = 4096)
}

// A mixture of experts (Qwen3-30B-A3B: 128 experts, 8 per token): each expert GEMM over its k / E
// share of the tokens plus its call's fixed cost, the permutation's traffic and a host
// synchronisation each way; an expert's adapter over its routed rows only.
TEST(KernelModel, MixtureOfExpertsPaysPerExpertCallsAndTheRoutedRowsOnly) {
  const model::ModelDescription d = Load("qwen3-30b-a3b.json");
  const KernelModel k = *Rtx4090Spec().kernels;
  KernelModel free = k;
  free.gemm_call_seconds = 0;
  free.host_sync_seconds = 0;
  const int64_t tokens = 8192;
  const UnitSeconds with = KernelUnitSeconds(d, 1, tokens, 2048, Rtx4090(true), k);
  const UnitSeconds without = KernelUnitSeconds(d, 1, tokens, 2048, Rtx4090(true), free);
  // 3 x 128 expert calls forward, 6 x 128 backward; one synchronisation each.
  EXPECT_NEAR(with.forward - without.forward, 384 * 5e-6 + 20e-6, 1e-9);
  EXPECT_NEAR(with.backward - without.backward, 768 * 5e-6 + 20e-6, 1e-9);
  std::printf("Qwen3-30B-A3B block, 8192 tokens: forward %.2f ms (%.2f ms fixed costs)\n",
              1e3 * with.forward, 1e3 * (with.forward - without.forward));

  auto attention = MakeLoraLayout(d, {.rank = 16, .target_modules = {"q_proj"}});
  auto experts = MakeLoraLayout(d, {.rank = 16, .target_modules = {"q_proj", "up_proj"}});
  ASSERT_TRUE(attention.ok() && experts.ok());
  const KernelDevice dev = Rtx4090(true);
  const double a = KernelUnitSeconds(d, 1, tokens, 2048, dev, free, {}, &*attention).forward;
  const double e = KernelUnitSeconds(d, 1, tokens, 2048, dev, free, {}, &*experts).forward;
  // 128 up_proj adapters, each over 8192 x 8 / 128 = 512 rows: memory-bound, r (C + Ie) x 4 bytes
  // of A and B plus the rows' traffic; far less than 128 adapters over all 8192 rows would cost.
  const double per_adapter = (e - a) / 128;
  const double bw = Rtx4090Spec().memory_bytes_per_s * k.memory_efficiency;
  const double all_rows = 2.0 * (8192.0 * (2048 + 768) + 8192.0 * 16 * 2) * 2 / bw;
  EXPECT_GT(per_adapter, 0.0);
  EXPECT_LT(per_adapter, all_rows / 8);
}

TEST(KernelModel, Fp32AccumulateHalvesTheGemmRate) {
  const model::ModelDescription d = Load("llama-3.1-8b-instruct.json");
  const KernelModel k = *Rtx4090Spec().kernels;
  const UnitSeconds h16 = KernelUnitSeconds(d, d.num_units() - 1, 8192, 2048, Rtx4090(true), k);
  const UnitSeconds h32 = KernelUnitSeconds(d, d.num_units() - 1, 8192, 2048, Rtx4090(false), k);
  // The head is one GEMM plus the loss's elementwise traffic: a bit under 2x.
  EXPECT_GT(h32.forward / h16.forward, 1.7);
  EXPECT_LT(h32.forward / h16.forward, 2.0);
  // Attention runs at the fp32-accumulate peak either way, so a block's ratio is lower.
  const double b = KernelUnitSeconds(d, 1, 8192, 2048, Rtx4090(false), k).forward /
                   KernelUnitSeconds(d, 1, 8192, 2048, Rtx4090(true), k).forward;
  EXPECT_GT(b, 1.5);
  EXPECT_LT(b, h32.forward / h16.forward);
}

// Our runtime's fp16 mode sums in fp16 only into fp16 outputs (worker/model/linear.h): the forward
// GEMMs run at the fp16-accumulate peak, the LM head (fp32 logits) and every backward GEMM at the
// fp32-accumulate one. The published systems (all GEMMs fp16) leave the field 0.
TEST(KernelModel, Fp32OutputGemmsRunAtTheFp32AccumulatePeak) {
  const model::ModelDescription d = Load("llama-3.1-8b-instruct.json");
  const KernelModel k = *Rtx4090Spec().kernels;
  KernelDevice ours = Rtx4090(true);
  ours.fp32_output_gemm_peak_flops_per_s = Rtx4090Spec().gemm_peak_flops_per_s(false);
  const int64_t head = d.num_units() - 1;
  for (int64_t u : {int64_t{1}, head}) {
    const UnitSeconds o = KernelUnitSeconds(d, u, 8192, 2048, ours, k);
    const UnitSeconds h16 = KernelUnitSeconds(d, u, 8192, 2048, Rtx4090(true), k);
    const UnitSeconds h32 = KernelUnitSeconds(d, u, 8192, 2048, Rtx4090(false), k);
    EXPECT_DOUBLE_EQ(o.backward, h32.backward) << "unit " << u;
    EXPECT_DOUBLE_EQ(o.forward, u == head ? h32.forward : h16.forward) << "unit " << u;
  }
  AnalyticOptions a;
  a.fp16_accumulate = true;
  a.fp16_accumulate_fp32_outputs = false;
  absl::StatusOr<Profile> p = AnalyticProfile(d, {4, 2048}, Rtx4090Spec(), a);
  ASSERT_TRUE(p.ok()) << p.status();
  const UnitSeconds block = KernelUnitSeconds(d, 1, 8192, 2048, ours, k, a.activations);
  EXPECT_DOUBLE_EQ(p->units[1].backward_seconds, block.backward + block.forward - block.mlp_output);
}

// Our runtime's fp16 backward (KernelDevice::half_backward): a block's backward GEMMs at the
// fp16-accumulate peak plus, per weight, the fp16 dW written, read and added into the fp32 one
// (10 bytes per element beyond the GEMM once per call, an MLP weight's further chunks 2 more) and the rounding of the fp32 dy of
// the attention and MLP output projections (6 bytes per element); the head's logits, dX and dW
// fp16, each token chunk's dW added into the fp32 gradient (10 bytes per element per chunk).
// By hand for Llama-3.1-8B at 8192 tokens (the MLP's token chunks: model::MlpChunkRows).
TEST(KernelModel, HalfBackwardRunsTheBlocksBackwardGemmsAtTheFp16Peak) {
  const model::ModelDescription d = Load("llama-3.1-8b-instruct.json");
  const KernelModel k = *Rtx4090Spec().kernels;
  KernelDevice ours = Rtx4090(true);
  ours.fp32_output_gemm_peak_flops_per_s = Rtx4090Spec().gemm_peak_flops_per_s(false);
  KernelDevice half = ours;
  half.half_backward = true;
  const int64_t head = d.num_units() - 1, t = 8192;
  // The head: fp16 logits, dX and dW at the fp16 peak, plus the adds of its 2 token chunks of
  // 4096 rows (model::HeadChunkRows at 8192 tokens).
  const UnitSeconds fp32_head = KernelUnitSeconds(d, head, t, 2048, ours, k);
  const UnitSeconds half_head = KernelUnitSeconds(d, head, t, 2048, half, k);
  const UnitSeconds all16_head = KernelUnitSeconds(d, head, t, 2048, Rtx4090(true), k);
  EXPECT_DOUBLE_EQ(half_head.forward, all16_head.forward);
  const double vc = static_cast<double>(d.config.vocab_size) * d.config.hidden_size;
  const double bw = Rtx4090Spec().memory_bytes_per_s * k.memory_efficiency;
  EXPECT_NEAR(half_head.backward, all16_head.backward + 10.0 * 2 * vc / bw, 1e-12);
  EXPECT_LT(half_head.backward, 0.75 * fp32_head.backward);
  EXPECT_LT(half_head.forward, 0.6 * fp32_head.forward);
  const UnitSeconds o = KernelUnitSeconds(d, 1, t, 2048, ours, k);
  const UnitSeconds h = KernelUnitSeconds(d, 1, t, 2048, half, k);
  const UnitSeconds all16 = KernelUnitSeconds(d, 1, t, 2048, Rtx4090(true), k);
  EXPECT_DOUBLE_EQ(h.forward, o.forward);
  // Llama-3.1-8B: C 4096, I 14336, KV 1024; MLP chunk rows at 8192 tokens: ChunkRows.
  const double c = 4096, inter = 14336, kv = 1024;
  const double chunks =
      std::ceil(t / static_cast<double>(model::MlpChunkRows(d.config, t, 0)));
  const double adds =
      (10.0 * (2 * c * c + 2 * c * kv) + (10.0 + 2.0 * (chunks - 1)) * 3 * c * inter) / bw;
  const double rounding = 6.0 * t * c * 2 / bw;
  EXPECT_NEAR(h.backward, all16.backward + adds + rounding, 1e-12);
  EXPECT_LT(h.backward, 0.6 * o.backward + adds + rounding);
}

TEST(KernelModel, AnalyticProfileUsesItForTheRtx4090Only) {
  const model::ModelDescription d = Load("llama-3.1-8b-instruct.json");
  AnalyticOptions o;
  o.fp16_accumulate = true;
  absl::StatusOr<Profile> p = AnalyticProfile(d, {4, 2048}, Rtx4090Spec(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->compute_model, "kernel model");
  const UnitSeconds block =
      KernelUnitSeconds(d, 1, 8192, 2048, Rtx4090(true), *Rtx4090Spec().kernels, o.activations);
  EXPECT_DOUBLE_EQ(p->units[1].forward_seconds, block.forward);
  // The recompute without the MLP output projection (the runtime's).
  EXPECT_DOUBLE_EQ(p->units[1].backward_seconds, block.backward + block.forward - block.mlp_output);
  o.use_kernel_model = false;
  p = AnalyticProfile(d, {4, 2048}, Rtx4090Spec(), o);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->compute_model, "flat 0.50");
  const double flops = model::UnitFlops(d, 1, 2048).forward_flops * 8192;
  EXPECT_NEAR(p->units[1].forward_seconds, flops / (330.3e12 * 0.5), 1e-12);
  p = AnalyticProfile(d, {4, 2048}, Rtx3090Spec(), {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->compute_model, "flat 0.50");
}

}  // namespace
}  // namespace mobius::planner
