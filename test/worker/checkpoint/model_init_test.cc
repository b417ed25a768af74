// The tiny-model generator: every family preset loads through LoadModelConfig + the safetensors
// reader + the reference model, starts at loss ~ ln(V), and is byte-for-byte reproducible.
#include "worker/checkpoint/model_init.h"

#include <cmath>
#include <random>

#include "absl/status/status.h"
#include "common/model/model_config_parse.h"
#include "common/numeric/bf16.h"
#include "gtest/gtest.h"
#include "test/worker/checkpoint/test_util.h"
#include "worker/checkpoint/tensor_files.h"
#include "worker/io/safetensors.h"
#include "worker/reference/model.h"

namespace mobius::checkpoint {
namespace {

using model::Family;
using testing::ReadAll;
using testing::TempDir;

class FamilyTest : public ::testing::TestWithParam<Family> {};

TEST_P(FamilyTest, TinyPresetLoadsAndStartsAtLnVocab) {
  TempDir dir;
  auto config = PresetConfig(GetParam(), "tiny", {});
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(WriteModelDirectory(dir.path(), *config, InitModelParameters(*config, 7), {}).ok());

  auto loaded_config = model::LoadModelConfig(dir.path());
  ASSERT_TRUE(loaded_config.ok()) << loaded_config.status();
  EXPECT_EQ(loaded_config->model_type, model::FamilyName(GetParam()));
  EXPECT_EQ(loaded_config->num_kv_heads, config->num_kv_heads);
  EXPECT_EQ(loaded_config->head_dim, config->head_dim);
  EXPECT_EQ(loaded_config->tie_word_embeddings, config->tie_word_embeddings);

  // Independently of tensor_files: the io reader sees exactly the HF names, shapes, BF16.
  auto st = io::SafetensorsModel::Open(dir.path());
  ASSERT_TRUE(st.ok()) << st.status();
  const auto shapes = reference::ParameterShapes(*loaded_config);
  EXPECT_EQ(st.value()->names().size(), shapes.size());
  reference::Parameters params;
  for (const auto& [name, shape] : shapes) {
    const io::TensorView* view = st.value()->Find(name);
    ASSERT_NE(view, nullptr) << name;
    EXPECT_EQ(view->dtype, io::DType::kBF16) << name;
    EXPECT_EQ(view->shape, shape) << name;
    reference::Tensor& t = params.tensors[name];
    t.shape = shape;
    t.data.resize(view->num_elements());
    io::CopyToF32(*view, t.data.data());
  }
  auto model = reference::ReferenceModel::Create(*loaded_config, std::move(params));
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t B = 2, T = 16;
  std::mt19937 rng(1);
  std::vector<int32_t> tokens(B * T), targets(B * T);
  for (auto& x : tokens) x = static_cast<int32_t>(rng() % config->vocab_size);
  for (auto& x : targets) x = static_cast<int32_t>(rng() % config->vocab_size);
  auto loss = model->Forward(tokens.data(), targets.data(), B, T);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_TRUE(std::isfinite(*loss));
  EXPECT_NEAR(*loss, std::log(static_cast<double>(config->vocab_size)), 0.1);
}

TEST_P(FamilyTest, ConfigJsonRoundTrips) {
  auto config = PresetConfig(GetParam(), "small", {});
  ASSERT_TRUE(config.ok()) << config.status();
  auto parsed = model::ParseModelConfig(ModelConfigJson(*config, io::DType::kF32), "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->hidden_size, config->hidden_size);
  EXPECT_EQ(parsed->num_layers, config->num_layers);
  EXPECT_EQ(parsed->intermediate_size, config->intermediate_size);
  EXPECT_EQ(parsed->vocab_size, config->vocab_size);
  EXPECT_EQ(parsed->attention_bias, config->attention_bias);
  EXPECT_EQ(parsed->attention_output_bias, config->attention_output_bias);
  EXPECT_EQ(parsed->qk_norm, config->qk_norm);
  EXPECT_EQ(parsed->norm_eps, config->norm_eps);
  EXPECT_EQ(parsed->rope_theta, config->rope_theta);
  EXPECT_EQ(parsed->eos_token_id, config->eos_token_id);
}

INSTANTIATE_TEST_SUITE_P(AllFamilies, FamilyTest,
                         ::testing::Values(Family::kGpt2, Family::kLlama, Family::kMistral,
                                           Family::kQwen2, Family::kQwen3),
                         [](const auto& info) { return model::FamilyName(info.param); });

TEST(ModelInitTest, SameSeedSameBytesDifferentSeedDifferentWeights) {
  auto config = PresetConfig(Family::kQwen3, "qwen3-tiny", {});
  ASSERT_TRUE(config.ok()) << config.status();
  TempDir a, b, c;
  ASSERT_TRUE(WriteModelDirectory(a.path(), *config, InitModelParameters(*config, 5), {}).ok());
  ASSERT_TRUE(WriteModelDirectory(b.path(), *config, InitModelParameters(*config, 5), {}).ok());
  ASSERT_TRUE(WriteModelDirectory(c.path(), *config, InitModelParameters(*config, 6), {}).ok());
  for (const char* f : {"config.json", "model.safetensors", "generation_config.json"}) {
    EXPECT_EQ(ReadAll(a / f), ReadAll(b / f)) << f;
  }
  EXPECT_EQ(ReadAll(a / "config.json"), ReadAll(c / "config.json"));
  EXPECT_NE(ReadAll(a / "model.safetensors"), ReadAll(c / "model.safetensors"));
}

// Pins the generator's output so a change of PRNG, Box-Muller or naming is noticed (and so that
// another machine or standard library producing different bytes fails here).
constexpr uint64_t kGoldenGpt2TinySeed0 = 0xa3fce1ace31bb671ull;

TEST(ModelInitTest, GoldenDigest) {
  auto config = PresetConfig(Family::kGpt2, "tiny", {});
  ASSERT_TRUE(config.ok());
  TempDir dir;
  ASSERT_TRUE(WriteModelDirectory(dir.path(), *config, InitModelParameters(*config, 0), {}).ok());
  auto digest = DigestFile(dir / "model.safetensors");
  ASSERT_TRUE(digest.ok());
  EXPECT_EQ(digest->fnv1a64, kGoldenGpt2TinySeed0) << std::hex << digest->fnv1a64;
}

double Stddev(const reference::Tensor& t) {
  double sum = 0, sum2 = 0;
  for (float x : t.data) sum += x, sum2 += double{x} * x;
  const double n = static_cast<double>(t.data.size()), mean = sum / n;
  return std::sqrt(sum2 / n - mean * mean);
}

TEST(ModelInitTest, Gpt2InitialisationFollowsTransformers) {
  auto config = PresetConfig(Family::kGpt2, "tiny", {});
  ASSERT_TRUE(config.ok());
  const reference::Parameters p = InitModelParameters(*config, 3);
  EXPECT_NEAR(Stddev(p.at("transformer.h.0.mlp.c_fc.weight")), 0.02, 0.02 * 0.05);
  EXPECT_NEAR(Stddev(p.at("transformer.wte.weight")), 0.02, 0.02 * 0.05);
  const double residual = 0.02 / std::sqrt(2.0 * config->num_layers);  // 0.01 at L = 2
  EXPECT_NEAR(Stddev(p.at("transformer.h.1.mlp.c_proj.weight")), residual, residual * 0.05);
  EXPECT_NEAR(Stddev(p.at("transformer.h.1.attn.c_proj.weight")), residual, residual * 0.05);
  for (float x : p.at("transformer.ln_f.weight").data) EXPECT_EQ(x, 1.0f);
  for (float x : p.at("transformer.h.0.attn.c_attn.bias").data) EXPECT_EQ(x, 0.0f);
}

TEST(ModelInitTest, Fp32DirectoryHoldsExactValues) {
  auto config = PresetConfig(Family::kLlama, "tiny", {.vocab = 100});
  ASSERT_TRUE(config.ok()) << config.status();
  const reference::Parameters params = InitModelParameters(*config, 11);
  TempDir dir;
  ASSERT_TRUE(WriteModelDirectory(dir.path(), *config, params, {.dtype = io::DType::kF32}).ok());
  auto loaded = ReadModelDirectory(dir.path());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->config.vocab_size, 100);
  for (const auto& [name, t] : params.tensors) EXPECT_EQ(loaded->params.at(name).data, t.data);
}

TEST(ModelInitTest, ShardedDirectoryIsTheHuggingFaceLayout) {
  auto config = PresetConfig(Family::kLlama, "tiny", {});
  ASSERT_TRUE(config.ok());
  const reference::Parameters params = InitModelParameters(*config, 2);
  TempDir dir;
  WriteModelOptions options;
  options.max_shard_bytes = 40000;
  ASSERT_TRUE(WriteModelDirectory(dir.path(), *config, params, options).ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir / "model.safetensors.index.json"));
  int shards = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    shards += e.path().filename().string().starts_with("model-0000");
  }
  EXPECT_GE(shards, 2);
  auto st = io::SafetensorsModel::Open(dir.path());  // the io reader follows the index
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st.value()->names().size(), params.tensors.size());
  auto loaded = ReadModelDirectory(dir.path());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  for (const auto& [name, t] : params.tensors) {
    const auto& got = loaded->params.at(name).data;
    ASSERT_EQ(got.size(), t.data.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], numeric::Bf16ToFp32(numeric::Fp32ToBf16(t.data[i]))) << name;
    }
  }
}

