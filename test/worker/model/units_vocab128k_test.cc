// The LM head by token chunks at Llama 3's vocabulary (128,256), against PyTorch: the golden case
// llama_vocab128k, generated at test time by test/reference/make_golden.py (its weights rounded to
// bf16 first, so PyTorch's loss and gradients are those of exactly the weights our units run; the
// ctest fixture units_vocab128k_golden writes it; its directory comes in MOBIUS_GOLDEN_VOCAB128K).
//
// Tolerances: as units_golden_test (bf16 activations on our side): loss 1e-2 relative, parameter
// gradients 3e-2 x max|PyTorch| + 1e-6; chunked against unchunked: loss bitwise, gradients
// 1e-5 x max + 1e-7.
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "common/numeric/f16.h"
#include "gtest/gtest.h"
#include "test/worker/model/units_test_util.h"
#include "test/worker/reference/tensor_compare.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/model/resident_model.h"
#include "worker/reference/model.h"

namespace mobius::units {
namespace {

TEST(UnitsVocab128kTest, ChunkedHeadMatchesPyTorchAtAVocabularyOf128k) {
  const char* dir = std::getenv("MOBIUS_GOLDEN_VOCAB128K");
  ASSERT_TRUE(dir != nullptr && dir[0] == '/')
      << "MOBIUS_GOLDEN_VOCAB128K must name the generated case's directory (absolute)";
  const std::string g_golden_dir = dir;
  auto golden = testing::LoadGolden(g_golden_dir);
  ASSERT_TRUE(golden.ok()) << golden.status();
  const testing::Golden& g = *golden;
  ASSERT_EQ(g.config.vocab_size, 128256);
  const float torch_loss = g.outputs.at("loss").data[0];
  auto torch_grads = reference::testing::LoadSafetensors(g_golden_dir + "/grads.safetensors");
  ASSERT_TRUE(torch_grads.ok()) << torch_grads.status();

  backend::CpuBackendOptions bo;
  bo.op_threads = 2;
  auto be = backend::CpuBackend::Create(bo);
  ASSERT_TRUE(be.ok()) << be.status();
  float unchunked_loss = 0;
  std::map<std::string, std::vector<float>> unchunked;
  // -1 first (the unchunked ops), then chunks of 5 and 13 of the 32 rows (neither divides it).
  for (int64_t chunk : {-1, 5, 13}) {
    SCOPED_TRACE(::testing::Message() << "chunk " << chunk);
    auto model = ResidentModel::Create(g.config, be->get(), {.chunk_tokens = chunk});
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_TRUE((*model)->SetWeights(g.bf16).ok());
    auto loss = (*model)->Step(g.tokens.data(), g.targets.data(), g.b, g.t, 1);
    ASSERT_TRUE(loss.ok()) << loss.status();
    auto grads = (*model)->Grads();
    ASSERT_TRUE(grads.ok()) << grads.status();
    std::printf("  chunk %lld: loss %.6f, PyTorch %.6f\n", static_cast<long long>(chunk), *loss,
                torch_loss);
    EXPECT_NEAR(*loss, torch_loss, 1e-2 * std::fabs(torch_loss));
    for (const auto& [name, want] : torch_grads->tensors) {
      ASSERT_TRUE(grads->contains(name)) << name;
      const auto d = testing::MaxDiff(grads->at(name), want.data);
      EXPECT_LE(d.max_abs, 3e-2 * d.max_want + 1e-6) << name;
      if (name == "lm_head.weight") {
        std::printf("  lm_head.weight gradient: max|diff| %.3g of max|PyTorch| %.3g\n", d.max_abs,
                    d.max_want);
      }
    }
    if (chunk < 0) {
      unchunked_loss = *loss;
      unchunked = *std::move(grads);
      continue;
    }
    EXPECT_EQ(*loss, unchunked_loss);
    for (const auto& [name, want] : unchunked) {
      const auto d = testing::MaxDiff(grads->at(name), want);
      EXPECT_LE(d.max_abs, 1e-5 * d.max_want + 1e-7) << name;
    }
  }
}

// training.precision fp16 at the same vocabulary: fp16 logits and their gradient, and the head's
// weight gradient through fp16 blocks of 4096 vocabulary rows (unit_workspace.h head_dw_rows: 32
// blocks here), each added into the fp32 gradient once per token chunk. Tolerances (as
// units_fp16_test): loss 2e-3 relative to PyTorch's fp32, gradients 6e-3 x max|PyTorch| + 1e-6;
// chunked against unchunked: loss 1e-5 relative, gradients 2e-3 x max + 1e-7.
TEST(UnitsVocab128kTest, Fp16HeadWithBlockedWeightGradientMatchesPyTorch) {
  const char* dir = std::getenv("MOBIUS_GOLDEN_VOCAB128K");
  ASSERT_TRUE(dir != nullptr && dir[0] == '/')
      << "MOBIUS_GOLDEN_VOCAB128K must name the generated case's directory (absolute)";
  const std::string g_golden_dir = dir;
  auto golden = testing::LoadGolden(g_golden_dir);
  ASSERT_TRUE(golden.ok()) << golden.status();
  const testing::Golden& g = *golden;
  const float torch_loss = g.outputs.at("loss").data[0];
  auto torch_grads = reference::testing::LoadSafetensors(g_golden_dir + "/grads.safetensors");
  ASSERT_TRUE(torch_grads.ok()) << torch_grads.status();
  backend::CpuBackendOptions bo;
  bo.op_threads = 2;
  auto be = backend::CpuBackend::Create(bo);
  ASSERT_TRUE(be.ok()) << be.status();
  // The golden weights (bf16-rounded, which fp16 holds exactly) as fp16 bits.
  std::map<std::string, std::vector<uint16_t>> f16;
  for (const auto& [name, t] : g.params.tensors) {
    std::vector<uint16_t>& bits = f16[name];
    bits.resize(t.data.size());
    numeric::Fp32ToF16(t.data.data(), bits.data(), bits.size());
  }
  float unchunked_loss = 0;
  std::map<std::string, std::vector<float>> unchunked;
  for (int64_t chunk : {-1, 5}) {
    SCOPED_TRACE(::testing::Message() << "chunk " << chunk);
    auto model = ResidentModel::Create(
        g.config, be->get(), {.chunk_tokens = chunk, .precision = backend::DType::kF16});
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_TRUE((*model)->SetWeights(f16).ok());
    auto loss = (*model)->Step(g.tokens.data(), g.targets.data(), g.b, g.t, 1);
    ASSERT_TRUE(loss.ok()) << loss.status();
    auto grads = (*model)->Grads();
    ASSERT_TRUE(grads.ok()) << grads.status();
    std::printf("  fp16 chunk %lld: loss %.6f, PyTorch %.6f\n", static_cast<long long>(chunk),
                *loss, torch_loss);
    EXPECT_NEAR(*loss, torch_loss, 2e-3 * std::fabs(torch_loss));
    for (const auto& [name, want] : torch_grads->tensors) {
      ASSERT_TRUE(grads->contains(name)) << name;
      const auto d = testing::MaxDiff(grads->at(name), want.data);
      EXPECT_LE(d.max_abs, 6e-3 * d.max_want + 1e-6) << name;
      if (name == "lm_head.weight") {
        std::printf("  fp16 lm_head.weight gradient: max|diff| %.3g of max|PyTorch| %.3g\n",
                    d.max_abs, d.max_want);
      }
    }
    if (chunk < 0) {
      unchunked_loss = *loss;
      unchunked = *std::move(grads);
      continue;
    }
    EXPECT_NEAR(*loss, unchunked_loss, 1e-5 * std::fabs(unchunked_loss));
    for (const auto& [name, want] : unchunked) {
      const auto d = testing::MaxDiff(grads->at(name), want);
      EXPECT_LE(d.max_abs, 2e-3 * d.max_want + 1e-7) << name;
    }
  }
}

}  // namespace
}  // namespace mobius::units

