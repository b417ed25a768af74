#include "host/planner/estimator.h"

#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/host/planner/test_models.h"

namespace mobius::planner {
namespace {

using ::testing::ElementsAre;

// The GPU side under the conservative two-slot rule (MemoryModel::kTwoSlot, the published systems'
// setups); the runtime's rule: RuntimeGpuBytesByHand below.
AnalyticOptions TwoSlotProfile() {
  AnalyticOptions o;
  o.memory_model = MemoryModel::kTwoSlot;
  return o;
}
CostOptions TwoSlotCost() {
  CostOptions o;
  o.memory_model = MemoryModel::kTwoSlot;
  return o;
}

// The tiny Llama (units: embedding, 2 blocks, head) on the paper testbed, 4 microbatches of
// 2 x 8 tokens, cut into `stages` on as many GPUs, under the two-slot rule; `ok` false (and the
// test failed) where a step does not work.
struct TinyLlamaSetup {
  model::ModelDescription m = TinyLlama();
  LoadedFixture f = LoadFixture("paper_testbed_2s_2sw_8x3090.xml");
  int microbatches = 4;
  absl::StatusOr<Profile> prof = AnalyticProfile(m, {2, 8}, Rtx3090Spec(), TwoSlotProfile());
  absl::StatusOr<PartitionProblem> p = absl::UnknownError("not made");
  absl::StatusOr<Partition> part = absl::UnknownError("not made");
  absl::StatusOr<Mapping> map = absl::UnknownError("not made");
  bool ok = false;

