// The pipeline runtime against the standalone trainer (the unsplit model): for several
// (stages S, workers G, microbatches M) with S > G, uneven stages, tied (GPT-2) and untied (Llama)
// embeddings, with and without clipping, for the mobius schedule, for roundrobin (separate
// forward / backward partitions, passes rotating over the workers) and for resident (S == G, the
// optimizer on the device), every step's loss and gradient norm and the final master weights and
// Adam moments must be bit-identical. On the CPU backend the pipeline runs the same ops in the same
// order per unit and microbatch (pipeline_worker.h), so no tolerance is needed; a difference of one
// ulp would mean the runtime changed the arithmetic. fp16 runs (training.precision) also match
// every step's loss scale and skip. (Resident's device optimizer sums the norm
// partials per 64 Ki-element chunk with the backend's SumSquares: on the CPU backend that is the
// host optimizer's sum, so it is bit-exact with clipping too; a CUDA backend sums in its own
// order, see pipeline_resident.cc.)
#include <cstdio>
#include <cstring>
#include <map>

#include "test/worker/runtime/runtime_test_util.h"
#include "worker/checkpoint/checkpoint.h"

namespace mobius::runtime {
namespace {

using testing::MakeLaunch;
using testing::MakeRoundRobinRun;
using testing::MakeRun;
using testing::TempDir;
using testing::WriteModel;

struct Case {
  std::string name, family;
  int layers;
  std::vector<int64_t> cuts;
  int workers;
  int64_t batch, microbatch;
  double grad_clip;
  int eval_every = 0;  // > 0: an eval pass (held-out 25%) every K steps and at the end
  // Non-empty: schedule roundrobin with `cuts` as the forward and these as the backward stages.
  std::vector<int64_t> backward_cuts = {};
  bool resident = false;  // schedule resident (S == G) over `cuts`
  // "emulated": activation gradients between ranks over the PeerTransport stand-in (NCCL's
  // rendezvous rule, ring of send buffers, comm queue) instead of the host store.
  std::string transport = "";
  // Asynchronous optimizer (training.optimizer_staleness 1) on both sides: the standalone trainer
  // applies the same staleness (the reference) and the pipeline must reproduce it.
  int staleness = 0;
  std::string dispatch = "";  // roundrobin: "pool" = passes to the next free worker
  int steps = 3;
  int checkpoint_every = 0;   // > 0: also checkpoints (sync steps with staleness) in between
  // "fp16": training.precision fp16 on both sides, from a loss scale of 2^24 that overflows at
  // first (skipped steps, halvings) and a window of 2 (doublings), so every rule of the scaler
  // and the staleness of its scale run.
  std::string precision = "";
  // > 0: training.chunk_tokens on both sides: the head (and the MLP) by token chunks of at most
  // this many rows, so the loss the head's backward recomputes is the last chunk's mean.
  int64_t chunk_tokens = 0;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class PipelineEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineEquivalenceTest, MatchesStandaloneTrainerBitExactly) {
  const Case& c = GetParam();
  TempDir dir;
  train::TrainerOptions o;
  o.model_dir = WriteModel(dir / "model", c.family, c.layers);
  o.data_path = train::testing::WriteCountingTokens(dir / "data.tok", 256, 24, 70);
  o.steps = c.steps;
  o.optimizer_staleness = c.staleness;
  o.batch = c.batch;
  o.microbatch = c.microbatch;
  o.seq = 16;
  o.lr = 3e-3;
  o.warmup = 1;
  o.weight_decay = 0.1;
  o.grad_clip = c.grad_clip;
  o.threads = 1;
  if (c.precision == "fp16") {
    o.precision = "fp16";
    o.loss_scale_init = 16777216.0;
    o.loss_scale_window = 2;
  }
  o.chunk_tokens = c.chunk_tokens;
  if (c.eval_every > 0) {
    o.eval_every = c.eval_every;
    o.eval_fraction = 0.25;
  }

  // The oracle.
  train::TrainerOptions so = o;
  so.checkpoint_dir = dir / "standalone";
  so.checkpoint_every = c.checkpoint_every;
  std::vector<train::StepStats> expected;
  std::unique_ptr<train::StandaloneTrainer> trainer = testing::RunStandalone(so, &expected);
  ASSERT_NE(trainer, nullptr);

  train::TrainerOptions po = o;
  po.checkpoint_dir = dir / "pipeline";
  po.checkpoint_every = c.checkpoint_every;
  RunConfig run = c.backward_cuts.empty()
                      ? MakeRun(po, c.cuts, c.workers)
                      : MakeRoundRobinRun(po, c.cuts, c.backward_cuts, c.workers);
  if (c.resident) run.schedule = runtime::Schedule::kResident;
  if (!c.transport.empty()) run.transport = c.transport;
  if (!c.dispatch.empty()) run.dispatch = c.dispatch;
  auto launcher = Launcher::Start(MakeLaunch(run, dir / "run"));
  ASSERT_TRUE(launcher.ok()) << launcher.status();
  LaunchResult result = (*launcher)->Wait();
  ASSERT_TRUE(result.status.ok()) << result.status;
  ASSERT_EQ(result.steps.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(result.steps[i].step, expected[i].step);
    EXPECT_EQ(result.steps[i].loss, expected[i].loss) << "step " << i + 1;
    EXPECT_EQ(result.steps[i].grad_norm, expected[i].grad_norm) << "step " << i + 1;
    EXPECT_EQ(result.steps[i].loss_scale, expected[i].loss_scale) << "step " << i + 1;
    EXPECT_EQ(result.steps[i].skipped, expected[i].skipped) << "step " << i + 1;
    EXPECT_EQ(result.steps[i].eval_loss, expected[i].eval_loss) << "step " << i + 1;
    if (c.eval_every > 0) {
      EXPECT_EQ(result.steps[i].eval_loss.has_value(),
                (i + 1) % c.eval_every == 0 || i + 1 == expected.size())
          << "step " << i + 1;
    }
    EXPECT_GT(result.steps[i].h2d_bytes, 0u);
    // Uploads on demand: a rank's first pass always (resident: none, its stage stays loaded);
    // without eval passes (which load W_r too) never more than the training passes it ran.
    for (const runtime::WorkerStepReport& w : result.steps[i].ranks) {
      if (c.eval_every > 0) break;
      EXPECT_LE(w.uploads_on_demand, w.passes) << "step " << i + 1 << " rank " << w.rank;
      if (c.resident) EXPECT_EQ(w.uploads_on_demand, 0) << "rank " << w.rank;
      if (i == 0 && !c.resident && w.passes > 0) {
        EXPECT_GE(w.uploads_on_demand, 1) << "rank " << w.rank;
      }
    }
    if (c.transport == "emulated") {
      EXPECT_GT(result.steps[i].peer_bytes, 0u) << "step " << i + 1;
    } else {
      EXPECT_EQ(result.steps[i].peer_bytes, 0u) << "step " << i + 1;
    }
  }
  EXPECT_FALSE(result.steps.back().checkpoint.empty());

  // Final state: the two checkpoints hold the same bits.
  auto a = checkpoint::LoadCheckpoint(*checkpoint::LatestCheckpoint(so.checkpoint_dir),
                                      trainer->config());
  auto b = checkpoint::LoadCheckpoint(*checkpoint::LatestCheckpoint(po.checkpoint_dir),
                                      trainer->config());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->state.step, b->state.step);
  EXPECT_EQ(a->state.data_position, b->state.data_position);
  EXPECT_EQ(a->state.loss_scale, b->state.loss_scale);
  EXPECT_EQ(a->state.loss_scale_good_steps, b->state.loss_scale_good_steps);
  if (c.precision == "fp16") {
    int skipped = 0;
    for (const train::StepStats& s : expected) skipped += s.skipped;
    std::printf("  fp16: %d of %zu steps skipped, final loss scale %g\n", skipped,
                expected.size(), a->state.loss_scale);
    EXPECT_GT(a->state.loss_scale, 0.0);
  }
  for (const auto& [name, t] : a->master.tensors) {
    const auto& u = b->master.at(name);
    ASSERT_EQ(t.data.size(), u.data.size()) << name;
    EXPECT_EQ(0, std::memcmp(t.data.data(), u.data.data(), 4 * t.data.size())) << name;
    EXPECT_EQ(0, std::memcmp(a->adam_m.at(name).data.data(), b->adam_m.at(name).data.data(),
                             4 * t.data.size()))
        << name;
    EXPECT_EQ(0, std::memcmp(a->adam_v.at(name).data.data(), b->adam_v.at(name).data.data(),
                             4 * t.data.size()))
        << name;
  }
}

// Units: embedding 0, blocks 1..L, head L+1.
INSTANTIATE_TEST_SUITE_P(
    Shapes, PipelineEquivalenceTest,
    ::testing::Values(
        Case{"gpt2_S4_G2_M2_clip", "gpt2", 2, {0, 1, 2, 3, 4}, 2, 4, 2, 1.0},
        Case{"gpt2_S3_G2_M4_uneven", "gpt2", 4, {0, 3, 4, 6}, 2, 4, 1, 0.0},
        Case{"llama_S5_G2_M2_uneven", "llama", 4, {0, 2, 3, 4, 5, 6}, 2, 4, 2, 1.0},
        Case{"llama_S6_G3_M1", "llama", 4, {0, 1, 2, 3, 4, 5, 6}, 3, 2, 2, 0.5},
        Case{"gpt2_S2_G2", "gpt2", 2, {0, 2, 4}, 2, 2, 1, 1.0},
        Case{"llama_S1_G1", "llama", 2, {0, 4}, 1, 2, 1, 1.0},
        // Eval passes: more eval microbatches than boundary slots (chunks), S > G, both embeddings.
        Case{"llama_S5_G2_M2_eval", "llama", 4, {0, 2, 3, 4, 5, 6}, 2, 4, 2, 1.0, 2},
        Case{"gpt2_S4_G3_M1_eval", "gpt2", 2, {0, 1, 2, 3, 4}, 3, 2, 2, 0.0, 1},
        // Roundrobin: forward cuts, then backward cuts; pass j on worker j mod G.
        Case{"rr_gpt2_F2_B3_G2_M2_clip", "gpt2", 4, {0, 3, 6}, 2, 4, 2, 1.0, 0, {0, 2, 4, 6}},
        Case{"rr_llama_F2_B3_G2_M4_uneven", "llama", 4, {0, 4, 6}, 2, 4, 1, 0.0, 0,
             {0, 1, 5, 6}},
        Case{"rr_gpt2_F3_B4_G3_M1_uneven", "gpt2", 4, {0, 2, 4, 6}, 3, 2, 2, 0.5, 0,
             {0, 1, 3, 5, 6}},
        Case{"rr_llama_F1_B2_G2_M3_clip", "llama", 4, {0, 6}, 2, 3, 1, 1.0, 0, {0, 4, 6}},
        // Worker 0 runs forward passes only (3 forward stages, 1 backward stage, 2 workers).
        Case{"rr_gpt2_F3_B1_G2_M2", "gpt2", 4, {0, 2, 4, 6}, 2, 4, 2, 0.0, 0, {0, 6}},
        // Same ranges for both passes (forward and backward of a stage share a slot).
        Case{"rr_gpt2_F3_B3_G2_M2_shared_clip", "gpt2", 4, {0, 2, 4, 6}, 2, 4, 2, 1.0, 0,
             {0, 2, 4, 6}},
        Case{"rr_llama_F2_B3_G2_M2_eval", "llama", 4, {0, 3, 6}, 2, 4, 2, 1.0, 2, {0, 2, 4, 6}},
        // Resident (S == G): tied embedding and head on different ranks (GPT-2) or one rank.
        Case{"resident_gpt2_S2_G2_M2_uneven_clip", "gpt2", 2, {0, 3, 4}, 2, 4, 2, 1.0, 0, {},
             true},
        Case{"resident_gpt2_S3_G3_M1_uneven", "gpt2", 4, {0, 1, 4, 6}, 3, 2, 2, 0.0, 0, {}, true},
        Case{"resident_gpt2_S3_G3_M2_clip_eval", "gpt2", 2, {0, 2, 3, 4}, 3, 4, 2, 1.0, 1, {},
             true},
        Case{"resident_gpt2_S1_G1_clip", "gpt2", 2, {0, 4}, 1, 2, 1, 1.0, 0, {}, true},
        Case{"resident_llama_S2_G2_M4_uneven_clip", "llama", 4, {0, 4, 6}, 2, 4, 1, 1.0, 0, {},
             true},
        Case{"resident_llama_S3_G3_M2_uneven_eval", "llama", 4, {0, 2, 5, 6}, 3, 4, 2, 0.5, 2, {},
             true},
        // Gradients over the emulated device transport: 8 microbatches (the 4-slot send ring
        // wraps, so sends wait for earlier ones), 3 workers, roundrobin, resident, eval.
        Case{"emu_gpt2_S4_G2_M8_clip", "gpt2", 2, {0, 1, 2, 3, 4}, 2, 8, 1, 1.0, 0, {}, false,
             "emulated"},
        Case{"emu_llama_S6_G3_M2", "llama", 4, {0, 1, 2, 3, 4, 5, 6}, 3, 4, 2, 0.5, 0, {}, false,
             "emulated"},
        Case{"emu_rr_llama_F2_B3_G2_M2_eval", "llama", 4, {0, 3, 6}, 2, 4, 2, 1.0, 2,
             {0, 2, 4, 6}, false, "emulated"},
        Case{"emu_resident_gpt2_S3_G3_M2_clip", "gpt2", 4, {0, 1, 4, 6}, 3, 4, 2, 1.0, 0, {},
             true, "emulated"},
        // Asynchronous optimizer (staleness 1): mobius with and without clipping (GPT-2's tied
        // head: the embedding's update consumes the head's gradient), sync steps at evals and
        // checkpoints, roundrobin.
        Case{"stale_llama_S5_G2_M2_clip", "llama", 4, {0, 2, 3, 4, 5, 6}, 2, 4, 2, 1.0, 0, {},
             false, "", 1, "", 6},
        Case{"stale_gpt2_S4_G2_M2", "gpt2", 2, {0, 1, 2, 3, 4}, 2, 4, 2, 0.0, 0, {}, false, "", 1,
             "", 6},
        Case{"stale_gpt2_S4_G3_M1_eval_ckpt", "gpt2", 2, {0, 1, 2, 3, 4}, 3, 2, 2, 0.5, 3, {},
             false, "", 1, "", 7, 2},
        Case{"stale_rr_gpt2_F2_B3_G2_M2_clip", "gpt2", 4, {0, 3, 6}, 2, 4, 2, 1.0, 0, {0, 2, 4, 6},
             false, "", 1, "", 5},
        Case{"stale_rr_llama_F3_B4_G3_M1", "llama", 4, {0, 2, 4, 6}, 3, 2, 2, 0.0, 0,
             {0, 1, 3, 5, 6}, false, "", 1, "", 5},
        // Pool dispatch: passes to the next free worker, bit-exact with the static assignment (the
        // standalone trainer); with a worker that owns no backward stage, eval, staleness.
        Case{"pool_rr_gpt2_F2_B3_G2_M2_clip", "gpt2", 4, {0, 3, 6}, 2, 4, 2, 1.0, 0, {0, 2, 4, 6},
             false, "", 0, "pool", 4},
        Case{"pool_rr_llama_F3_B4_G3_M1_uneven", "llama", 4, {0, 2, 4, 6}, 3, 2, 2, 0.5, 0,
             {0, 1, 3, 5, 6}, false, "", 0, "pool", 4},
        Case{"pool_rr_gpt2_F3_B1_G2_M2", "gpt2", 4, {0, 2, 4, 6}, 2, 4, 2, 0.0, 0, {0, 6}, false,
             "", 0, "pool", 4},
        Case{"pool_rr_llama_F2_B3_G2_M2_eval_ckpt", "llama", 4, {0, 3, 6}, 2, 4, 2, 1.0, 2,
             {0, 2, 4, 6}, false, "", 0, "pool", 5, 2},
        Case{"pool_stale_rr_gpt2_F3_B3_G3_M2_shared_clip", "gpt2", 4, {0, 2, 4, 6}, 3, 4, 2, 1.0,
             0, {0, 2, 4, 6}, false, "", 1, "pool", 6},
        // fp16 (training.precision): skipped steps, scale halvings and doublings, with clipping
        // and without (the updates still wait for the norm), staleness (the scale of step k-2),
        // checkpoints and evals (sync steps), roundrobin, pool dispatch.
        Case{"fp16_llama_S5_G2_M2_clip", "llama", 4, {0, 2, 3, 4, 5, 6}, 2, 4, 2, 1.0, 0, {},
             false, "", 0, "", 8, 0, "fp16"},
        Case{"fp16_gpt2_S4_G2_M2_noclip", "gpt2", 2, {0, 1, 2, 3, 4}, 2, 4, 2, 0.0, 0, {}, false,
             "", 0, "", 8, 0, "fp16"},
        Case{"fp16_stale_gpt2_S4_G3_M1_eval_ckpt", "gpt2", 2, {0, 1, 2, 3, 4}, 3, 2, 2, 0.5, 3, {},
             false, "", 1, "", 9, 2, "fp16"},
        Case{"fp16_stale_llama_S5_G2_M2", "llama", 4, {0, 2, 3, 4, 5, 6}, 2, 4, 2, 0.0, 0, {},
             false, "", 1, "", 9, 0, "fp16"},
        Case{"fp16_rr_llama_F2_B3_G2_M2_clip", "llama", 4, {0, 3, 6}, 2, 4, 2, 1.0, 0,
             {0, 2, 4, 6}, false, "", 0, "", 8, 0, "fp16"},
        Case{"fp16_pool_stale_rr_gpt2_F3_B3_G3_M2", "gpt2", 4, {0, 2, 4, 6}, 3, 4, 2, 1.0, 0,
             {0, 2, 4, 6}, false, "", 1, "pool", 8, 0, "fp16"},
        // Token chunks of 5 and 7 rows (32-row microbatches): the forward passes skip the head,
        // whose backward recomputes it chunk by chunk and gives the loss (the last chunk's mean);
        // a forward stage of the head alone (mobius) runs nothing.
        Case{"chunked_rr_llama_F2_B3_G2_M2_eval", "llama", 4, {0, 3, 6}, 2, 4, 2, 1.0, 2,
             {0, 2, 4, 6}, false, "", 0, "", 3, 0, "", 5},
        Case{"chunked_fp16_gpt2_S4_G2_M2_clip", "gpt2", 2, {0, 1, 2, 3, 4}, 2, 4, 2, 1.0, 0, {},
             false, "", 0, "", 6, 0, "fp16", 7},
        // Mixtures of experts (tiny presets: Qwen3-MoE 8 experts top-2 renormalised, Mixtral 4
        // top-2): mobius with uneven stages and eval, roundrobin with clipping, staleness with
        // checkpoints, fp16, pool dispatch with token chunks.
        Case{"moe_qwen3_S5_G2_M2_uneven_eval", "qwen3_moe", 4, {0, 2, 3, 4, 5, 6}, 2, 4, 2, 1.0,
             2},
        Case{"moe_rr_mixtral_F2_B3_G2_M2_clip", "mixtral", 4, {0, 3, 6}, 2, 4, 2, 1.0, 0,
             {0, 2, 4, 6}},
        Case{"moe_stale_qwen3_S4_G3_M1_ckpt", "qwen3_moe", 2, {0, 1, 2, 3, 4}, 3, 2, 2, 0.5, 0, {},
             false, "", 1, "", 5, 2},
        Case{"moe_fp16_mixtral_S4_G2_M2_clip", "mixtral", 2, {0, 1, 2, 3, 4}, 2, 4, 2, 1.0, 0, {},
             false, "", 0, "", 6, 0, "fp16"},
        Case{"moe_chunked_pool_rr_qwen3_F3_B4_G3_M1", "qwen3_moe", 4, {0, 2, 4, 6}, 3, 2, 2, 0.0,
             0, {0, 1, 3, 5, 6}, false, "", 0, "pool", 4, 0, "", 5},
        // The load-balancing loss (output_router_logits): every MoE block's routing statistics
        // go through the store to the head (the loss) and every backward pass (its gradient):
        // mobius with uneven stages and eval, roundrobin with pool dispatch and clipping,
        // staleness with checkpoints (two statistics copies), fp16.
        Case{"aux_qwen3_S5_G2_M2_uneven_eval", "qwen3_moe+aux", 4, {0, 2, 3, 4, 5, 6}, 2, 4, 2,
             1.0, 2},
        Case{"aux_pool_rr_mixtral_F2_B3_G3_M2_clip", "mixtral+aux", 4, {0, 3, 6}, 3, 4, 2, 1.0, 0,
             {0, 2, 4, 6}, false, "", 0, "pool"},
        Case{"aux_stale_qwen3_S4_G3_M1_ckpt", "qwen3_moe+aux", 2, {0, 1, 2, 3, 4}, 3, 2, 2, 0.5, 0,
             {}, false, "", 1, "", 5, 2},
        // One unit per stage on 3 workers: a backward pass must wait for its output gradient
        // (the later blocks' statistics of this step) before it reads the statistics.
        Case{"aux_qwen3_S4_G3_M1_ckpt", "qwen3_moe+aux", 2, {0, 1, 2, 3, 4}, 3, 2, 2, 0.5, 0,
             {}, false, "", 0, "", 5, 2},
        Case{"aux_resident_mixtral_S2_G2_M2_clip", "mixtral+aux", 2, {0, 2, 4}, 2, 4, 2, 1.0, 0,
             {}, true},
        Case{"aux_emu_qwen3_S4_G2_M2", "qwen3_moe+aux", 2, {0, 1, 2, 3, 4}, 2, 4, 2, 1.0, 0, {},
             false, "emulated"},
        Case{"aux_fp16_mixtral_S4_G2_M2_clip", "mixtral+aux", 2, {0, 1, 2, 3, 4}, 2, 4, 2, 1.0, 0,
             {}, false, "", 0, "", 6, 0, "fp16"},
        // gpt-oss (tiny preset: 8 experts top-2, clamped SwiGLU with biases, sinks, an 8-token
        // window on the even layers, YaRN, a biased router; its checkpoints fused per layer):
        // mobius with uneven stages and eval, roundrobin with pool dispatch and clipping,
        // staleness with checkpoints, fp16.
        Case{"gptoss_S5_G2_M2_uneven_eval", "gpt_oss", 4, {0, 2, 3, 4, 5, 6}, 2, 4, 2, 1.0, 2},
        Case{"gptoss_pool_rr_F2_B3_G3_M2_clip", "gpt_oss", 4, {0, 3, 6}, 3, 4, 2, 1.0, 0,
             {0, 2, 4, 6}, false, "", 0, "pool"},
        Case{"gptoss_stale_S4_G3_M1_ckpt", "gpt_oss", 2, {0, 1, 2, 3, 4}, 3, 2, 2, 0.5, 0, {},
             false, "", 1, "", 5, 2},
        Case{"gptoss_fp16_S4_G2_M2_clip", "gpt_oss", 2, {0, 1, 2, 3, 4}, 2, 4, 2, 1.0, 0, {},
             false, "", 0, "", 6, 0, "fp16"}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace mobius::runtime
