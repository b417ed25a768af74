// training.precision fp16 in the standalone trainer (the executors' reference): fp16 weights and
// activations with dynamic loss scaling (worker/train/loss_scaler.h) against the bf16 run of the
// same job, an overflow that is skipped and survived, and a bit-exact resume that carries the
// scaler's state.
//
// Bounds:
//   fp16 vs bf16 over 60 steps (tiny Llama and GPT-2 learning counting sequences): every step's
//   loss within 5% of bf16's plus 0.05 (the two precisions round activations differently from
//   step 1 on: fp16 has 3 more significand bits, so the fp16 run is the closer one to fp32),
//   and the last 10 steps' mean within 10% of bf16's; both learn (last < 0.35 ln V).
//   skipped step     the master weights bitwise unchanged, the scale halved, the loss reported
//   resume           bitwise: losses, loss scales, skips and the final master weights
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test/worker/train/train_test_util.h"
#include "worker/train/standalone_trainer.h"

namespace mobius::train {
namespace {

using testing::TempDir;

TrainerOptions Options(const std::string& model, const std::string& data) {
  TrainerOptions o;
  o.model_dir = model;
  o.data_path = data;
  o.steps = 60;
  o.batch = 8;
  o.microbatch = 4;
  o.seq = 64;
  o.lr = 1e-2;
  o.warmup = 10;
  o.schedule = "cosine";
  o.min_lr = 1e-3;
  o.grad_clip = 1.0;
  o.seed = 5;
  o.threads = 2;
  return o;
}

std::vector<StepStats> Train(const TrainerOptions& o) {
  std::vector<StepStats> out;
  auto t = StandaloneTrainer::Create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return out;
  while (!(*t)->done()) {
    auto st = (*t)->Step();
    EXPECT_TRUE(st.ok()) << st.status();
    if (!st.ok()) break;
    out.push_back(*st);
  }
  return out;
}

class Fp16Test : public ::testing::TestWithParam<std::string> {};

TEST_P(Fp16Test, TracksBf16Over60Steps) {
  TempDir tmp;
  constexpr int64_t kVocab = 64;
  const std::string model = testing::WriteTinyModel(tmp / "model", GetParam(), kVocab);
  const std::string data = testing::WriteCountingTokens(tmp / "data.tok", kVocab, 200, 64);
  TrainerOptions o = Options(model, data);
  const std::vector<StepStats> bf16 = Train(o);
  o.precision = "fp16";
  const std::vector<StepStats> fp16 = Train(o);
  ASSERT_EQ(bf16.size(), 60u);
  ASSERT_EQ(fp16.size(), 60u);
  double tail_b = 0, tail_h = 0;
  int skipped = 0;
  for (size_t i = 0; i < bf16.size(); ++i) {
    if (i % 10 == 9) {
      std::printf("  bf16 %s\n  fp16 %s\n", FormatStepLine(bf16[i]).c_str(),
                  FormatStepLine(fp16[i]).c_str());
    }
    EXPECT_EQ(bf16[i].loss_scale, 0.0f);
    EXPECT_GT(fp16[i].loss_scale, 0.0f);
    skipped += fp16[i].skipped;
    EXPECT_NEAR(fp16[i].loss, bf16[i].loss, 0.05 * bf16[i].loss + 0.05) << "step " << i + 1;
    if (i >= 50) tail_b += bf16[i].loss / 10, tail_h += fp16[i].loss / 10;
  }
  std::printf("  last 10 steps: bf16 %.4f fp16 %.4f (ln V %.4f), %d fp16 steps skipped\n", tail_b,
              tail_h, std::log(kVocab), skipped);
  EXPECT_NEAR(tail_h, tail_b, 0.1 * tail_b);
  EXPECT_LT(tail_b, 0.35 * std::log(kVocab));
  EXPECT_LT(tail_h, 0.35 * std::log(kVocab));
  EXPECT_NE(FormatStepLine(fp16.back()).find("loss scale"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Models, Fp16Test, ::testing::Values("llama", "gpt2"));

// A scale of 2^24 overflows fp16 at once: those steps are skipped (nothing changes), the scale
// halves until the gradients fit, and training goes on.
TEST(Fp16OverflowTest, OverflowingStepsAreSkippedAndSurvived) {
  TempDir tmp;
  constexpr int64_t kVocab = 64;
  const std::string model = testing::WriteTinyModel(tmp / "model", "llama", kVocab);
  const std::string data = testing::WriteCountingTokens(tmp / "data.tok", kVocab, 200, 64);
  TrainerOptions o = Options(model, data);
  o.precision = "fp16";
  o.loss_scale_init = 16777216.0;  // 2^24
  o.steps = 30;
  auto t = StandaloneTrainer::Create(o);
  ASSERT_TRUE(t.ok()) << t.status();
  StandaloneTrainer& trainer = **t;
  int skipped = 0;
  float first_loss = 0, last_loss = 0, scale_before = 16777216.0f;
  while (!trainer.done()) {
    std::map<std::string, std::vector<float>> before;
    for (const auto& [name, tensor] : trainer.master().tensors) before[name] = tensor.data;
    auto st = trainer.Step();
    ASSERT_TRUE(st.ok()) << st.status();
    if (st->step == 1) first_loss = st->loss;
    last_loss = st->loss;
    EXPECT_TRUE(std::isfinite(st->loss)) << "step " << st->step;
    EXPECT_EQ(st->loss_scale, scale_before) << "step " << st->step;
    if (st->skipped) {
      ++skipped;
      std::printf("  %s\n", FormatStepLine(*st).c_str());
      EXPECT_EQ(st->grad_norm, 0.0);
      for (const auto& [name, tensor] : trainer.master().tensors) {
        EXPECT_EQ(std::memcmp(tensor.data.data(), before.at(name).data(),
                              tensor.data.size() * sizeof(float)),
                  0)
            << name << " changed on skipped step " << st->step;
      }
      scale_before = st->loss_scale / 2;
    } else {
      EXPECT_GT(st->grad_norm, 0.0);
    }
  }
  for (const auto& [name, tensor] : trainer.master().tensors) {
    for (float x : tensor.data) ASSERT_TRUE(std::isfinite(x)) << name;
  }
  std::printf("  %d of 30 steps skipped; loss %.4f -> %.4f\n", skipped, first_loss, last_loss);
  EXPECT_GE(skipped, 1);
  EXPECT_LT(skipped, 20);
  EXPECT_LT(last_loss, first_loss);
}

// 8 steps straight vs 4, a checkpoint, and a resumed trainer for 4 more, from a scale that
// overflows: the scaler's state (scale, good steps) comes back with the checkpoint.
TEST(Fp16ResumeTest, ResumeIsBitExactWithTheScalerState) {
  TempDir tmp;
  constexpr int64_t kVocab = 64;
  const std::string model = testing::WriteTinyModel(tmp / "model", "llama", kVocab);
  const std::string data = testing::WriteCountingTokens(tmp / "data.tok", kVocab, 200, 64);
  TrainerOptions o = Options(model, data);
  o.precision = "fp16";
  o.loss_scale_init = 16777216.0;
  o.loss_scale_window = 3;
  o.steps = 8;
  o.warmup = 2;
  o.checkpoint_dir = tmp / "straight";
  auto straight = StandaloneTrainer::Create(o);
  ASSERT_TRUE(straight.ok()) << straight.status();
  std::vector<StepStats> want;
  while (!(*straight)->done()) want.push_back(*(*straight)->Step());

  o.checkpoint_dir = tmp / "split";
  o.checkpoint_every = 4;
  std::vector<StepStats> got;
  {
    auto first = StandaloneTrainer::Create(o);
    ASSERT_TRUE(first.ok()) << first.status();
    for (int i = 0; i < 4; ++i) got.push_back(*(*first)->Step());
  }
  o.resume = true;
  auto second = StandaloneTrainer::Create(o);
  ASSERT_TRUE(second.ok()) << second.status();
  while (!(*second)->done()) got.push_back(*(*second)->Step());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    std::printf("  step %zu loss %.7f scale %g%s | resumed %.7f scale %g%s\n", i + 1, want[i].loss,
                want[i].loss_scale, want[i].skipped ? " skipped" : "", got[i].loss,
                got[i].loss_scale, got[i].skipped ? " skipped" : "");
    EXPECT_EQ(std::memcmp(&got[i].loss, &want[i].loss, sizeof(float)), 0) << "step " << i + 1;
    EXPECT_EQ(got[i].loss_scale, want[i].loss_scale) << "step " << i + 1;
    EXPECT_EQ(got[i].skipped, want[i].skipped) << "step " << i + 1;
  }
  for (const auto& [name, t] : (*straight)->master().tensors) {
    const auto& r = (*second)->master().at(name).data;
    EXPECT_EQ(std::memcmp(r.data(), t.data.data(), r.size() * sizeof(float)), 0) << name;
  }
}

TEST(Fp16OptionsTest, BadPrecisionAndScaleAreInvalidArguments) {
  TempDir tmp;
  const std::string model = testing::WriteTinyModel(tmp / "model", "llama", 64);
  const std::string data = testing::WriteCountingTokens(tmp / "data.tok", 64, 20, 64);
  TrainerOptions o = Options(model, data);
  o.precision = "fp8";
  auto t = StandaloneTrainer::Create(o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("--precision"), std::string::npos) << t.status();
  o.precision = "fp16";
  o.loss_scale_init = 1000;
  t = StandaloneTrainer::Create(o);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("loss_scale_init"), std::string::npos) << t.status();
}

}  // namespace
}  // namespace mobius::train
