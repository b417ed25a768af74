// The reference model as a whole, independent of PyTorch: whole-model finite differences for
// every feature combination, gradient accumulation over microbatches, AdamW against its formula,
// input validation, and learning a small synthetic task.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/reference/adamw.h"
#include "worker/reference/model.h"
#include "worker/reference/ops_loss.h"

namespace mobius::reference {
namespace {

using model::ModelConfig;
using ::testing::HasSubstr;

ModelConfig TinyGpt2(int64_t vocab = 16) {
  ModelConfig c;
  c.family = model::Family::kGpt2;
  c.model_type = "gpt2";
  c.vocab_size = vocab;
  c.hidden_size = 16;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.intermediate_size = 32;
  c.max_position_embeddings = 16;
  c.attention_bias = c.attention_output_bias = c.mlp_bias = true;
  return c;
}

ModelConfig TinyLlama(int64_t vocab = 16) {
  ModelConfig c;
  c.family = model::Family::kLlama;
  c.model_type = "llama";
  c.vocab_size = vocab;
  c.hidden_size = 16;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  c.intermediate_size = 24;
  c.max_position_embeddings = 64;
  c.norm = model::NormKind::kRmsNorm;
  c.norm_eps = 1e-6;
  c.mlp = model::MlpKind::kSwiGlu;
  c.position = model::PositionKind::kRope;
  c.tie_word_embeddings = false;
  return c;
}

// Every Llama-family switch at once: qk_norm, q/k/v/o and MLP biases, wide heads, tied head,
// llama3 RoPE scaling and a sliding window.
ModelConfig TinyEverything() {
  ModelConfig c = TinyLlama();
  c.family = model::Family::kQwen3;
  c.head_dim = 6;  // heads * head_dim = 24 != hidden 16
  c.qk_norm = true;
  c.attention_bias = c.attention_output_bias = c.mlp_bias = true;
  c.tie_word_embeddings = true;
  c.rope_scaling = {.type = model::RopeScaling::Type::kLlama3,
                    .factor = 8.0,
                    .low_freq_factor = 1.0,
                    .high_freq_factor = 4.0,
                    .original_max_position_embeddings = 8};
  c.sliding_window = 3;
  return c;
}

// Init with N(0, std) weights and perturbed norms/biases so that every term matters.
Parameters PerturbedParameters(const ModelConfig& config, uint32_t seed) {
  Parameters p = InitParameters(config, seed);
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& [name, t] : p.tensors) {
    const float scale = t.shape.size() == 1 ? 0.1f : 0.3f;
    for (float& x : t.data) x += scale * dist(gen);
  }
  return p;
}

std::vector<int32_t> RandomTokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = static_cast<int32_t>(gen() % vocab);
  return v;
}

class WholeModelGradient : public ::testing::TestWithParam<std::string> {};

ModelConfig ConfigNamed(const std::string& name) {
  if (name == "gpt2") return TinyGpt2();
  if (name == "llama") return TinyLlama();
  return TinyEverything();
}

