// The standalone trainer against the fp32 reference model, and its convergence, gradient
// accumulation, checkpoint/resume and bad-input behaviour. Tiny models (model_init.h presets),
// tiny token files.
//
// Tolerances (bf16 weights and activations on our side, fp32 reference on the same bf16-rounded
// weights; the bounds of test/worker/model/units_golden_test.cc):
//   first-step loss           |diff| <= 1e-2 * |ref|
//   first-step gradients      max|diff| <= 3e-2 * max|ref| + 1e-6 per tensor (worst printed)
//   first 5 losses            |diff| <= 2e-2 * |ref| per step, the reference trained with
//                             reference::AdamW (same decay mask, lr, clipping) on the same batches
//   B=4 MB=2 vs B=4 MB=4      loss |diff| <= 1e-3 * |loss|; gradients 1e-2 * max + 1e-6
//   resume                    bitwise: losses and final master weights
//   kept vs recomputed activations   bitwise: losses, eval losses, gradients, master weights
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/model/layer_units.h"
#include "gtest/gtest.h"
#include "test/worker/train/train_test_util.h"
#include "common/data/loader.h"
#include "worker/optim/adamw.h"
#include "worker/reference/adamw.h"
#include "worker/reference/model.h"
#include "worker/train/standalone_trainer.h"

