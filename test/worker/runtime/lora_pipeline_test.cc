// LoRA through the pipeline runtime against the standalone trainer's LoRA mode (the unsplit
// model, itself checked against PEFT in test/worker/model/lora_golden_test.cc): for the mobius
// schedule (S > G, uneven stages), roundrobin (separate forward / backward partitions, static and
// pool dispatch), tied (GPT-2) and untied (Llama) embeddings, PEFT's default targets and every
// module, with and without clipping, eval passes and checkpoints, every step's loss, gradient norm
// and eval loss and the final adapters and Adam moments must be bit-identical (the same ops in the
// same order on the CPU backend: no tolerance). A run resumed from the pipeline's own adapter
// checkpoint continues bit-exactly. Per step the host link carries the base weights up and only
// the adapters' gradients down: the test checks the D2H bytes are the adapters', not the model's.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "test/worker/runtime/runtime_test_util.h"
#include "worker/checkpoint/adapter_checkpoint.h"
#include "common/model/model_config_parse.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/train/lora_setup.h"

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
  std::vector<std::string> targets;  // empty: PEFT's default for the family
  int eval_every = 0;
  std::vector<int64_t> backward_cuts = {};  // non-empty: roundrobin
  std::string dispatch = "";
  int steps = 3;
  int checkpoint_every = 0;
  double dropout = 0.0;
  std::string base = "";  // adapter base_quantization: "" or "nf4" (QLoRA)
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

train::TrainerOptions Options(const TempDir& dir, const Case& c) {
  train::TrainerOptions o;
  o.model_dir = WriteModel(dir / "model", c.family, c.layers);
  o.data_path = train::testing::WriteCountingTokens(dir / "data.tok", 256, 24, 70);
  o.steps = c.steps;
  o.batch = c.batch;
  o.microbatch = c.microbatch;
  o.seq = 16;
  o.lr = 1e-2;
  o.warmup = 1;
  o.weight_decay = 0.1;
  o.grad_clip = c.grad_clip;
  o.threads = 1;
  o.seed = 5;
  o.adapter.type = "lora";
  o.adapter.rank = 4;
  o.adapter.alpha = 8;
  o.adapter.target_modules = c.targets;
  o.adapter.dropout = c.dropout;
  o.adapter.base_quantization = c.base;
  if (c.eval_every > 0) {
    o.eval_every = c.eval_every;
    o.eval_fraction = 0.25;
  }
  return o;
}

RunConfig MakeCaseRun(const train::TrainerOptions& o, const Case& c) {
  RunConfig run = c.backward_cuts.empty() ? MakeRun(o, c.cuts, c.workers)
                                          : MakeRoundRobinRun(o, c.cuts, c.backward_cuts,
                                                              c.workers);
  if (!c.dispatch.empty()) run.dispatch = c.dispatch;
  return run;
}

absl::StatusOr<checkpoint::LoadedAdapterCheckpoint> LoadLatest(const train::TrainerOptions& o,
                                                               const model::ModelConfig& config) {
  auto lora = train::MakeLoraRun(o, config);
  if (!lora.ok()) return lora.status();
  auto dir = checkpoint::LatestCheckpoint(o.checkpoint_dir);
  if (!dir.ok()) return dir.status();
  return checkpoint::LoadAdapterCheckpoint(*dir, o.adapter.rank, lora->targets, lora->shapes);
}

void ExpectSameAdapters(const checkpoint::LoadedAdapterCheckpoint& a,
                        const checkpoint::LoadedAdapterCheckpoint& b) {
  EXPECT_EQ(a.state.step, b.state.step);
  EXPECT_EQ(a.state.data_position, b.state.data_position);
  ASSERT_EQ(a.master.tensors.size(), b.master.tensors.size());
  for (const auto& [name, t] : a.master.tensors) {
    const auto& u = b.master.at(name);
    ASSERT_EQ(t.data.size(), u.data.size()) << name;
    const size_t bytes = 4 * t.data.size();
    EXPECT_EQ(0, std::memcmp(t.data.data(), u.data.data(), bytes)) << name;
    EXPECT_EQ(0, std::memcmp(a.adam_m.at(name).data.data(), b.adam_m.at(name).data.data(), bytes))
        << name;
    EXPECT_EQ(0, std::memcmp(a.adam_v.at(name).data.data(), b.adam_v.at(name).data.data(), bytes))
        << name;
  }
}