TEST_P(WholeModelGradient, MatchesFiniteDifferences) {
  const ModelConfig config = ConfigNamed(GetParam());
  auto model = ReferenceModel::Create(config, PerturbedParameters(config, 7));
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t b = 2, t = 5;
  const std::vector<int32_t> tokens = RandomTokens(b * t, config.vocab_size, 1);
  std::vector<int32_t> targets = RandomTokens(b * t, config.vocab_size, 2);
  targets[3] = kIgnoreIndex;
  ASSERT_TRUE(model->Forward(tokens.data(), targets.data(), b, t).ok());
  ASSERT_TRUE(model->Backward().ok());
  const Parameters analytic = model->grads();

  // A few elements of every tensor: the first, the last and one in the middle.
  std::mt19937 gen(3);
  for (auto& [name, tensor] : model->params().tensors) {
    for (int64_t i : {int64_t{0}, tensor.numel() / 2, tensor.numel() - 1}) {
      const float saved = tensor.data[i];
      const float h = 1e-2f;
      tensor.data[i] = saved + h;
      const double up = *model->Forward(tokens.data(), targets.data(), b, t);
      tensor.data[i] = saved - h;
      const double down = *model->Forward(tokens.data(), targets.data(), b, t);
      tensor.data[i] = saved;
      const double numeric = (up - down) / (static_cast<double>(saved + h) - (saved - h));
      const double got = analytic.at(name).data[i];
      EXPECT_NEAR(got, numeric, 2e-3 * std::max(1.0, std::fabs(numeric)) + 5e-4)
          << name << "[" << i << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, WholeModelGradient,
                         ::testing::Values("gpt2", "llama", "everything"));

TEST(ReferenceModel, GradientAccumulationOverMicrobatches) {
  const ModelConfig config = TinyLlama();
  auto model = ReferenceModel::Create(config, PerturbedParameters(config, 3));
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t t = 6;
  const std::vector<int32_t> tokens = RandomTokens(2 * t, config.vocab_size, 4);
  std::vector<int32_t> targets = RandomTokens(2 * t, config.vocab_size, 5);
  targets[1] = targets[2] = kIgnoreIndex;  // row 0 counts 4 targets, row 1 counts 6
  ASSERT_TRUE(model->Forward(tokens.data(), targets.data(), 2, t).ok());
  ASSERT_TRUE(model->Backward().ok());
  const Parameters full = model->grads();

  model->ZeroGrad();
  const float shares[2] = {4.0f / 10.0f, 6.0f / 10.0f};
  for (int row = 0; row < 2; ++row) {
    ASSERT_TRUE(model->Forward(tokens.data() + row * t, targets.data() + row * t, 1, t).ok());
    ASSERT_TRUE(model->Backward(shares[row]).ok());
  }
  for (const auto& [name, g] : full.tensors) {
    const std::vector<float>& acc = model->grads().at(name).data;
    for (size_t i = 0; i < g.data.size(); ++i) {
      ASSERT_NEAR(acc[i], g.data[i], 1e-6 + 1e-5 * std::fabs(g.data[i])) << name << "[" << i << "]";
    }
  }
}

TEST(ReferenceModel, InitialisationAndNames) {
  const ModelConfig config = TinyGpt2();
  const Parameters p = InitParameters(config, 1);
  EXPECT_TRUE(ValidateParameters(config, p).ok());
  EXPECT_THAT(p.at("transformer.h.1.attn.c_attn.weight").shape, ::testing::ElementsAre(16, 48));
  EXPECT_EQ(p.at("transformer.h.0.ln_1.weight").data[3], 1.0f);
  EXPECT_EQ(p.at("transformer.h.0.mlp.c_fc.bias").data[3], 0.0f);
  double sum2 = 0.0;
  const auto& w = p.at("transformer.h.0.mlp.c_fc.weight").data;
  for (float x : w) sum2 += x * x;
  EXPECT_NEAR(std::sqrt(sum2 / w.size()), 0.02, 0.003);
  // Deterministic for a seed, different across seeds.
  EXPECT_EQ(InitParameters(config, 1).at("transformer.wte.weight").data,
            p.at("transformer.wte.weight").data);
  EXPECT_NE(InitParameters(config, 2).at("transformer.wte.weight").data,
            p.at("transformer.wte.weight").data);

  const ModelConfig qwen = TinyEverything();
  const Parameters q = ZeroParameters(qwen);
  EXPECT_THAT(q.at("model.layers.0.self_attn.q_proj.weight").shape, ::testing::ElementsAre(24, 16));
  EXPECT_THAT(q.at("model.layers.0.self_attn.o_proj.weight").shape, ::testing::ElementsAre(16, 24));
  EXPECT_THAT(q.at("model.layers.1.self_attn.k_norm.weight").shape, ::testing::ElementsAre(6));
  EXPECT_FALSE(q.tensors.contains("lm_head.weight"));
  EXPECT_TRUE(ZeroParameters(TinyLlama()).tensors.contains("lm_head.weight"));
  EXPECT_FALSE(
      ZeroParameters(TinyLlama()).tensors.contains("model.layers.0.self_attn.q_proj.bias"));
}

TEST(ReferenceModel, RejectsBadInputs) {
  const ModelConfig config = TinyGpt2();
  Parameters params = InitParameters(config, 1);
  params.tensors.erase("transformer.h.1.ln_2.bias");
  auto bad = ReferenceModel::Create(config, params);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("transformer.h.1.ln_2.bias"));

  ModelConfig odd = config;
  odd.num_kv_heads = 1;
  EXPECT_FALSE(ReferenceModel::Create(odd, InitParameters(config, 1)).ok());

  auto model = ReferenceModel::Create(config, InitParameters(config, 1));
  ASSERT_TRUE(model.ok());
  const std::vector<int32_t> tokens{1, 2, 16}, targets{2, 3, 4};
  EXPECT_EQ(model->Forward(tokens.data(), targets.data(), 1, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<int32_t> long_seq(17, 1);
  EXPECT_EQ(model->Forward(long_seq.data(), nullptr, 1, 17).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(model->Forward(tokens.data(), nullptr, 1, 2).ok());
  EXPECT_EQ(model->Backward().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(model->logits().size(), 2u * 16u);
}

TEST(AdamW, MatchesPyTorchFormula) {
  Parameters params, grads;
  params.tensors["w"] = Tensor{{2}, {1.0f, -2.0f}};
  params.tensors["b"] = Tensor{{1}, {0.5f}};
  grads.tensors["w"] = Tensor{{2}, {0.1f, -0.3f}};
  grads.tensors["b"] = Tensor{{1}, {0.2f}};
  const double lr = 0.1, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  AdamW adamw({.lr = lr,
               .beta1 = b1,
               .beta2 = b2,
               .eps = eps,
               .weight_decay = wd,
               .decay = [](const std::string& name) { return name != "b"; }});
  double p = 1.0, pb = 0.5, m = 0, v = 0, mb = 0, vb = 0;
  for (int step = 1; step <= 3; ++step) {
    adamw.Step(&params, grads);
    const double g = 0.1, gb = 0.2;
    p *= 1 - lr * wd;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    p -= lr / (1 - std::pow(b1, step)) * m /
         (std::sqrt(v) / std::sqrt(1 - std::pow(b2, step)) + eps);
    mb = b1 * mb + (1 - b1) * gb;  // "b" is excluded from decay by the mask
    vb = b2 * vb + (1 - b2) * gb * gb;
    pb -= lr / (1 - std::pow(b1, step)) * mb /
          (std::sqrt(vb) / std::sqrt(1 - std::pow(b2, step)) + eps);
    EXPECT_NEAR(params.at("w").data[0], p, 1e-6) << "step " << step;
    EXPECT_NEAR(params.at("b").data[0], pb, 1e-6) << "step " << step;
  }
  EXPECT_EQ(adamw.step(), 3);
  // The first step moves every parameter by lr (times sign of g) plus decay.
  EXPECT_NEAR(params.at("w").data[1], -2.0 * std::pow(1 - lr * wd, 3) + 0.3, 0.05);
}

// Sequences that count with a per-sequence stride: x[i+1] = (x[i] + stride) mod V. Predicting the
// next token needs the previous two (attention).
void CountingBatch(std::mt19937& gen, int64_t b, int64_t t, int64_t vocab,
                   std::vector<int32_t>* tokens, std::vector<int32_t>* targets) {
  tokens->assign(b * t, 0);
  targets->assign(b * t, kIgnoreIndex);
  for (int64_t row = 0; row < b; ++row) {
    const int32_t start = static_cast<int32_t>(gen() % vocab);
    const int32_t stride = 1 + static_cast<int32_t>(gen() % 3);
    for (int64_t i = 0; i < t; ++i)
      (*tokens)[row * t + i] = static_cast<int32_t>((start + stride * i) % vocab);
    // Position 0 cannot know the stride; the last position has no next token.
    for (int64_t i = 1; i + 1 < t; ++i) (*targets)[row * t + i] = (*tokens)[row * t + i + 1];
  }
}

class Convergence : public ::testing::TestWithParam<std::string> {};

TEST_P(Convergence, LearnsStridedCounting) {
  const ModelConfig config = GetParam() == "gpt2" ? TinyGpt2() : TinyLlama();
  auto model = ReferenceModel::Create(config, InitParameters(config, 11));
  ASSERT_TRUE(model.ok()) << model.status();
  AdamW adamw({.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.0});
  std::mt19937 gen(5);
  std::vector<int32_t> tokens, targets;
  const int64_t b = 8, t = 12;
  float loss = 0.0f, first = 0.0f;
  int step = 0;
  for (; step < 400; ++step) {
    CountingBatch(gen, b, t, config.vocab_size, &tokens, &targets);
    auto l = model->Forward(tokens.data(), targets.data(), b, t);
    ASSERT_TRUE(l.ok());
    if (step == 0) first = *l;
    loss = *l;
    if (loss < 0.1f) break;
    model->ZeroGrad();
    ASSERT_TRUE(model->Backward().ok());
    adamw.Step(&model->params(), model->grads());
  }
  std::printf("  %s: loss %.4f at step 0, %.4f at step %d (ln V = %.4f)\n", GetParam().c_str(),
              first, loss, step, std::log(static_cast<double>(config.vocab_size)));
  EXPECT_NEAR(first, std::log(static_cast<double>(config.vocab_size)), 0.1);
  EXPECT_LT(loss, 0.1f);
}

INSTANTIATE_TEST_SUITE_P(Models, Convergence, ::testing::Values("gpt2", "llama"));

}  // namespace
}  // namespace mobius::reference
