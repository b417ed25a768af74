// The sampler's contract (worker/generate/sampler.h) and sampled generation on a golden model:
// the same seed gives the same tokens, different seeds (generally) different ones, a top_p that
// keeps one token is greedy, temperature 0 is greedy, and the draws follow the softmax.
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test/worker/model/units_test_util.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/generate/decoder.h"
#include "worker/generate/generate.h"
#include "worker/generate/sampler.h"

namespace mobius::generate {
namespace {

TEST(SamplerTest, GreedyIsTheFirstLargestLogit) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  Sampler greedy({});
  EXPECT_EQ(greedy.Next(logits.data(), 4), 1);
  EXPECT_EQ(Argmax(logits.data(), 4), 1);
  Sampler tiny_p({.temperature = 1.0, .top_p = 1e-9, .seed = 3});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(tiny_p.Next(logits.data(), 4), 1);
}

TEST(SamplerTest, DrawsFollowTheSoftmaxOfTheNucleus) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.05f)};
  // top_p 0.8 keeps {0, 1} (0.5 + 0.3 reaches 0.8): renormalised 0.625 / 0.375.
  Sampler s({.temperature = 1.0, .top_p = 0.8, .seed = 42});
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[s.Next(logits.data(), 4)];
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_NEAR(counts[0] / double{n}, 0.625, 0.015);
  EXPECT_NEAR(counts[1] / double{n}, 0.375, 0.015);
  // The whole distribution with top_p 1 and temperature 2: p ~ sqrt of the above.
  Sampler all({.temperature = 2.0, .top_p = 1.0, .seed = 43});
  counts.clear();
  for (int i = 0; i < n; ++i) ++counts[all.Next(logits.data(), 4)];
  double z = 0;
  for (float l : logits) z += std::exp(l / 2.0);
  for (int32_t id = 0; id < 4; ++id) {
    EXPECT_NEAR(counts[id] / double{n}, std::exp(logits[id] / 2.0) / z, 0.015) << id;
  }
}

TEST(SamplerTest, ValidationNamesTheFlag) {
  EXPECT_TRUE(ValidateSampling({.temperature = 0.7, .top_p = 0.9}).ok());
  const absl::Status t = ValidateSampling({.temperature = -1});
  EXPECT_EQ(t.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.message().find("--temperature"), std::string::npos);
  EXPECT_NE(ValidateSampling({.temperature = NAN}).message().find("--temperature"),
            std::string::npos);
  for (double p : {0.0, 1.5, -0.1, double{NAN}}) {
    EXPECT_NE(ValidateSampling({.top_p = p}).message().find("--top_p"), std::string::npos) << p;
  }
}

class SampledGenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto g = units::testing::LoadGolden("llama_gqa");
    ASSERT_TRUE(g.ok()) << g.status();
    g_ = *std::move(g);
    backend::CpuBackendOptions options;
    options.op_threads = 2;
    backend_ = *backend::CpuBackend::Create(options);
    auto d = Decoder::Create(g_.config, backend_.get(), {.capacity = 32});
    ASSERT_TRUE(d.ok()) << d.status();
    decoder_ = *std::move(d);
    ASSERT_TRUE(decoder_->SetWeights(g_.bf16).ok());
  }
  std::vector<int32_t> Run(const SamplingOptions& s) {
    auto r = Generate(*decoder_, prompt_, {.max_new_tokens = 20, .sampling = s});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->tokens : std::vector<int32_t>{};
  }

  units::testing::Golden g_;
  std::unique_ptr<backend::CpuBackend> backend_;
  std::unique_ptr<Decoder> decoder_;
  const std::vector<int32_t> prompt_ = {5, 17, 42, 9};
};

TEST_F(SampledGenerationTest, SameSeedSameTokensOtherSeedsOtherTokens) {
  const SamplingOptions s{.temperature = 1.0, .top_p = 0.95, .seed = 7};
  const std::vector<int32_t> first = Run(s);
  ASSERT_EQ(first.size(), 20u);
  EXPECT_EQ(Run(s), first);  // the decoder reused: Generate resets it
  std::set<std::vector<int32_t>> others;
  for (uint64_t seed = 8; seed < 13; ++seed) {
    SamplingOptions o = s;
    o.seed = seed;
    others.insert(Run(o));
  }
  others.insert(first);
  EXPECT_GE(others.size(), 5u) << "6 seeds gave only " << others.size() << " distinct outputs";
}

TEST_F(SampledGenerationTest, TinyTopPAndZeroTemperatureAreGreedy) {
  const std::vector<int32_t> greedy = Run({});
  EXPECT_EQ(Run({.temperature = 1.5, .top_p = 1e-6, .seed = 99}), greedy);
  EXPECT_EQ(Run({.temperature = 0, .top_p = 0.5, .seed = 5}), greedy);
}

}  // namespace
}  // namespace mobius::generate
