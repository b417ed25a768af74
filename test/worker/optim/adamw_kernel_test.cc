// Every AdamW kernel against the scalar reference, the documented formula and PyTorch's algebra.
// Built with -ffp-contract=off (CMakeLists.txt) so the formulas below round exactly as written.
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "gtest/gtest.h"
#include "test/worker/optim/adamw_test_util.h"
#include "worker/optim/adamw.h"

namespace mobius::optim {
namespace {

using testing::Compare;
using testing::Describe;
using testing::TensorState;

constexpr size_t kSizes[] = {0, 1, 7, 17, 1000003};
constexpr double kAtolScale = 1.0 / (1 << 21);

// The adamw.h formula, element by element; `fused` puts std::fma at the three documented places;
// the 16-bit copy in bf16, or fp16 with `out_fp16`.
void FormulaStep(const AdamWConfig& c, int64_t step, float grad_scale, bool decay, bool fused,
                 bool out_fp16, TensorState& s) {
  const float decay_f = decay ? static_cast<float>(1.0 - c.lr * c.weight_decay) : 1.0f;
  const float b1 = static_cast<float>(c.beta1), omb1 = static_cast<float>(1.0 - c.beta1);
  const float b2 = static_cast<float>(c.beta2), omb2 = static_cast<float>(1.0 - c.beta2);
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(c.beta2, step)));
  const float neg_step = static_cast<float>(-(c.lr / (1.0 - std::pow(c.beta1, step))));
  const float eps = static_cast<float>(c.eps);
  for (size_t i = 0; i < s.master.size(); ++i) {
    const float g = s.grad[i] * grad_scale;
    const float pd = s.master[i] * decay_f;
    const float mb = s.m[i] * b1, vb = s.v[i] * b2, sg = omb2 * g;
    s.m[i] = fused ? std::fma(g, omb1, mb) : mb + g * omb1;
    s.v[i] = fused ? std::fma(sg, g, vb) : vb + sg * g;
    const float q = s.m[i] / (std::sqrt(s.v[i]) / bc2_sqrt + eps);
    s.master[i] = fused ? std::fma(neg_step, q, pd) : pd + neg_step * q;
    s.bf16[i] =
        out_fp16 ? numeric::Fp32ToF16(s.master[i]) : numeric::Fp32ToBf16(s.master[i]);
  }
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  }
  return true;
}

class AdamWKernelTest : public ::testing::TestWithParam<Kernel> {};

// The documented tolerance: after each of 5 steps, |kernel - scalar| <= 1e-6 * |scalar| +
// 2^-21 * max|scalar| (over the tensor) for master, m and v, for every size, with and without weight
// decay and gradient scaling. The absolute term covers cancellation: where m or p passes near 0 an
// FMA changes the last bit of the operands, not of the tiny result.
TEST_P(AdamWKernelTest, MatchesScalarReferenceWithinTolerance) {
  const Kernel kernel = GetParam();
  MOBIUS_SKIP_IF_UNAVAILABLE(kernel);
  const AdamWConfig config{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                           .weight_decay = 0.1};
  for (size_t n : kSizes) {
    for (bool decay : {true, false}) {
      for (float grad_scale : {1.0f, 0.37f}) {
        TensorState ours = TensorState::Random(n, 42 + static_cast<uint32_t>(n));
        TensorState ref = ours;
        for (int64_t step = 1; step <= 5; ++step) {
          ASSERT_TRUE(AdamWStep(config, step, grad_scale, ours.Buffers(decay), kernel).ok());
          ASSERT_TRUE(
              AdamWStep(config, step, grad_scale, ref.Buffers(decay), Kernel::kScalar).ok());
          const auto dp = Compare(ours.master, ref.master, 1e-6, kAtolScale);
          const auto dm = Compare(ours.m, ref.m, 1e-6, kAtolScale);
          const auto dv = Compare(ours.v, ref.v, 1e-6, kAtolScale);
          SCOPED_TRACE(::testing::Message() << "n=" << n << " decay=" << decay
                                            << " grad_scale=" << grad_scale << " step=" << step);
          EXPECT_EQ(dp.violations, 0u) << Describe("master", dp);
          EXPECT_EQ(dm.violations, 0u) << Describe("m", dm);
          EXPECT_EQ(dv.violations, 0u) << Describe("v", dv);
          if (n == 1000003 && step == 5 && decay && grad_scale == 1.0f) {
            std::printf("[ %s vs scalar, 1000003 elements, 5 steps ] %s; %s; %s\n",
                        KernelName(kernel), Describe("master", dp).c_str(),
                        Describe("m", dm).c_str(), Describe("v", dv).c_str());
          }
        }
      }
    }
  }
}

