// cross_entropy_* against reference ops_loss.h on the same logits (bf16- or fp16-rounded, or fp32),
// with ignored rows, all rows ignored, and in-place backward.
#include <algorithm>
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
using testing::Format;
using testing::FormatNames;
using testing::HalfFormats;
using testing::kFp32Rtol;
using testing::RandomBf16;
using testing::RandomHalf;
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
// T: the 16-bit logits' format (the fp32 path runs on the same, rounded, values).
template <typename T>
void CheckCrossEntropy(int64_t n, int64_t v, int ignore_every) {
  using F = Format<T>;
  SCOPED_TRACE(::testing::Message() << F::kName << " N " << n << " V " << v << " ignore every "
                                    << ignore_every);
  std::mt19937 rng(static_cast<uint32_t>(n * v + ignore_every));
  const auto logits = RandomHalf<T>(n * v, 3.0f, rng);
  const std::vector<int32_t> targets = Targets(n, v, ignore_every, rng);
  const float dloss = 1.7f;

  std::vector<float> probs(n * v), ref_losses(n), ref_dlogits(n * v, 0.0f);
  const float ref_mean = reference::CrossEntropyForward(probs.data(), ref_losses.data(),
                                                        logits.f32.data(), targets.data(), n, v);
  reference::CrossEntropyBackward(ref_dlogits.data(), probs.data(), targets.data(), n, v, dloss);
  const double d_atol = 1e-6 * dloss;

  // 16-bit logits, 16-bit dlogits written in place over a copy of the logits.
  std::vector<float> losses(n), lse(n);
  const float mean = cross_entropy_fwd(losses.data(), lse.data(), logits.data(), targets.data(), n,
                                       v, nullptr);
  EXPECT_NEAR(mean, ref_mean, kFp32Rtol * std::fabs(ref_mean) + 1e-6);
  ExpectClose("ce losses (16-bit logits)", losses, ref_losses, kFp32Rtol, 1e-5);
  std::vector<T> dlogits = logits.bits;
  cross_entropy_bwd(dlogits.data(), dlogits.data(), lse.data(), targets.data(), n, v, dloss,
                    nullptr);
  ExpectClose("ce dlogits (16-bit)", ToFloats(dlogits), ref_dlogits, F::kRtol, d_atol + F::kAtol);

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
  std::vector<T> dlogits2(n * v);
  cross_entropy_bwd(dlogits2.data(), logits.data(), lse2.data(), targets.data(), n, v, dloss,
                    &pool);
  ExpectBitwiseEqual("ce dlogits, 2 threads", dlogits2, dlogits);
}

template <typename T>
class CrossEntropyTest : public ::testing::Test {};
TYPED_TEST_SUITE(CrossEntropyTest, HalfFormats, FormatNames);

TYPED_TEST(CrossEntropyTest, MatchesReference) {
  CheckCrossEntropy<TypeParam>(1, 33, 0);
  CheckCrossEntropy<TypeParam>(37, 1000, 3);
  CheckCrossEntropy<TypeParam>(8, 50257, 4);
}

// The LM head's token chunks (backend::CrossEntropyRows): rows computed a chunk at a time, each
// chunk's logits alone, give every row's loss, lse and gradient bitwise the unchunked ones, and the
// last chunk's mean bitwise the unchunked mean (the mean is formed over all rows in order); the
// backward's count covers the whole microbatch. Chunks that do not divide N, of one row, of all.
TEST(CrossEntropyChunkTest, ChunksOfRowsAreBitwiseTheWholeMicrobatch) {
  const int64_t n = 23, v = 1000;
  std::mt19937 rng(23);
  const auto logits = RandomBf16(n * v, 3.0f, rng);
  const std::vector<float>& z = logits.f32;
  const std::vector<int32_t> targets = Targets(n, v, 4, rng);  // rows 0, 4, 8, ... ignored
  const float dloss = 0.6f;
  std::vector<float> losses(n), lse(n), dz(n * v);
  const float mean = cross_entropy_fwd(losses.data(), lse.data(), z.data(), targets.data(), n, v,
                                       nullptr);
  cross_entropy_bwd(dz.data(), z.data(), lse.data(), targets.data(), n, v, dloss, nullptr);
  for (int64_t chunk : {1, 5, 7, 22, 23}) {
    SCOPED_TRACE(::testing::Message() << "chunk " << chunk);
    std::vector<float> c_losses(n, NAN), c_lse(n, NAN), c_dz(n * v, NAN);
    float c_mean = NAN;
    for (int64_t r0 = 0; r0 < n; r0 += chunk) {
      const int64_t rows = std::min(chunk, n - r0);
      // Each chunk's logits in a buffer of their own, as the head's workspace holds them.
      std::vector<float> part(z.begin() + r0 * v, z.begin() + (r0 + rows) * v);
      c_mean = cross_entropy_fwd(c_losses.data() + r0, c_lse.data() + r0, part.data(),
                                 targets.data() + r0, rows, v, nullptr, r0, n);
      cross_entropy_bwd(part.data(), part.data(), c_lse.data() + r0, targets.data() + r0, rows, v,
                        dloss, nullptr, r0, n);
      std::copy(part.begin(), part.end(), c_dz.begin() + r0 * v);
    }
    EXPECT_EQ(c_mean, mean);
    ExpectBitwiseEqual("chunked losses", c_losses, losses);
    ExpectBitwiseEqual("chunked lse", c_lse, lse);
    ExpectBitwiseEqual("chunked dlogits", c_dz, dz);
  }
}

TYPED_TEST(CrossEntropyTest, AllRowsIgnoredGivesZeroLossAndZeroGradient) {
  using T = TypeParam;
  const int64_t n = 5, v = 33;
  std::mt19937 rng(5);
  const auto logits = RandomHalf<T>(n * v, 3.0f, rng);
  const std::vector<int32_t> targets(n, kIgnoreIndex);
  std::vector<float> losses(n, NAN), lse(n, NAN);
  EXPECT_EQ(cross_entropy_fwd(losses.data(), lse.data(), logits.data(), targets.data(), n, v,
                              nullptr),
            0.0f);
  for (float x : losses) EXPECT_EQ(x, 0.0f);
  std::vector<T> dlogits(n * v, T{0x7fc0});  // NaN (both formats): every entry must be written
  cross_entropy_bwd(dlogits.data(), logits.data(), lse.data(), targets.data(), n, v, 1.0f,
                    nullptr);
  for (T x : dlogits) EXPECT_TRUE(x == T{0});
}

}  // namespace
}  // namespace mobius::kernels::cpu