  explicit TinyLlamaSetup(const std::vector<StageRange>& stages) {
    EXPECT_TRUE(prof.ok()) << prof.status();
    if (!prof.ok()) return;
    p = MakePartitionProblem(*prof, m, f.topology, f.facts, {0, 4, 1}, microbatches, 0,
                             TwoSlotCost());
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return;
    part = ScorePartition(*p, stages);
    map = SequentialMapping(f.facts, {0, 4, 1}, static_cast<int>(stages.size()));
    EXPECT_TRUE(part.ok()) << part.status();
    EXPECT_TRUE(map.ok()) << map.status();
    ok = part.ok() && map.ok();
  }
  MemoryEstimate Estimate(const EstimatorOptions& o = {}) const {
    return EstimateMemory(m, *prof, *p, *part, *map, microbatches, o);
  }
};

TEST(EstimateMemory, TinyLlamaByHand) {
  const TinyLlamaSetup t({{0, 2}, {2, 4}});
  ASSERT_TRUE(t.ok);
  const model::ModelDescription& m = t.m;
  const auto& prof = t.prof;
  const auto& p = t.p;
  const auto& part = t.part;
  const auto& map = t.map;
  const int microbatches = t.microbatches;
  const MemoryEstimate e = t.Estimate();

  // 16 tokens per microbatch. Host: 18 B x 210240 params (bf16 weights 2 + fp32 gradients 4 +
  // master and moments 12); checkpoints: stage 0 input = token ids 4 x 16 x 4 microbatches = 256,
  // stage 1 input = hidden 128 x 16 x 4 = 8192; the fp32 gradient into stage 1's input, 2 x 8192;
  // two worker processes (the third GPU runs nothing); the GPUs are real (not host memory).
  EXPECT_EQ(e.host_model_state_bytes, 18 * 210240);
  EXPECT_EQ(e.host_activation_bytes, 256 + 8192);
  EXPECT_EQ(e.host_activation_grad_bytes, 16384);
  EXPECT_EQ(e.host_process_bytes, 2 * kWorkerProcessBytes);
  EXPECT_EQ(e.host_emulated_device_bytes, 0);
  EXPECT_EQ(e.host_bytes, 3784320 + 8448 + 16384 + 2 * kWorkerProcessBytes);
  EXPECT_EQ(e.pinned_bytes, 6 * 210240 + 8448);

  // GPU: slot = weights (bf16) + gradients (fp32, what the runtime keeps) + per unit (input +
  // saved) for one microbatch.
  // Block saved = 1688 B/token (see profile_test), input 128 B/token; embedding input 4 B/token.
  const int64_t block_act = (128 + 1688) * 16;
  const int64_t slot0 = (2 + 4) * (64000 + 41088) + 4 * 16 + block_act;
  const int64_t slot1 = (2 + 4) * (41088 + 64064) + block_act + (128 + /*head saved*/ 0) * 16 +
                        prof->units[3].saved_activation_bytes;
  // Reserved: 1 GiB margin + workspace 64 MiB + 2 x 16 tokens x max(C, I) x 2 bytes.
  const int64_t reserved = (int64_t{1} << 30) + (int64_t{64} << 20) + 2 * 16 * 128 * 2;
  EXPECT_EQ(p->reserved_bytes, reserved);
  EXPECT_THAT(e.gpu_bytes, ElementsAre(reserved + 2 * slot0, reserved + 2 * slot1, 0));
  EXPECT_EQ(e.max_gpu_bytes, reserved + 2 * std::max(slot0, slot1));
  EXPECT_EQ(e.gpu_capacity_bytes, int64_t{24850752} * 1024);
  // Head saved bytes per token: final norm out 64 x 2 + rstd 4 + logits 1000 x 4 + labels 4.
  EXPECT_EQ(prof->units[3].saved_activation_bytes, (128 + 4 + 4000 + 4) * 16);

  // Emulated on the CPU backend: each GPU's estimate less the margin is host memory, plus the
  // fp32 copy the CPU GEMM makes of its largest weight: on GPU 0 the largest block matrix (the
  // embedding is a lookup, no GEMM), MLP 128 x 64; on GPU 1 the lm_head, 1000 x 64.
  EstimatorOptions emulated;
  emulated.devices_in_host_memory = true;
  const MemoryEstimate ee = EstimateMemory(m, *prof, *p, *part, *map, microbatches, emulated);
  const int64_t margin = emulated.memory_margin_bytes;
  EXPECT_EQ(ee.host_emulated_device_bytes,
            (reserved + 2 * slot0 - margin + 4 * 8192) + (reserved + 2 * slot1 - margin + 4 * 64000));
  EXPECT_EQ(ee.host_bytes, e.host_bytes + ee.host_emulated_device_bytes);

  // bf16 gradients (the paper's accounting): 16 bytes/parameter on the host, 4 pinned.
  AnalyticOptions bf16 = TwoSlotProfile();
  bf16.gradient_bytes_per_parameter = 2;
  absl::StatusOr<Profile> prof16 = AnalyticProfile(m, {2, 8}, Rtx3090Spec(), bf16);
  ASSERT_TRUE(prof16.ok());
  const MemoryEstimate e16 = EstimateMemory(m, *prof16, *p, *part, *map, microbatches);
  EXPECT_EQ(e16.host_model_state_bytes, 16 * 210240);
  EXPECT_EQ(e16.pinned_bytes, 4 * 210240 + 8448);

  // The runtime's asynchronous optimizer (staleness 1) keeps a second bf16 weight copy, pinned
  // like the first: + 2 bytes/parameter in both.
  EstimatorOptions stale;
  stale.stale_weight_copy_bytes_per_parameter = 2;
  const MemoryEstimate es = EstimateMemory(m, *prof, *p, *part, *map, microbatches, stale);
  EXPECT_EQ(es.host_model_state_bytes, 20 * 210240);
  EXPECT_EQ(es.host_bytes, e.host_bytes + 2 * 210240);
  EXPECT_EQ(es.pinned_bytes, 8 * 210240 + 8448);
  // ... and two copies of the activation checkpoints (store_layout.h).
  stale.checkpoint_copies = 2;
  const MemoryEstimate eb = EstimateMemory(m, *prof, *p, *part, *map, microbatches, stale);
  EXPECT_EQ(eb.host_activation_bytes, 2 * e.host_activation_bytes);
  EXPECT_EQ(eb.host_activation_grad_bytes, e.host_activation_grad_bytes);
  EXPECT_EQ(eb.host_bytes, es.host_bytes + e.host_activation_bytes);
  EXPECT_EQ(eb.pinned_bytes, 8 * 210240 + 2 * 8448);
}

// MemoryModel::kRuntime, what worker/runtime allocates per GPU (pipeline_worker.cc): reserved =
// margin + the largest unit workspace (the runners' own layout) + the fixed activation buffers
// (6 hidden states + 8 bytes per token), then two slots of W + G for the GPU's largest stage and
// the inputs of its stage's units, each once.
// The activation gradients are one fp32 buffer per microbatch, however many backward boundaries
// it crosses (the store hands it down: common/run/store_layout.h): 4 stages, 3 boundaries, the same
// 2 x 8192 bytes as 2 stages; the checkpoints still count every stage input.
TEST(EstimateMemory, ActivationGradientsAreOneBufferPerMicrobatch) {
  const TinyLlamaSetup t({{0, 1}, {1, 2}, {2, 3}, {3, 4}});
  ASSERT_TRUE(t.ok);
  const MemoryEstimate e = t.Estimate();
  EXPECT_EQ(e.host_activation_bytes, 256 + 3 * 8192);
  EXPECT_EQ(e.host_activation_grad_bytes, 16384);
}

TEST(EstimateMemory, RuntimeGpuBytesByHand) {
  const model::ModelDescription m = TinyLlama();
  LoadedFixture f = LoadFixture("paper_testbed_2s_2sw_8x3090.xml");
  absl::StatusOr<Profile> prof = AnalyticProfile(m, {2, 8}, Rtx3090Spec());
  ASSERT_TRUE(prof.ok());
  absl::StatusOr<PartitionProblem> p =
      MakePartitionProblem(*prof, m, f.topology, f.facts, {0, 4, 1}, 4, 0);
  ASSERT_TRUE(p.ok());
  absl::StatusOr<Partition> part = ScorePartition(*p, {{0, 2}, {2, 4}});
  ASSERT_TRUE(part.ok()) << part.status();
  absl::StatusOr<Mapping> map = SequentialMapping(f.facts, {0, 4, 1}, 2);
  ASSERT_TRUE(map.ok());
  const MemoryEstimate e = EstimateMemory(m, *prof, *p, *part, *map, 4);
  const int64_t reserved =
      (int64_t{1} << 30) + prof->MaxWorkspaceBytes() + 6 * 128 * 16 + 8 * 16;
  EXPECT_EQ(p->reserved_bytes, reserved);
  // Stage 0: embedding + block 1 (inputs: token ids 4 x 16, hidden 128 x 16); stage 1: block 2 +
  // head (two hidden inputs).
  const int64_t stage0 = 2 * (6 * (64000 + 41088)) + 4 * 16 + 128 * 16;
  const int64_t stage1 = 2 * (6 * (41088 + 64064)) + 2 * 128 * 16;
  EXPECT_THAT(e.gpu_bytes, ElementsAre(reserved + stage0, reserved + stage1, 0));
  // The host side does not depend on the GPU rule.
  EXPECT_EQ(e.host_model_state_bytes, 18 * 210240);
  EXPECT_EQ(e.host_activation_bytes, 256 + 8192);
}

// Round-robin under kRuntime: a worker's slot holds one pass's weights and gradients together
// (pipeline_state.h Slot), so GPU 0, running the whole-model forward (W only) and the backward of
// [2, 4) (W + G), needs two slots of max(W_all, W_23 + G_23), not of W_all + G_23. With every pass
// on every GPU (pool dispatch, or a pass count that is no multiple of the GPU count), each GPU
// counts the largest of all passes.
TEST(EstimateMemory, RoundRobinSlotHoldsOnePassesWeightsAndGradients) {
  const model::ModelDescription m = TinyLlama();
  LoadedFixture f = LoadFixture("paper_testbed_2s_2sw_8x3090.xml");
  absl::StatusOr<Profile> prof = AnalyticProfile(m, {2, 8}, Rtx3090Spec());
  ASSERT_TRUE(prof.ok());
  absl::StatusOr<PartitionProblem> p =
      MakePartitionProblem(*prof, m, f.topology, f.facts, {0, 4}, 4, 0);
  ASSERT_TRUE(p.ok());
  absl::StatusOr<RoundRobinPartition> rr =
      ScoreRoundRobinPartition(*p, {{0, 4}}, {{0, 2}, {2, 4}});
  ASSERT_TRUE(rr.ok()) << rr.status();
  Plan plan;
  plan.num_microbatches = 4;
  plan.round_robin = *rr;
  absl::StatusOr<Mapping> map = SequentialMapping(f.facts, {0, 4}, 3);
  ASSERT_TRUE(map.ok());
  plan.mapping = *map;
  // Passes: F0 [0, 4) on GPU 0, B1 [2, 4) on GPU 1, B0 [0, 2) on GPU 0 (3 passes on 2 GPUs).
  const StageCost& f0 = rr->forward.costs[0];
  const StageCost& b0 = rr->backward.costs[0];
  const StageCost& b1 = rr->backward.costs[1];
  ASSERT_EQ(f0.gradient_bytes, 0);
  const int64_t r = p->reserved_bytes;
  const int64_t gpu0 = r + 2 * std::max(f0.weight_bytes, b0.weight_bytes + b0.gradient_bytes) +
                       std::max(f0.activation_bytes, b0.activation_bytes);
  const int64_t gpu1 = r + 2 * (b1.weight_bytes + b1.gradient_bytes) + b1.activation_bytes;
  const MemoryEstimate e = EstimateRoundRobinMemory(m, *prof, *p, plan);
  EXPECT_THAT(e.gpu_bytes, ElementsAre(gpu0, gpu1));
  EXPECT_LT(e.gpu_bytes[0], r + 2 * (f0.weight_bytes + b0.gradient_bytes) + f0.activation_bytes);
  EstimatorOptions every;
  every.every_pass_on_every_gpu = true;
  const MemoryEstimate all = EstimateRoundRobinMemory(m, *prof, *p, plan, every);
  const int64_t largest =
      r + 2 * std::max({f0.weight_bytes, b0.weight_bytes + b0.gradient_bytes,
                        b1.weight_bytes + b1.gradient_bytes}) +
      std::max({f0.activation_bytes, b0.activation_bytes, b1.activation_bytes});
  EXPECT_THAT(all.gpu_bytes, ElementsAre(largest, largest));
}

TEST(EstimateMemory, LoraKeepsTheBaseOnceAndTheAdaptersState) {
  const model::ModelDescription m = TinyLlama();
  LoadedFixture f = LoadFixture("paper_testbed_2s_2sw_8x3090.xml");
  AnalyticOptions o = TwoSlotProfile();
  absl::StatusOr<LoraLayout> lora = MakeLoraLayout(m, {4, {}});  // q_proj, v_proj
  ASSERT_TRUE(lora.ok());
  o.lora = *lora;
  absl::StatusOr<Profile> prof = AnalyticProfile(m, {2, 8}, Rtx3090Spec(), o);
  ASSERT_TRUE(prof.ok());
  const int microbatches = 4;
  absl::StatusOr<PartitionProblem> p =
      MakePartitionProblem(*prof, m, f.topology, f.facts, {0, 4, 1}, microbatches, 0,
                           TwoSlotCost());
  ASSERT_TRUE(p.ok());
  absl::StatusOr<Partition> part = ScorePartition(*p, {{0, 2}, {2, 4}});
  ASSERT_TRUE(part.ok());
  absl::StatusOr<Mapping> map = SequentialMapping(f.facts, {0, 4, 1}, 2);
  ASSERT_TRUE(map.ok());
  const MemoryEstimate e = EstimateMemory(m, *prof, *p, *part, *map, microbatches);

  // 2048 adapter parameters (4 x 128 per module, 2 modules x 2 blocks) in 8 tensors of 256
  // elements: one grad-norm chunk each. Host: the bf16 base 2 x 210240 + 16 x 2048 (fp32 master,
  // Adam m and v, fp32 gradient) + 8 x 8; checkpoints and activation gradients as in full
  // fine-tuning (TinyLlamaByHand); pinned: the base, the adapters' masters and gradients (8 x
  // 2048) and the checkpoints.
  EXPECT_EQ(e.host_model_state_bytes, 2 * 210240 + 16 * 2048 + 8 * 8);
  EXPECT_EQ(e.host_activation_bytes, 256 + 8192);
  EXPECT_EQ(e.host_activation_grad_bytes, 16384);
  EXPECT_EQ(e.host_bytes, e.host_model_state_bytes + 8448 + 16384 + 2 * kWorkerProcessBytes);
  EXPECT_EQ(e.pinned_bytes, 2 * 210240 + 8 * 2048 + 8448);

  // GPU: slot = bf16 base + fp32 adapters (4 x 1024 per block) + their fp32 gradients (4 x 1024
  // per block) + activations: no base gradient buffer.
  const int64_t block_act = (128 + 1688) * 16;
  const int64_t slot0 = 2 * (64000 + 41088) + 8 * 1024 + 4 * 16 + block_act;
  const int64_t slot1 =
      2 * (41088 + 64064) + 8 * 1024 + block_act + 128 * 16 + prof->units[3].saved_activation_bytes;
  EXPECT_THAT(e.gpu_bytes,
              ElementsAre(p->reserved_bytes + 2 * slot0, p->reserved_bytes + 2 * slot1, 0));
}

}  // namespace
}  // namespace mobius::planner