class LoraPipelineTest : public ::testing::TestWithParam<Case> {};

TEST_P(LoraPipelineTest, MatchesStandaloneLoraBitExactly) {
  const Case& c = GetParam();
  TempDir dir;
  const train::TrainerOptions o = Options(dir, c);

  train::TrainerOptions so = o;
  so.checkpoint_dir = dir / "standalone";
  so.checkpoint_every = c.checkpoint_every;
  std::vector<train::StepStats> expected;
  std::unique_ptr<train::StandaloneTrainer> trainer = testing::RunStandalone(so, &expected);
  ASSERT_NE(trainer, nullptr);

  train::TrainerOptions po = o;
  po.checkpoint_dir = dir / "pipeline";
  po.checkpoint_every = c.checkpoint_every;
  auto launcher = Launcher::Start(MakeLaunch(MakeCaseRun(po, c), dir / "run"));
  ASSERT_TRUE(launcher.ok()) << launcher.status();
  LaunchResult result = (*launcher)->Wait();
  ASSERT_TRUE(result.status.ok()) << result.status;
  ASSERT_EQ(result.steps.size(), expected.size());
  int64_t adapter_params = 0;
  for (const auto& [name, t] : trainer->adapters().tensors) adapter_params += t.numel();
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(result.steps[i].loss, expected[i].loss) << "step " << i + 1;
    EXPECT_EQ(result.steps[i].grad_norm, expected[i].grad_norm) << "step " << i + 1;
    EXPECT_EQ(result.steps[i].eval_loss, expected[i].eval_loss) << "step " << i + 1;
    EXPECT_GT(result.steps[i].h2d_bytes, 0u);
  }
  // Without eval passes, what goes down per step is the boundary activations and gradients plus
  // the adapters' gradients (4 bytes each, once per backward stage): never the base's gradients.
  if (c.eval_every == 0) {
    int64_t base_params = 0;
    for (const auto& [name, t] : trainer->master().tensors) base_params += t.numel();
    const int backward_stages = static_cast<int>((c.backward_cuts.empty() ? c.cuts
                                                                          : c.backward_cuts)
                                                     .size()) -
                                1;
    const uint64_t boundary = 4 * static_cast<uint64_t>(c.microbatch * 16 * 64);  // fp32 [mb,T,C]
    const uint64_t bound = 4 * static_cast<uint64_t>(adapter_params) +
                           (c.batch / c.microbatch) * (2 * backward_stages + 2) * boundary * 2;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_LE(result.steps[i].d2h_bytes, bound) << "step " << i + 1;
      EXPECT_LT(result.steps[i].d2h_bytes, 4 * static_cast<uint64_t>(base_params))
          << "step " << i + 1;
    }
  }
  auto a = LoadLatest(so, trainer->config());
  auto b = LoadLatest(po, trainer->config());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ExpectSameAdapters(*a, *b);
}

