// cross_entropy_* against reference ops_loss.h on the same logits (bf16-rounded, or fp32), with
// ignored rows, all rows ignored, and in-place backward.
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "test/worker/kernels/kernel_test_util.h"
#include "worker/kernels/cpu/cross_entropy.h"
#include "worker/reference/ops_loss.h"

namespace mobius::kernels::cpu {
namespace {

using testing::ExpectBitwiseEqual;
using testing::ExpectClose;
using testing::kBf16Rtol;
using testing::kFp32Rtol;
using testing::MaxAbs;
using testing::RandomBf16;
using testing::ToFloats;

std::vector<int32_t> Targets(int64_t n, int64_t v, int ignore_every, std::mt19937& rng) {
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) {
    targets[i] = ignore_every > 0 && i % ignore_every == 0 ? kIgnoreIndex
                                                           : static_cast<int32_t>(rng() % v);
  }
  return targets;
}

// dlogits tolerance: softmax entries are <= 1 and scaled by dloss / count; fp32 exp vs double.
void CheckCrossEntropy(int64_t n, int64_t v, int ignore_every) {
  SCOPED_TRACE(::testing::Message() << "N " << n << " V " << v << " ignore every "
                                    << ignore_every);
  std::mt19937 rng(static_cast<uint32_t>(n * v + ignore_every));
  const auto logits = RandomBf16(n * v, 3.0f, rng);
  const std::vector<int32_t> targets = Targets(n, v, ignore_every, rng);
  const float dloss = 1.7f;

  std::vector<float> probs(n * v), ref_losses(n), ref_dlogits(n * v, 0.0f);
  const float ref_mean = reference::CrossEntropyForward(probs.data(), ref_losses.data(),
                                                        logits.f32.data(), targets.data(), n, v);
  reference::CrossEntropyBackward(ref_dlogits.data(), probs.data(), targets.data(), n, v, dloss);
  const double d_atol = 1e-6 * dloss;

  // bf16 logits, bf16 dlogits written in place over a copy of the logits.
  std::vector<float> losses(n), lse(n);
  const float mean = cross_entropy_fwd(losses.data(), lse.data(), logits.data(), targets.data(), n,
                                       v, nullptr);
  EXPECT_NEAR(mean, ref_mean, kFp32Rtol * std::fabs(ref_mean) + 1e-6);
  ExpectClose("ce losses (bf16 logits)", losses, ref_losses, kFp32Rtol, 1e-5);
  std::vector<uint16_t> dlogits = logits.bits;
  cross_entropy_bwd(dlogits.data(), dlogits.data(), lse.data(), targets.data(), n, v, dloss,
                    nullptr);
  ExpectClose("ce dlogits (bf16)", ToFloats(dlogits), ref_dlogits, kBf16Rtol, d_atol);

  // fp32 logits and dlogits.
  std::vector<float> losses32(n), lse32(n), dlogits32(n * v, NAN);
  const float mean32 = cross_entropy_fwd(losses32.data(), lse32.data(), logits.f32.data(),
                                         targets.data(), n, v, nullptr);
  EXPECT_NEAR(mean32, ref_mean, kFp32Rtol * std::fabs(ref_mean) + 1e-6);
  cross_entropy_bwd(dlogits32.data(), logits.f32.data(), lse32.data(), targets.data(), n, v,
                    dloss, nullptr);
  ExpectClose("ce dlogits (fp32)", dlogits32, ref_dlogits, kFp32Rtol, d_atol);

  ThreadPool pool(2);
  std::vector<float> losses2(n), lse2(n);
  const float mean2 = cross_entropy_fwd(losses2.data(), lse2.data(), logits.data(),
                                        targets.data(), n, v, &pool);
  EXPECT_EQ(mean2, mean);
  ExpectBitwiseEqual("ce losses, 2 threads", losses2, losses);
  ExpectBitwiseEqual("ce lse, 2 threads", lse2, lse);
  std::vector<uint16_t> dlogits2(n * v);
  cross_entropy_bwd(dlogits2.data(), logits.data(), lse2.data(), targets.data(), n, v, dloss,
                    &pool);
  ExpectBitwiseEqual("ce dlogits, 2 threads", dlogits2, dlogits);
}

TEST(CrossEntropyTest, MatchesReference) {
  CheckCrossEntropy(1, 33, 0);
  CheckCrossEntropy(37, 1000, 3);
  CheckCrossEntropy(8, 50257, 4);
}

TEST(CrossEntropyTest, AllRowsIgnoredGivesZeroLossAndZeroGradient) {
  const int64_t n = 5, v = 33;
  std::mt19937 rng(5);
  const auto logits = RandomBf16(n * v, 3.0f, rng);
  const std::vector<int32_t> targets(n, kIgnoreIndex);
  std::vector<float> losses(n, NAN), lse(n, NAN);
  EXPECT_EQ(cross_entropy_fwd(losses.data(), lse.data(), logits.data(), targets.data(), n, v,
                              nullptr),
            0.0f);
  for (float x : losses) EXPECT_EQ(x, 0.0f);
  std::vector<uint16_t> dlogits(n * v, 0x7fc0);  // NaN: every entry must be written
  cross_entropy_bwd(dlogits.data(), logits.data(), lse.data(), targets.data(), n, v, 1.0f,
                    nullptr);
  for (uint16_t x : dlogits) EXPECT_EQ(x, 0u);
}

}  // namespace
}  // namespace mobius::kernels::cpu
