// The standalone trainer's LoRA mode (TrainerOptions::adapter): the base stays frozen, the adapters
// learn, checkpoints are PEFT adapter directories, a resumed run continues bit for bit, and bad
// adapter options fail before any step. Tiny models (model_init.h presets), tiny token files.
// The numerics of the adapters themselves are checked against PEFT in
// test/worker/model/lora_golden_test.cc.
//
// Checks and tolerances:
//   step 1's loss            bitwise the full fine-tuning run's (B = 0: the adapters add nothing)
//   base weights             bitwise unchanged after training
//   learning                 counting sequences: last loss < 0.8 * first (bounded by steps)
//   resume                   bitwise: losses, eval losses, final adapters and moments
//   init_dir                 the adapters start bitwise as the directory's
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "test/worker/train/train_test_util.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/train/standalone_trainer.h"

namespace mobius::train {
namespace {

using testing::TempDir;

TrainerOptions LoraOptions(const std::string& model, const std::string& data) {
  TrainerOptions o;
  o.model_dir = model;
  o.data_path = data;
  o.steps = 5;
  o.batch = 4;
  o.microbatch = 2;
  o.seq = 32;
  o.lr = 1e-2;
  o.schedule = "constant";
  o.weight_decay = 0.01;
  o.grad_clip = 1.0;
  o.seed = 7;
  o.threads = 2;
  o.adapter.type = "lora";
  o.adapter.rank = 4;
  o.adapter.alpha = 8;
  return o;
}

std::unique_ptr<StandaloneTrainer> MakeTrainer(const TrainerOptions& o) {
  auto t = StandaloneTrainer::Create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

bool SameBits(const reference::Parameters& a, const reference::Parameters& b,
              const std::string& what) {
  bool same = a.tensors.size() == b.tensors.size();
  EXPECT_EQ(a.tensors.size(), b.tensors.size()) << what;
  for (const auto& [name, t] : a.tensors) {
    auto it = b.tensors.find(name);
    if (it == b.tensors.end() || it->second.data.size() != t.data.size()) {
      ADD_FAILURE() << what << ": " << name << " missing or resized";
      same = false;
      continue;
    }
    if (std::memcmp(t.data.data(), it->second.data.data(), t.data.size() * sizeof(float)) != 0) {
      ADD_FAILURE() << what << ": " << name << " differs";
      same = false;
    }
  }
  return same;
}

std::string ReadText(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class LoraFamilyTest : public ::testing::TestWithParam<std::string> {};

// Step 1 computes with B = 0, so its loss is the base model's; training moves only the adapters.
TEST_P(LoraFamilyTest, FirstLossIsTheBaseModelsAndTheBaseStaysFrozen) {
  TempDir tmp;
  const std::string model = testing::WriteTinyModel(tmp / "model", GetParam());
  const std::string data = testing::WriteRandomTokens(tmp / "data.tok", 512, 10, 100);
  TrainerOptions o = LoraOptions(model, data);
  o.adapter.target_modules = GetParam() == "gpt2"
                                 ? std::vector<std::string>{"c_attn", "c_proj", "c_fc"}
                                 : std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj",
                                                            "gate_proj", "up_proj", "down_proj"};
  auto lora = MakeTrainer(o);
  ASSERT_NE(lora, nullptr);
  const reference::Parameters base_before = lora->master();
  const reference::Parameters adapters_before = lora->adapters();
  EXPECT_FALSE(adapters_before.tensors.empty());
  TrainerOptions full_options = o;
  full_options.adapter = {};
  auto full = MakeTrainer(full_options);
  ASSERT_NE(full, nullptr);
  auto full_first = full->Step();
  ASSERT_TRUE(full_first.ok()) << full_first.status();
  std::vector<float> losses;
  while (!lora->done()) {
    auto st = lora->Step();
    ASSERT_TRUE(st.ok()) << st.status();
    std::printf("  %s\n", FormatStepLine(*st).c_str());
    losses.push_back(st->loss);
    EXPECT_TRUE(std::isfinite(st->grad_norm));
    EXPECT_GT(st->grad_norm, 0);
  }
  EXPECT_EQ(std::memcmp(&losses[0], &full_first->loss, sizeof(float)), 0)
      << losses[0] << " vs " << full_first->loss;
  SameBits(lora->master(), base_before, "base weights");
  // Every adapter moved (B from zero, A by its gradient and decay).
  for (const auto& [name, t] : lora->adapters().tensors) {
    EXPECT_NE(std::memcmp(t.data.data(), adapters_before.at(name).data.data(),
                          t.data.size() * sizeof(float)),
              0)
        << name << " did not move";
  }
}

INSTANTIATE_TEST_SUITE_P(Families, LoraFamilyTest, ::testing::Values("gpt2", "llama"));

TEST(StandaloneLoraTest, LearnsCountingSequences) {
  TempDir tmp;
  constexpr int64_t kVocab = 64;
  const std::string model = testing::WriteTinyModel(tmp / "model", "llama", kVocab);
  const std::string data = testing::WriteCountingTokens(tmp / "data.tok", kVocab, 200, 64);
  TrainerOptions o = LoraOptions(model, data);
  o.steps = 40;
  o.batch = 8;
  o.microbatch = 8;
  o.lr = 2e-2;
  o.warmup = 5;
  o.schedule = "cosine";
  o.min_lr = 2e-3;
  o.weight_decay = 0.0;
  o.adapter.rank = 8;
  o.adapter.alpha = 16;
  o.adapter.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                              "down_proj"};
  auto trainer = MakeTrainer(o);
  ASSERT_NE(trainer, nullptr);
  float first = 0, last = 0;
  while (!trainer->done()) {
    auto st = trainer->Step();
    ASSERT_TRUE(st.ok()) << st.status();
    if (st->step == 1) first = st->loss;
    last = st->loss;
    if (st->step % 10 == 0) std::printf("  %s\n", FormatStepLine(*st).c_str());
  }
  std::printf("  loss %.4f -> %.4f (ln V = %.4f)\n", first, last, std::log(kVocab));
  // The base is random and frozen (embeddings and head included), so the adapters cannot reach
  // what full fine-tuning does (< 0.25 ln V); 40 steps took 4.14 -> 3.09 when written.
  EXPECT_LT(last, 0.8 * first);
}

// 6 steps straight versus 3, a checkpoint (a PEFT adapter directory), and a resumed trainer for 3
// more: the same losses, eval losses, adapters and moments, bit for bit.
TEST(StandaloneLoraTest, ResumeIsBitExactAndCheckpointsArePeftDirectories) {
  TempDir tmp;
  const std::string model = testing::WriteTinyModel(tmp / "model", "llama");
  const std::string data = testing::WriteRandomTokens(tmp / "data.tok", 512, 10, 100);
  TrainerOptions o = LoraOptions(model, data);
  o.steps = 6;
  o.schedule = "cosine";
  o.warmup = 2;
  o.eval_every = 2;
  o.eval_fraction = 0.2;
  o.checkpoint_dir = tmp / "straight";
  auto straight = MakeTrainer(o);
  ASSERT_NE(straight, nullptr);
  std::vector<float> want, got;
  std::vector<std::optional<float>> want_eval, got_eval;
  while (!straight->done()) {
    auto st = straight->Step();
    ASSERT_TRUE(st.ok()) << st.status();
    want.push_back(st->loss);
    want_eval.push_back(st->eval_loss);
  }

  o.checkpoint_dir = tmp / "split";
  o.checkpoint_every = 3;
  {
    auto first = MakeTrainer(o);
    ASSERT_NE(first, nullptr);
    for (int i = 0; i < 3; ++i) {
      auto st = first->Step();
      ASSERT_TRUE(st.ok()) << st.status();
      got.push_back(st->loss);
      got_eval.push_back(st->eval_loss);
      EXPECT_EQ(st->checkpoint.empty(), i != 2);
    }
  }
  const std::filesystem::path ckpt = tmp / "split/checkpoint-00000003";
  for (const char* f : {"adapter_config.json", "adapter_model.safetensors",
                        "optimizer_m.safetensors", "optimizer_v.safetensors",
                        "trainer_state.json", "DONE"}) {
    EXPECT_TRUE(std::filesystem::exists(ckpt / f)) << f;
  }
  // The base is named, not copied.
  EXPECT_FALSE(std::filesystem::exists(ckpt / "model.safetensors"));
  const std::string config = ReadText(ckpt / "adapter_config.json");
  EXPECT_NE(config.find("\"peft_type\": \"LORA\""), std::string::npos) << config;
  EXPECT_NE(config.find(std::filesystem::absolute(model).string()), std::string::npos) << config;
  EXPECT_NE(ReadText(ckpt / "trainer_state.json").find("\"adapter\": \"lora\""),
            std::string::npos);

  o.resume = true;
  auto second = MakeTrainer(o);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->step(), 3);
  while (!second->done()) {
    auto st = second->Step();
    ASSERT_TRUE(st.ok()) << st.status();
    got.push_back(st->loss);
    got_eval.push_back(st->eval_loss);
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    std::printf("  step %zu loss %.7f resumed %.7f\n", i + 1, want[i], got[i]);
    EXPECT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0) << "step " << i + 1;
    EXPECT_EQ(got_eval[i].has_value(), want_eval[i].has_value());
    if (want_eval[i]) EXPECT_EQ(*got_eval[i], *want_eval[i]) << "eval at step " << i + 1;
  }
  SameBits(second->adapters(), straight->adapters(), "adapters");