// Units: embedding 0, blocks 1..L, head L+1.
INSTANTIATE_TEST_SUITE_P(
    Shapes, LoraPipelineTest,
    ::testing::Values(
        Case{"gpt2_S4_G2_M2_clip_all", "gpt2", 2, {0, 1, 2, 3, 4}, 2, 4, 2, 1.0,
             {"c_attn", "c_proj", "c_fc"}},
        Case{"llama_S5_G2_M2_uneven_default", "llama", 4, {0, 2, 3, 4, 5, 6}, 2, 4, 2, 1.0, {}},
        Case{"llama_S3_G3_M1_all_eval_ckpt", "llama", 4, {0, 2, 4, 6}, 3, 2, 2, 0.5,
             {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}, 2, {},
             "", 5, 2},
        Case{"gpt2_S2_G1_M1_noclip", "gpt2", 2, {0, 2, 4}, 1, 2, 1, 0.0, {"c_attn"}},
        Case{"rr_llama_F2_B3_G2_M2_clip", "llama", 4, {0, 3, 6}, 2, 4, 2, 1.0,
             {"q_proj", "v_proj", "down_proj"}, 0, {0, 2, 4, 6}},
        Case{"rr_gpt2_F3_B4_G3_M1_eval", "gpt2", 4, {0, 2, 4, 6}, 3, 2, 2, 0.5,
             {"c_attn", "c_fc"}, 2, {0, 1, 3, 5, 6}},
        Case{"pool_rr_llama_F2_B3_G2_M2_ckpt", "llama", 4, {0, 3, 6}, 2, 4, 2, 1.0,
             {"q_proj", "k_proj", "o_proj", "up_proj"}, 0, {0, 2, 4, 6}, "pool", 4, 2},
        // LoRA dropout: the masks are the standalone trainer's however the batch and model are
        // split (worker/kernels/dropout_mask.h); eval passes use none.
        Case{"drop_llama_S5_G2_M2_eval", "llama", 4, {0, 2, 3, 4, 5, 6}, 2, 4, 2, 1.0,
             {"q_proj", "v_proj", "gate_proj", "down_proj"}, 2, {}, "", 4, 0, 0.1},
        Case{"drop_gpt2_S3_G2_M1_all", "gpt2", 2, {0, 1, 3, 4}, 2, 4, 1, 1.0,
             {"c_attn", "c_proj", "c_fc"}, 0, {}, "", 3, 0, 0.25},
        Case{"drop_pool_rr_llama_F2_B3_G3_M2", "llama", 4, {0, 3, 6}, 3, 4, 2, 0.0,
             {"q_proj", "k_proj", "v_proj", "o_proj", "up_proj"}, 0, {0, 2, 4, 6}, "pool", 3,
             0, 0.1},
        // Mixtures of experts with adapters on every expert (each sees its routed rows): mobius
        // with uneven stages, eval and checkpoints; roundrobin with pool dispatch and dropout.
        Case{"moe_qwen3_S5_G2_M2_experts_eval_ckpt", "qwen3_moe", 4, {0, 2, 3, 4, 5, 6}, 2, 4, 2,
             1.0, {"q_proj", "gate_proj", "up_proj", "down_proj"}, 2, {}, "", 4, 2},
        Case{"moe_aux_rr_qwen3_F2_B3_G2_M2_experts", "qwen3_moe+aux", 4, {0, 3, 6}, 2, 4, 2, 1.0,
             {"q_proj", "up_proj"}, 0, {0, 2, 4, 6}},
        Case{"moe_drop_pool_rr_mixtral_F2_B3_G2_M2", "mixtral", 4, {0, 3, 6}, 2, 4, 2, 0.5,
             {"v_proj", "w1", "w2", "w3"}, 0, {0, 2, 4, 6}, "pool", 3, 0, 0.1},
        // QLoRA: the base's linears in NF4, quantised by each rank into the store and by the
        // standalone trainer on its device alike, dequantised before every GEMM.
        Case{"nf4_llama_S5_G2_M2_eval_ckpt", "llama", 4, {0, 2, 3, 4, 5, 6}, 2, 4, 2, 1.0,
             {"q_proj", "v_proj", "down_proj"}, 2, {}, "", 4, 2, 0.0, "nf4"},
        Case{"nf4_drop_pool_rr_mixtral_F2_B3_G2_M2", "mixtral", 4, {0, 3, 6}, 2, 4, 2, 1.0,
             {"q_proj", "w1", "w2"}, 0, {0, 2, 4, 6}, "pool", 3, 0, 0.1, "nf4"},
        Case{"nf4_moe_qwen3_S3_G3_M1", "qwen3_moe", 4, {0, 2, 4, 6}, 3, 2, 2, 0.5,
             {"o_proj", "gate_proj", "down_proj"}, 0, {}, "", 3, 0, 0.0, "nf4"}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// An NF4 base moves fewer bytes up per step than the same run's bf16 base (its linears at ~0.52
// bytes per value) and trains a different (quantised) model: not the bf16 losses.
TEST(QloraPipelineTest, UploadsFewerBytesThanTheBf16Base) {
  const Case c{"nf4_vs_bf16", "llama", 4, {0, 2, 4, 6}, 3, 2, 1, 1.0, {"q_proj", "v_proj"}};
  std::vector<LaunchResult> results;
  for (const std::string base : {"", "nf4"}) {
    TempDir dir;
    train::TrainerOptions o = Options(dir, c);
    o.adapter.base_quantization = base;
    auto launcher = Launcher::Start(MakeLaunch(MakeCaseRun(o, c), dir / "run"));
    ASSERT_TRUE(launcher.ok()) << launcher.status();
    results.push_back((*launcher)->Wait());
    ASSERT_TRUE(results.back().status.ok()) << results.back().status;
  }
  ASSERT_EQ(results[0].steps.size(), results[1].steps.size());
  for (size_t i = 0; i < results[0].steps.size(); ++i) {
    const double ratio = static_cast<double>(results[1].steps[i].h2d_bytes) /
                         static_cast<double>(results[0].steps[i].h2d_bytes);
    std::printf("step %zu: h2d nf4 / bf16 = %.3f, loss %.6f vs %.6f\n", i + 1, ratio,
                results[1].steps[i].loss, results[0].steps[i].loss);
    EXPECT_LT(ratio, 0.8) << "step " << i + 1;
    EXPECT_NE(results[1].steps[i].loss, results[0].steps[i].loss) << "step " << i + 1;
  }
}

// A bitsandbytes QLoRA checkpoint (test/reference/golden_bnb4bit/nf4, written by bitsandbytes)
// trains as stored: the NF4 run puts its codes and scales into the store and the standalone
// model without requantising, so both equal each other bit for bit and, step for step, the bf16
// run over the same checkpoint (which reads it dequantised, bitsandbytes' dequantize_4bit).
TEST(QloraPipelineTest, BitsandbytesCheckpointTrainsAsStored) {
  const Case c{"bnb", "llama", 2, {0, 2, 4}, 2, 4, 2, 1.0, {"q_proj", "v_proj", "down_proj"}};
  TempDir dir;
  const std::filesystem::path model = std::filesystem::path(dir / "bnb");
  std::filesystem::create_directories(model);
  for (const char* f : {"config.json", "model.safetensors"}) {
    std::filesystem::copy_file(
        mobius::testing::SourcePath(std::string("test/reference/golden_bnb4bit/nf4/") + f),
        model / f);
  }
  train::TrainerOptions o = Options(dir, c);  // writes a bf16 model into dir/model, not used
  o.model_dir = model.string();
  o.data_path = train::testing::WriteCountingTokens(dir / "data64.tok", 64, 24, 70);
  o.adapter.base_quantization = "nf4";
  train::TrainerOptions so = o;
  so.checkpoint_dir = dir / "standalone";
  std::vector<train::StepStats> expected;
  ASSERT_NE(testing::RunStandalone(so, &expected), nullptr);
  std::vector<LaunchResult> results;
  for (const std::string base : {"nf4", ""}) {
    train::TrainerOptions po = o;
    po.adapter.base_quantization = base;
    po.checkpoint_dir = dir / ("pipeline" + base);
    auto launcher = Launcher::Start(MakeLaunch(MakeCaseRun(po, c), dir / ("run" + base)));
    ASSERT_TRUE(launcher.ok()) << launcher.status();
    results.push_back((*launcher)->Wait());
    ASSERT_TRUE(results.back().status.ok()) << results.back().status;
    ASSERT_EQ(results.back().steps.size(), expected.size());
  }
  train::TrainerOptions sb = so;
  sb.adapter.base_quantization = "";
  sb.checkpoint_dir = dir / "standalone_bf16";
  std::vector<train::StepStats> expected_bf16;
  ASSERT_NE(testing::RunStandalone(sb, &expected_bf16), nullptr);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(results[0].steps[i].loss, expected[i].loss) << "step " << i + 1;
    EXPECT_EQ(results[0].steps[i].grad_norm, expected[i].grad_norm) << "step " << i + 1;
    EXPECT_EQ(results[1].steps[i].loss, expected_bf16[i].loss) << "bf16, step " << i + 1;
    EXPECT_EQ(expected_bf16[i].loss, expected[i].loss) << "standalone bf16 vs nf4, step " << i + 1;
    EXPECT_LT(results[0].steps[i].h2d_bytes, results[1].steps[i].h2d_bytes) << "step " << i + 1;
  }
  // The NF4 run's adapter checkpoint names its base (for `mobius generate --adapter`).
  for (const std::string run : {"pipelinenf4", "standalone"}) {
    auto latest = checkpoint::LatestCheckpoint(dir / run);
    ASSERT_TRUE(latest.ok()) << latest.status();
    std::ifstream in(*latest + "/trainer_state.json");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("\"base_quantization\": \"nf4\""), std::string::npos) << run << ": " << text;
  }
}