// Stronger: the scalar kernel is bit-identical to the unfused formula and the SIMD kernels to the
// fused one (bodies and tails alike), with a bf16 or an fp16 copy.
TEST_P(AdamWKernelTest, BitIdenticalToDocumentedFormula) {
  const Kernel kernel = GetParam();
  MOBIUS_SKIP_IF_UNAVAILABLE(kernel);
  const bool fused = kernel != Kernel::kScalar;
  const AdamWConfig config{.lr = 3e-3, .beta1 = 0.85, .beta2 = 0.98, .eps = 1e-6,
                           .weight_decay = 0.05};
  for (bool out_fp16 : {false, true}) {
    for (size_t n : kSizes) {
      TensorState ours = TensorState::Random(n, 7 + static_cast<uint32_t>(n));
      TensorState formula = ours;
      for (int64_t step = 1; step <= 3; ++step) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " step=" << step
                                          << (out_fp16 ? " fp16" : " bf16"));
        const bool decay = step != 2;
        ASSERT_TRUE(AdamWStep(config, step, 0.5f, ours.Buffers(decay, out_fp16), kernel).ok());
        FormulaStep(config, step, 0.5f, decay, fused, out_fp16, formula);
        ASSERT_TRUE(BitEqual(ours.master, formula.master));
        ASSERT_TRUE(BitEqual(ours.m, formula.m));
        ASSERT_TRUE(BitEqual(ours.v, formula.v));
        ASSERT_EQ(ours.bf16, formula.bf16);
      }
    }
  }
}

// The fp16 copy is Fp32ToF16 of the new master for every kind of value, in the vector bodies and
// the tails: with lr 0 the masters pass through the step unchanged, so they can be chosen: every
// finite fp16 value and the floats at, just below and just above each rounding tie (subnormal
// ties, and 65520, the tie that overflows to inf), fp32 subnormals, huge values, infinities, NaNs
// with assorted payloads, and random bit patterns.
TEST_P(AdamWKernelTest, F16OutIsRoundedMasterForEveryKindOfValue) {
  const Kernel kernel = GetParam();
  MOBIUS_SKIP_IF_UNAVAILABLE(kernel);
  std::vector<float> masters;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float lo = numeric::F16ToFp32(static_cast<uint16_t>(h));
    const float next = numeric::F16ToFp32(static_cast<uint16_t>(h + 1));
    const float tie = lo + (h == 0x7bff ? 16.0f : (next - lo) / 2);
    for (float x : {lo, tie, std::nextafter(tie, 0.0f), std::nextafter(tie, INFINITY)}) {
      masters.push_back(x);
      masters.push_back(-x);
    }
  }
  for (uint32_t bits : {0x00000001u, 0x007fffffu, 0x33000000u, 0x33000001u, 0x7f7fffffu,
                        0x7f800000u, 0x7fc00000u, 0x7fc00001u, 0x7fffe000u, 0x7fffffffu,
                        0xffc02000u}) {
    masters.push_back(std::bit_cast<float>(bits));
  }
  std::mt19937 rng(3);
  for (int i = 0; i < 100000; ++i) {
    masters.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  }
  masters.resize(masters.size() - 5);  // a tail after the last whole vector
  TensorState s = TensorState::Random(masters.size(), 13);
  s.master = masters;
  ASSERT_TRUE(AdamWStep({.lr = 0.0, .weight_decay = 0.1}, 1, 1.0f, s.Buffers(true, true), kernel)
                  .ok());
  size_t infinities = 0;
  for (size_t i = 0; i < masters.size(); ++i) {
    ASSERT_EQ(s.bf16[i], numeric::Fp32ToF16(s.master[i]))
        << i << ": master bits " << std::hex << std::bit_cast<uint32_t>(s.master[i]);
    infinities += (s.bf16[i] & 0x7fffu) == 0x7c00u;
    // The master passed through as chosen (a NaN may come out quieted, a zero with either sign).
    if (!std::isnan(masters[i]) && masters[i] != 0.0f) {
      ASSERT_EQ(std::bit_cast<uint32_t>(s.master[i]), std::bit_cast<uint32_t>(masters[i])) << i;
    }
  }
  EXPECT_GT(infinities, 1000u);
}

