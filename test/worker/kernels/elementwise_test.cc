// residual_fwd, bias_add_fwd and bias_bwd, in bf16 and fp16. The bias gradient is checked against
// the bias part of reference::LinearBackward (in_features 1, zero input and weight); the adds are
// one rounding of the fp32 sum, bit for bit. fp16 results beyond 65504 become inf.
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "test/worker/kernels/kernel_test_util.h"
#include "worker/kernels/cpu/bias.h"
#include "worker/kernels/cpu/embedding.h"
#include "worker/kernels/cpu/residual.h"
#include "worker/kernels/cpu/rope.h"
#include "worker/kernels/cpu/swiglu.h"
#include "worker/reference/ops_linear.h"

namespace mobius::kernels::cpu {
namespace {

using testing::ExpectBitwiseEqual;
using testing::ExpectClose;
using testing::FormatNames;
using testing::FromFloats;
using testing::HalfFormats;
using testing::kFp32Rtol;
using testing::RandomHalf;
using testing::Round;
using testing::ToFloats;

template <typename T>
class ResidualTest : public ::testing::Test {};
TYPED_TEST_SUITE(ResidualTest, HalfFormats, FormatNames);

TYPED_TEST(ResidualTest, AddsInFp32AndRoundsOnce) {
  using T = TypeParam;
  const int64_t n = (1 << 15) + 33;
  std::mt19937 rng(3);
  const auto a = RandomHalf<T>(n, 1.0f, rng), b = RandomHalf<T>(n, 1.0f, rng);
  std::vector<T> out(n);
  residual_fwd(out.data(), a.data(), b.data(), n, nullptr);
  std::vector<T> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = Round<T>(a.f32[i] + b.f32[i]);
  ExpectBitwiseEqual("residual out", out, want);
  ThreadPool pool(2);
  std::vector<T> out2 = a.bits;  // in place: out aliases a
  residual_fwd(out2.data(), out2.data(), b.data(), n, &pool);
  ExpectBitwiseEqual("residual out, 2 threads in place", out2, want);
}

struct BiasCase {
  int64_t n, c;
};

class BiasTest : public ::testing::TestWithParam<BiasCase> {
 protected:
  template <typename T>
  void Check() {
    SCOPED_TRACE(testing::Format<T>::kName);
    const auto [n, c] = GetParam();
    std::mt19937 rng(static_cast<uint32_t>(n * 31 + c));
    const auto x = RandomHalf<T>(n * c, 1.0f, rng), bias = RandomHalf<T>(c, 1.0f, rng);
    const auto dout = RandomHalf<T>(n * c, 1.0f, rng), db0 = RandomHalf<T>(c, 1.0f, rng);

    std::vector<T> out(n * c);
    bias_add_fwd(out.data(), x.data(), bias.data(), n, c, nullptr);
    std::vector<T> want(n * c);
    for (int64_t i = 0; i < n * c; ++i) want[i] = Round<T>(x.f32[i] + bias.f32[i % c]);
    ExpectBitwiseEqual("bias_add out", out, want);

    std::vector<float> db = db0.f32, db_f32 = db0.f32;
    bias_bwd(db.data(), dout.data(), n, c, nullptr);
    bias_bwd(db_f32.data(), dout.f32.data(), n, c, nullptr);
    std::vector<float> ref_db = db0.f32, dinp(n), dweight(c), zeros_in(n), zeros_w(c);
    reference::LinearBackward(dinp.data(), dweight.data(), ref_db.data(), dout.f32.data(),
                              zeros_in.data(), zeros_w.data(), n, 1, c,
                              reference::WeightLayout::kInOut);
    // fp32 sums of n terms of size ~1 vs double: cancellation leaves ~n * 2^-24 absolute.
    const double atol = 4.0 * n * 6e-8;
    ExpectClose("bias dbias (16-bit dout)", db, ref_db, kFp32Rtol, atol);
    ExpectClose("bias dbias (fp32 dout)", db_f32, ref_db, kFp32Rtol, atol);

    ThreadPool pool(2);
    std::vector<T> out2 = x.bits;  // in place
    bias_add_fwd(out2.data(), out2.data(), bias.data(), n, c, &pool);
    ExpectBitwiseEqual("bias_add out, 2 threads", out2, out);
    std::vector<float> db2 = db0.f32;
    bias_bwd(db2.data(), dout.data(), n, c, &pool);
    ExpectBitwiseEqual("bias dbias, 2 threads", db2, db);
  }
};

TEST_P(BiasTest, MatchesReference) {
  Check<uint16_t>();
  Check<F16>();
}

INSTANTIATE_TEST_SUITE_P(Shapes, BiasTest,
                         ::testing::Values(BiasCase{1, 33}, BiasCase{37, 33}, BiasCase{300, 1030},
                                           BiasCase{2000, 7}),
                         [](const auto& info) {
                           return "n" + std::to_string(info.param.n) + "_c" +
                                  std::to_string(info.param.c);
                         });

// fp16's range ends at 65504: a result from 65520 up is +inf (-inf below -65520), one just below
// the tie rounds to 65504, in the element-wise kernels (vector bodies and scalar tails alike).
TEST(F16OverflowTest, ResultsBeyondTheRangeBecomeInf) {
  const float inf = INFINITY;
  // Sums: 40000 + 40000, -40000 - 40000, 65504 + 15.9 (below the tie), 65504 + 16 (the tie, to
  // even: inf), and a finite sum; 19 elements so that a vector body and a tail both run.
  std::vector<float> a_values, b_values, want;
  for (int rep = 0; rep < 4; ++rep) {
    a_values.insert(a_values.end(), {40000.0f, -40000.0f, 65504.0f, 65504.0f, 1.5f});
    b_values.insert(b_values.end(), {40000.0f, -40000.0f, 15.875f, 16.0f, 2.25f});
    want.insert(want.end(), {inf, -inf, 65504.0f, inf, 3.75f});
  }
  a_values.resize(19), b_values.resize(19), want.resize(19);
  const auto a = FromFloats<F16>(a_values), b = FromFloats<F16>(b_values);
  const int64_t n = a.size();
  std::vector<F16> out(n);
  residual_fwd(out.data(), a.data(), b.data(), n, nullptr);
  EXPECT_EQ(ToFloats(out), want) << "residual";
  bias_add_fwd(out.data(), a.data(), b.data(), 1, n, nullptr);  // one row, bias = b
  EXPECT_EQ(ToFloats(out), want) << "bias_add";
  const std::vector<int32_t> tokens = {0};
  embedding_fwd(out.data(), tokens.data(), a.data(), b.data(), 1, 1, n, nullptr);
  EXPECT_EQ(ToFloats(out), want) << "embedding with positions";

  // silu(300) * 300 = 90000; rope turns (60000, 60000) by 45 degrees into (0, 84853).
  const auto g = FromFloats<F16>(std::vector<float>(9, 300.0f));
  std::vector<F16> s(9);
  swiglu_fwd(s.data(), g.data(), g.data(), 9, nullptr);
  EXPECT_EQ(ToFloats(s), std::vector<float>(9, inf)) << "swiglu";
  const auto x = FromFloats<F16>({60000.0f, 60000.0f});
  const float c = std::sqrt(0.5f);
  std::vector<F16> r(2);
  rope_fwd(r.data(), x.data(), &c, &c, 1, 1, 1, 2, nullptr);
  EXPECT_LT(std::fabs(ToFloats(r)[0]), 64.0f) << "rope";
  EXPECT_EQ(ToFloats(r)[1], inf) << "rope";
}

}  // namespace
}  // namespace mobius::kernels::cpu