// Dropout does something: with B = 0 the first step's loss is the same with or without it (the
// adapters add nothing yet), but its gradients and so every later step differ; and the masks
// depend on the seed.
TEST(LoraDropoutTest, ChangesGradientsAndFollowsTheSeed) {
  TempDir dir;
  Case c{"drop", "llama", 2, {}, 1, 4, 2, 0.0, {"q_proj", "v_proj", "up_proj"}};
  auto run = [&](double dropout, uint64_t seed, const std::string& name) {
    c.dropout = dropout;
    train::TrainerOptions o = Options(dir, c);
    o.seed = seed;
    o.checkpoint_dir = dir / name;
    std::vector<train::StepStats> steps;
    EXPECT_NE(testing::RunStandalone(o, &steps), nullptr);
    return steps;
  };
  const auto none = run(0.0, 5, "none");
  const auto drop = run(0.3, 5, "drop");
  const auto again = run(0.3, 5, "again");
  const auto other = run(0.3, 6, "other");
  ASSERT_EQ(none.size(), 3u);
  ASSERT_EQ(drop.size(), 3u);
  ASSERT_EQ(again.size(), 3u);
  ASSERT_EQ(other.size(), 3u);
  EXPECT_EQ(drop[0].loss, none[0].loss);
  EXPECT_NE(drop[0].grad_norm, none[0].grad_norm);
  for (size_t i = 1; i < 3; ++i) EXPECT_NE(drop[i].loss, none[i].loss) << "step " << i + 1;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(again[i].loss, drop[i].loss) << "step " << i + 1;
    EXPECT_EQ(again[i].grad_norm, drop[i].grad_norm) << "step " << i + 1;
  }
  EXPECT_NE(other[0].grad_norm, drop[0].grad_norm);
}