  // A PEFT adapter directory as the starting point of a new run (no moments, step 0).
  TrainerOptions fresh = LoraOptions(model, data);
  fresh.adapter.init_dir = tmp / "straight/checkpoint-00000006";
  auto from_dir = MakeTrainer(fresh);
  ASSERT_NE(from_dir, nullptr);
  EXPECT_EQ(from_dir->step(), 0);
  SameBits(from_dir->adapters(), straight->adapters(), "adapters from init_dir");
}

TEST(StandaloneLoraTest, BadAdapterOptionsFailBeforeAnyStep) {
  TempDir tmp;
  const std::string model = testing::WriteTinyModel(tmp / "model", "llama");
  const std::string data = testing::WriteRandomTokens(tmp / "data.tok", 512, 10, 100);
  auto fails = [](const TrainerOptions& o, absl::StatusCode code, const std::string& mention) {
    auto t = StandaloneTrainer::Create(o);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), code) << t.status();
    EXPECT_NE(t.status().message().find(mention), std::string::npos) << t.status();
  };
  TrainerOptions o = LoraOptions(model, data);
  o.adapter.target_modules = {"c_attn"};  // GPT-2's, not Llama's
  fails(o, absl::StatusCode::kInvalidArgument, "c_attn");
  o = LoraOptions(model, data);
  o.adapter.rank = 0;
  fails(o, absl::StatusCode::kInvalidArgument, "rank");
  o = LoraOptions(model, data);
  o.optimizer_staleness = 1;
  fails(o, absl::StatusCode::kInvalidArgument, "staleness");
  o = LoraOptions(model, data);
  o.adapter.init_dir = tmp / "nope";
  fails(o, absl::StatusCode::kNotFound, "nope");

  // An adapter of another rank, and a full model's checkpoint, as the starting point.
  TrainerOptions r8 = LoraOptions(model, data);
  r8.adapter.rank = 8;
  r8.steps = 1;
  r8.checkpoint_dir = tmp / "r8";
  {
    auto t = MakeTrainer(r8);
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(t->Step().ok());
  }
  o = LoraOptions(model, data);
  o.adapter.init_dir = tmp / "r8/checkpoint-00000001";
  fails(o, absl::StatusCode::kInvalidArgument, "adapter_config.json");
  TrainerOptions full = LoraOptions(model, data);
  full.adapter = {};
  full.steps = 1;
  full.checkpoint_dir = tmp / "full";
  {
    auto t = MakeTrainer(full);
    ASSERT_NE(t, nullptr);
    ASSERT_TRUE(t->Step().ok());
  }
  o = LoraOptions(model, data);
  o.checkpoint_dir = tmp / "full";
  o.resume = true;
  fails(o, absl::StatusCode::kFailedPrecondition, "adapter");
}

}  // namespace
}  // namespace mobius::train