TEST(ModelInitTest, OverridesAndErrors) {
  auto c = PresetConfig(Family::kLlama, "tiny", {.layers = 3, .hidden = 96, .heads = 6,
                                                 .kv_heads = 3});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_layers, 3);
  EXPECT_EQ(c->head_dim, 16);
  auto unknown = PresetConfig(Family::kLlama, "huge", {});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("tiny, small"), std::string::npos);
  auto gqa = PresetConfig(Family::kLlama, "tiny", {.heads = 6, .kv_heads = 4});
  EXPECT_EQ(gqa.status().code(), absl::StatusCode::kInvalidArgument) << gqa.status();
  auto gpt2_gqa = PresetConfig(Family::kGpt2, "tiny", {.kv_heads = 2});
  EXPECT_EQ(gpt2_gqa.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseFamily("bert").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ModelInitTest, ReadModelDirectoryNamesAMisshapenTensor) {
  auto config = PresetConfig(Family::kQwen2, "tiny", {});
  ASSERT_TRUE(config.ok());
  TempDir dir;
  ASSERT_TRUE(WriteModelDirectory(dir.path(), *config, InitModelParameters(*config, 1), {}).ok());
  // Same tensors, config claims a wider MLP.
  auto wider = PresetConfig(Family::kQwen2, "tiny", {.intermediate = 256});
  testing::WriteAll(dir / "config.json", ModelConfigJson(*wider, io::DType::kBF16));
  auto loaded = ReadModelDirectory(dir.path());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(loaded.status().message().find("model.layers.0.mlp.gate_proj.weight"),
            std::string::npos)
      << loaded.status();
}

}  // namespace
}  // namespace mobius::checkpoint