namespace mobius::train {
namespace {

using testing::TempDir;

struct Diff {
  double max_abs = 0, max_want = 0;
};
Diff MaxDiff(const std::vector<float>& got, const std::vector<float>& want) {
  Diff d;
  for (size_t i = 0; i < want.size(); ++i) {
    d.max_abs = std::max(d.max_abs, std::fabs(static_cast<double>(got[i]) - want[i]));
    d.max_want = std::max(d.max_want, std::fabs(static_cast<double>(want[i])));
  }
  return d;
}

TrainerOptions BaseOptions(const std::string& model, const std::string& data) {
  TrainerOptions o;
  o.model_dir = model;
  o.data_path = data;
  o.steps = 5;
  o.batch = 4;
  o.microbatch = 2;
  o.seq = 32;
  o.lr = 1e-3;
  o.schedule = "constant";
  o.weight_decay = 0.1;
  o.grad_clip = 1.0;
  o.seed = 11;
  o.threads = 2;
  return o;
}

std::unique_ptr<StandaloneTrainer> MakeTrainer(const TrainerOptions& o) {
  auto t = StandaloneTrainer::Create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

class ReferenceTest : public ::testing::TestWithParam<std::string> {};

// Step 1's loss and gradients, then 5 losses against the reference trained on the same batches.
TEST_P(ReferenceTest, FirstStepAndFiveLossesMatchReference) {
  TempDir tmp;
  const std::string model = testing::WriteTinyModel(tmp / "model", GetParam());
  // Counting data and a high lr, so that the loss moves within 5 steps.
  const std::string data = testing::WriteCountingTokens(tmp / "data.tok", 512, 20, 100);
  TrainerOptions o = BaseOptions(model, data);
  o.lr = 1e-2;
  auto trainer = MakeTrainer(o);
  ASSERT_NE(trainer, nullptr);

  // The reference: the model directory's (bf16-rounded) weights, the same loader, AdamW with the
  // model description's decay mask, and the trainer's clipping.
  auto loaded = checkpoint::ReadModelDirectory(model);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto ref = reference::ReferenceModel::Create(loaded->config, loaded->params);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto desc = model::DescribeModel(loaded->config);
  ASSERT_TRUE(desc.ok());
  std::map<std::string, bool> decay;
  for (const auto& unit : desc->units) {
    for (const auto& p : unit.params) decay[p.name] = p.weight_decay;
  }
  reference::AdamW ref_adamw({.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2, .eps = o.eps,
                              .weight_decay = o.weight_decay,
                              .decay = [&](const std::string& n) { return decay.at(n); }});
  auto file = data::TokenFile::Open(data);
  ASSERT_TRUE(file.ok());
  auto loader = data::TokenLoader::Create(
      std::shared_ptr<const data::TokenFile>(*std::move(file)),
      {.seq_len = o.seq, .batch_size = o.batch, .seed = o.seed});
  ASSERT_TRUE(loader.ok()) << loader.status();

  for (int step = 1; step <= 5; ++step) {
    auto batch = (*loader)->NextTrainBatch();
    ASSERT_TRUE(batch.ok());
    auto ref_loss = ref->Forward(batch->tokens.data(), batch->targets.data(), batch->b, batch->t);
    ASSERT_TRUE(ref_loss.ok()) << ref_loss.status();
    ref->ZeroGrad();
    ASSERT_TRUE(ref->Backward().ok());
    auto st = trainer->Step();
    ASSERT_TRUE(st.ok()) << st.status();
    std::printf("  step %d loss %.5f reference %.5f\n", step, st->loss, *ref_loss);
    EXPECT_NEAR(st->loss, *ref_loss, (step == 1 ? 1e-2 : 2e-2) * std::fabs(*ref_loss));

    double sum = 0;
    for (const auto& [name, g] : ref->grads().tensors) {
      for (float x : g.data) sum += static_cast<double>(x) * x;
    }
    if (step == 1) {
      EXPECT_NEAR(st->grad_norm, std::sqrt(sum), 3e-2 * std::sqrt(sum));
      double worst = 0;
      std::string worst_name;
      auto grads = trainer->LastGrads();
      ASSERT_TRUE(grads.ok()) << grads.status();
      for (const auto& [name, want] : ref->grads().tensors) {
        ASSERT_TRUE(grads->contains(name)) << name;
        const Diff d = MaxDiff(grads->at(name), want.data);
        const double bound = 3e-2 * d.max_want + 1e-6;
        EXPECT_LE(d.max_abs, bound) << name << " max|diff| " << d.max_abs;
        if (d.max_abs / bound > worst) worst = d.max_abs / bound, worst_name = name;
      }
      std::printf("  worst gradient: %s at %.2f of its bound\n", worst_name.c_str(), worst);
    }
    const float scale = optim::ClipScale(std::sqrt(sum), o.grad_clip);
    for (auto& [name, g] : ref->grads().tensors) {
      for (float& x : g.data) x *= scale;
    }
    ref_adamw.Step(&ref->params(), ref->grads());
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ReferenceTest, ::testing::Values("gpt2", "llama"));

TEST(StandaloneTrainerTest, GradientAccumulationMatchesOneMicrobatch) {
  TempDir tmp;
  const std::string model = testing::WriteTinyModel(tmp / "model", "llama");
  const std::string data = testing::WriteRandomTokens(tmp / "data.tok", 512, 20, 100);
  TrainerOptions o = BaseOptions(model, data);
  o.steps = 1;
  auto two = MakeTrainer(o);
  o.microbatch = 4;
  auto one = MakeTrainer(o);
  ASSERT_TRUE(two && one);
  auto a = two->Step(), b = one->Step();
  ASSERT_TRUE(a.ok() && b.ok());
  std::printf("  B=4 MB=2 loss %.6f, MB=4 loss %.6f\n", a->loss, b->loss);
  EXPECT_NEAR(a->loss, b->loss, 1e-3 * std::fabs(b->loss));
  auto one_grads = one->LastGrads(), two_grads = two->LastGrads();
  ASSERT_TRUE(one_grads.ok() && two_grads.ok());
  for (const auto& [name, want] : *one_grads) {
    const Diff d = MaxDiff(two_grads->at(name), want);
    EXPECT_LE(d.max_abs, 1e-2 * d.max_want + 1e-6) << name;
  }
}

// Counting mod V is learnable ("next = this + 1"): within 40 steps (~2 s on one idle core) the
// loss must fall far below chance, ln(V).
TEST(StandaloneTrainerTest, LearnsCountingSequences) {
  TempDir tmp;
  constexpr int64_t kVocab = 64;
  const std::string model = testing::WriteTinyModel(tmp / "model", "gpt2", kVocab);
  const std::string data = testing::WriteCountingTokens(tmp / "data.tok", kVocab, 200, 64);
  TrainerOptions o = BaseOptions(model, data);
  o.steps = 40;
  o.batch = 8;
  o.microbatch = 8;
  o.lr = 1e-2;
  o.warmup = 10;
  o.schedule = "cosine";
  o.min_lr = 1e-3;
  o.weight_decay = 0.0;
  auto trainer = MakeTrainer(o);
  ASSERT_NE(trainer, nullptr);
  const auto start = std::chrono::steady_clock::now();
  float first = 0, last = 0;
  while (!trainer->done()) {
    auto st = trainer->Step();
    ASSERT_TRUE(st.ok()) << st.status();
    if (st->step == 1) first = st->loss;
    last = st->loss;
    if (st->step % 10 == 0) std::printf("  %s\n", FormatStepLine(*st).c_str());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("  loss %.4f -> %.4f (ln V = %.4f) in %.1f s\n", first, last, std::log(kVocab),
              seconds);
  EXPECT_GT(first, 0.8 * std::log(kVocab));
  EXPECT_LT(last, 0.25 * std::log(kVocab));  // bounded by steps, not by time (a shared machine)
}

// 6 steps in one go versus 3 steps, a checkpoint, and a resumed process for 3 more: the same
// losses and final weights, bit for bit (warmup + cosine, eval and shuffling all in play); for a
// dense model and the two mixtures of experts (their experts' weights and moments in the
// checkpoint, the same routing after the resume).
class StandaloneResumeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(StandaloneResumeTest, ResumeIsBitExact) {
  TempDir tmp;
  const std::string model = testing::WriteTinyModel(tmp / "model", GetParam());
  const std::string data = testing::WriteRandomTokens(tmp / "data.tok", 512, 10, 100);
  TrainerOptions o = BaseOptions(model, data);
  o.steps = 6;
  o.schedule = "cosine";
  o.warmup = 2;
  o.lr = 3e-3;
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
  }  // the first process ends here
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
  for (const auto& [name, t] : straight->master().tensors) {
    const auto& r = second->master().at(name).data;
    ASSERT_EQ(r.size(), t.data.size());
    EXPECT_EQ(std::memcmp(r.data(), t.data.data(), r.size() * sizeof(float)), 0) << name;
  }
  EXPECT_TRUE(std::filesystem::exists(tmp / "split/checkpoint-00000006/DONE"));
}

INSTANTIATE_TEST_SUITE_P(Families, StandaloneResumeTest,
                         ::testing::Values("gpt2", "qwen3_moe", "mixtral"));

// Optimizer staleness 1 (TrainerOptions::optimizer_staleness): steps 1 and 2 compute with the
// initial weights, step 3 with those after update 1. Checked against a synchronous run whose
// updates cannot move a bf16 weight (lr 1e-30): it computes with the initial weights throughout,
// so its first two losses are the stale run's bit for bit, and its third is not (the stale run's
// step 3 sees update 1). A synchronous run at the same lr differs already at step 2.
TEST(StandaloneTrainerTest, StalenessOneComputesWithTheWeightsOfTwoStepsBack) {
  TempDir tmp;
  const std::string model = testing::WriteTinyModel(tmp / "model", "llama");
  const std::string data = testing::WriteRandomTokens(tmp / "data.tok", 512, 20, 100);
  TrainerOptions o = BaseOptions(model, data);
  o.steps = 3;
  o.lr = 3e-3;
  auto losses = [](const TrainerOptions& opts) {
    std::vector<float> out;
    auto t = MakeTrainer(opts);
    while (t != nullptr && !t->done()) {
      auto st = t->Step();
      EXPECT_TRUE(st.ok()) << st.status();
      if (!st.ok()) break;
      out.push_back(st->loss);
    }
    return out;
  };
  TrainerOptions stale = o;
  stale.optimizer_staleness = 1;
  TrainerOptions frozen = o;
  frozen.lr = 1e-30;
  const std::vector<float> a = losses(stale), b = losses(frozen), c = losses(o);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  ASSERT_EQ(c.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    std::printf("  step %d loss: stale %.7f, initial weights %.7f, synchronous %.7f\n", i + 1,
                a[i], b[i], c[i]);
  }
  EXPECT_EQ(a[0], b[0]);
  EXPECT_EQ(a[1], b[1]);  // step 2 still computes with W_0
  EXPECT_NE(a[2], b[2]);  // step 3 with W_1
  EXPECT_EQ(a[0], c[0]);
  EXPECT_NE(a[1], c[1]);  // the synchronous run's step 2 computes with W_1
}

// With staleness, a checkpoint step is a sync step in every run that checkpoints there, so a run
// resumed from it continues exactly like one that went straight through with the same
// checkpoint_every: the same losses and final weights, bit for bit.
TEST(StandaloneTrainerTest, StalenessResumeIsBitExact) {
  TempDir tmp;
  const std::string model = testing::WriteTinyModel(tmp / "model", "gpt2");
  const std::string data = testing::WriteRandomTokens(tmp / "data.tok", 512, 10, 100);
  TrainerOptions o = BaseOptions(model, data);
  o.steps = 7;
  o.lr = 3e-3;
  o.optimizer_staleness = 1;
  o.checkpoint_every = 3;
  o.checkpoint_dir = tmp / "straight";
  std::vector<float> want, got;
  auto straight = MakeTrainer(o);
  ASSERT_NE(straight, nullptr);
  while (!straight->done()) {
    auto st = straight->Step();
    ASSERT_TRUE(st.ok()) << st.status();
    want.push_back(st->loss);
  }
  o.checkpoint_dir = tmp / "split";
  {
    auto first = MakeTrainer(o);
    ASSERT_NE(first, nullptr);
    for (int i = 0; i < 3; ++i) {
      auto st = first->Step();
      ASSERT_TRUE(st.ok()) << st.status();
      got.push_back(st->loss);
    }
  }
  o.resume = true;
  auto second = MakeTrainer(o);
  ASSERT_NE(second, nullptr);
  while (!second->done()) {
    auto st = second->Step();
    ASSERT_TRUE(st.ok()) << st.status();
    got.push_back(st->loss);
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0) << "step " << i + 1;
  }
  for (const auto& [name, t] : straight->master().tensors) {
    const auto& r = second->master().at(name).data;
    ASSERT_EQ(r.size(), t.data.size());
    EXPECT_EQ(std::memcmp(r.data(), t.data.data(), r.size() * sizeof(float)), 0) << name;
  }
}

// Keeping the activations (the default when they fit) and recomputing them give the same run,
// bit for bit: losses, eval losses (forward only), gradients and master weights.
TEST(StandaloneTrainerTest, KeptActivationsAreBitExactWithRecompute) {
  TempDir tmp;
  const std::string model = testing::WriteTinyModel(tmp / "model", "gpt2");
  const std::string data = testing::WriteRandomTokens(tmp / "data.tok", 512, 20, 100);
  TrainerOptions o = BaseOptions(model, data);
  o.steps = 3;
  o.eval_every = 1;
  o.eval_fraction = 0.2;
  auto kept = MakeTrainer(o);
  o.recompute = true;
  auto recomputed = MakeTrainer(o);
  ASSERT_TRUE(kept && recomputed);
  EXPECT_FALSE(kept->recomputes());
  EXPECT_TRUE(recomputed->recomputes());
  while (!kept->done()) {
    auto a = kept->Step(), b = recomputed->Step();
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->loss, b->loss) << "step " << a->step;
    ASSERT_TRUE(a->eval_loss && b->eval_loss);
    EXPECT_EQ(*a->eval_loss, *b->eval_loss) << "step " << a->step;
    auto kept_grads = kept->LastGrads(), recomputed_grads = recomputed->LastGrads();
    ASSERT_TRUE(kept_grads.ok() && recomputed_grads.ok());
    for (const auto& [name, g] : *kept_grads) {
      EXPECT_TRUE(g == recomputed_grads->at(name)) << name << " at step " << a->step;
    }
  }
  for (const auto& [name, t] : kept->master().tensors) {
    EXPECT_TRUE(t.data == recomputed->master().at(name).data) << name;
  }
}

// A device cap that holds the model with recompute but not every unit's activations: the trainer
// falls back to recompute instead of failing.
TEST(StandaloneTrainerTest, FallsBackToRecomputeUnderATightCap) {
  TempDir tmp;
  const std::string model = testing::WriteTinyModel(tmp / "model", "llama");
  const std::string data = testing::WriteRandomTokens(tmp / "data.tok", 512, 20, 100);
  TrainerOptions o = BaseOptions(model, data);
  o.recompute = true;
  uint64_t lo = 1 << 10, hi = uint64_t{1} << 30;  // the smallest cap that fits with recompute
  while (hi - lo > (1 << 10)) {
    o.device_memory_bytes = (lo + hi) / 2;
    (StandaloneTrainer::Create(o).ok() ? hi : lo) = o.device_memory_bytes;
  }
  o.device_memory_bytes = hi;
  o.recompute = false;
  auto tight = MakeTrainer(o);
  ASSERT_NE(tight, nullptr);
  EXPECT_TRUE(tight->recomputes());
  EXPECT_TRUE(tight->Step().ok());
}

TEST(StandaloneTrainerTest, BadInputFailsBeforeAnyStep) {
  TempDir tmp;
  const std::string model = testing::WriteTinyModel(tmp / "model", "llama");
  const std::string data = testing::WriteRandomTokens(tmp / "data.tok", 512, 20, 100);
  auto code = [](const TrainerOptions& o) {
    auto t = StandaloneTrainer::Create(o);
    if (!t.ok()) std::printf("  %s\n", t.status().ToString().c_str());
    return t.status().code();
  };
  TrainerOptions o = BaseOptions(model, data);
  o.microbatch = 3;
  EXPECT_EQ(code(o), absl::StatusCode::kInvalidArgument);
  o = BaseOptions(tmp / "nope", data);
  EXPECT_EQ(code(o), absl::StatusCode::kNotFound);
  o = BaseOptions(model, tmp / "nope.tok");
  EXPECT_EQ(code(o), absl::StatusCode::kNotFound);
  o = BaseOptions(model, data);
  o.batch = 64;  // 2000 tokens hold 62 sequences of 32
  o.microbatch = 64;
  EXPECT_EQ(code(o), absl::StatusCode::kInvalidArgument);
  o = BaseOptions(model, data);
  o.device_memory_bytes = 200 << 10;
  EXPECT_EQ(code(o), absl::StatusCode::kResourceExhausted);
  // An id the model cannot embed (the file's own vocabulary is larger).
  const std::string wide = tmp / "wide.tok";
  ASSERT_TRUE(data::WriteTokenFile(wide, {{.ids = std::vector<int32_t>(500, 3)},
                                          {.ids = {1, 2, 700, 4}}},
                                   1024)
                  .ok());
  o = BaseOptions(model, wide);
  auto t = StandaloneTrainer::Create(o);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("position 502"), std::string::npos) << t.status();
  o = BaseOptions(model, data);
  o.resume = true;
  o.checkpoint_dir = tmp / "empty";
  EXPECT_EQ(code(o), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace mobius::train