// 6 steps with checkpoints every 3, then a new launch resumed from the step-3 checkpoint: steps 4
// to 6 and the final adapters and moments are the straight run's, bit for bit.
TEST(LoraPipelineResumeTest, ResumedRunContinuesBitExactly) {
  TempDir dir;
  Case c{"resume", "llama", 4, {0, 2, 4, 6}, 2, 4, 2, 1.0, {"q_proj", "v_proj", "up_proj"}};
  c.dropout = 0.1;  // the masks of steps 4 to 6 come from the step number, not the launch
  train::TrainerOptions o = Options(dir, c);
  o.steps = 6;
  o.schedule = "cosine";
  o.warmup = 2;
  o.checkpoint_dir = dir / "straight";
  o.checkpoint_every = 3;
  auto straight = Launcher::Start(MakeLaunch(MakeCaseRun(o, c), dir / "run1"));
  ASSERT_TRUE(straight.ok()) << straight.status();
  LaunchResult want = (*straight)->Wait();
  ASSERT_TRUE(want.status.ok()) << want.status;
  ASSERT_EQ(want.steps.size(), 6u);

  train::TrainerOptions resumed = o;
  resumed.checkpoint_dir = dir / "resumed";
  std::filesystem::create_directories(resumed.checkpoint_dir);
  std::filesystem::copy(dir / "straight/checkpoint-00000003", dir / "resumed/checkpoint-00000003",
                        std::filesystem::copy_options::recursive);
  resumed.resume = true;
  auto second = Launcher::Start(MakeLaunch(MakeCaseRun(resumed, c), dir / "run2"));
  ASSERT_TRUE(second.ok()) << second.status();
  LaunchResult got = (*second)->Wait();
  ASSERT_TRUE(got.status.ok()) << got.status;
  ASSERT_EQ(got.steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got.steps[i].step, want.steps[i + 3].step);
    EXPECT_EQ(got.steps[i].loss, want.steps[i + 3].loss) << "step " << i + 4;
    EXPECT_EQ(got.steps[i].grad_norm, want.steps[i + 3].grad_norm) << "step " << i + 4;
  }
  auto config = model::LoadModelConfig(o.model_dir);
  ASSERT_TRUE(config.ok()) << config.status();
  auto a = LoadLatest(o, *config);
  auto b = LoadLatest(resumed, *config);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->state.step, 6);
  ExpectSameAdapters(*a, *b);
}

}  // namespace
}  // namespace mobius::runtime