TEST_P(AdamWKernelTest, Bf16OutIsRoundedMasterAndOptional) {
  const Kernel kernel = GetParam();
  MOBIUS_SKIP_IF_UNAVAILABLE(kernel);
  TensorState s = TensorState::Random(1003, 5);
  s.master[3] = NAN;  // NaN in, quiet NaN out
  s.master[4] = 3.0e38f;
  s.grad[5] = INFINITY;
  ASSERT_TRUE(AdamWStep({}, 1, 1.0f, s.Buffers(), kernel).ok());
  for (size_t i = 0; i < s.master.size(); ++i) {
    ASSERT_EQ(s.bf16[i], numeric::Fp32ToBf16(s.master[i])) << i;
  }
  EXPECT_EQ(s.bf16[3] & 0x7fc0, 0x7fc0);

  TensorState without = TensorState::Random(1003, 5);
  TensorState with = without;
  ParamBuffers b = without.Buffers();
  b.bf16_out = nullptr;
  ASSERT_TRUE(AdamWStep({}, 1, 1.0f, b, kernel).ok());
  ASSERT_TRUE(AdamWStep({}, 1, 1.0f, with.Buffers(), kernel).ok());
  EXPECT_TRUE(BitEqual(without.master, with.master));
  EXPECT_EQ(without.bf16, std::vector<uint16_t>(1003, 0xdead));  // untouched
}

// Steps 1..5 from zero moments against PyTorch's algebra evaluated in double.
TEST_P(AdamWKernelTest, BiasCorrectionSteps1To5) {
  const Kernel kernel = GetParam();
  MOBIUS_SKIP_IF_UNAVAILABLE(kernel);
  const AdamWConfig c{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
  TensorState s = TensorState::Random(37, 11);
  std::fill(s.m.begin(), s.m.end(), 0.0f);
  std::fill(s.v.begin(), s.v.end(), 0.0f);
  std::vector<double> p(s.master.begin(), s.master.end()), m(37, 0.0), v(37, 0.0);
  for (int64_t t = 1; t <= 5; ++t) {
    for (size_t i = 0; i < 37; ++i) s.grad[i] = static_cast<float>(std::sin(1.0 + i + 3.0 * t));
    ASSERT_TRUE(AdamWStep(c, t, 1.0f, s.Buffers(), kernel).ok());
    const double bc1 = 1 - std::pow(c.beta1, t), bc2 = 1 - std::pow(c.beta2, t);
    for (size_t i = 0; i < 37; ++i) {
      const double g = s.grad[i];
      p[i] *= 1 - c.lr * c.weight_decay;
      m[i] = c.beta1 * m[i] + (1 - c.beta1) * g;
      v[i] = c.beta2 * v[i] + (1 - c.beta2) * g * g;
      p[i] -= c.lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + c.eps);
      EXPECT_NEAR(s.master[i], p[i], 2e-6 * std::fabs(p[i]) + 1e-8) << "step " << t << " i " << i;
    }
    if (t == 1) {  // first step from zero moments: p*(1-lr*wd) - lr*g/(|g| + eps) ~ -lr*sign(g)
      EXPECT_NEAR(s.master[0], static_cast<float>(p[0]), 1e-6);
    }
  }
}

TEST_P(AdamWKernelTest, SumOfSquaresMatchesDouble) {
  const Kernel kernel = GetParam();
  MOBIUS_SKIP_IF_UNAVAILABLE(kernel);
  for (size_t n : kSizes) {
    const TensorState s = TensorState::Random(n, 99);
    double expect = 0;
    for (float g : s.grad) expect += static_cast<double>(g) * g;
    EXPECT_NEAR(SumOfSquares(s.grad.data(), n, kernel), expect, 1e-12 * expect) << n;
  }
}

INSTANTIATE_TEST_SUITE_P(AllKernels, AdamWKernelTest,
                         ::testing::ValuesIn(testing::AllKernels()), testing::KernelParamName);

TEST(AdamWKernelSelection, AutoPicksTheWidestAvailable) {
  const Kernel k = ResolveKernel(Kernel::kAuto);
  EXPECT_NE(k, Kernel::kAuto);
  EXPECT_TRUE(KernelAvailable(k));
  if (KernelAvailable(Kernel::kAvx512)) EXPECT_EQ(k, Kernel::kAvx512);
  std::printf("[ kernels ] auto -> %s (avx2 %s, avx512 %s)\n", KernelName(k),
              KernelAvailable(Kernel::kAvx2) ? "yes" : "no",
              KernelAvailable(Kernel::kAvx512) ? "yes" : "no");
}

}  // namespace
}  // namespace mobius::optim
