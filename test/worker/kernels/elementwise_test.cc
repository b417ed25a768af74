// residual_fwd, bias_add_fwd and bias_bwd. The bias gradient is checked against the bias part of
// reference::LinearBackward (in_features 1, zero input and weight); the adds against fp32 sums.
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "test/worker/kernels/kernel_test_util.h"
#include "worker/kernels/cpu/bias.h"
#include "worker/kernels/cpu/residual.h"
#include "worker/reference/ops_linear.h"

namespace mobius::kernels::cpu {
namespace {

using testing::ExpectBitwiseEqual;
using testing::ExpectClose;
using testing::kBf16Rtol;
using testing::kFp32Rtol;
using testing::MaxAbs;
using testing::RandomBf16;
using testing::ToFloats;

TEST(ResidualTest, AddsInFp32AndRoundsOnce) {
  const int64_t n = (1 << 15) + 33;
  std::mt19937 rng(3);
  const auto a = RandomBf16(n, 1.0f, rng), b = RandomBf16(n, 1.0f, rng);
  std::vector<uint16_t> out(n);
  residual_fwd(out.data(), a.data(), b.data(), n, nullptr);
  std::vector<uint16_t> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = numeric::Fp32ToBf16(a.f32[i] + b.f32[i]);
  ExpectBitwiseEqual("residual out", out, want);  // the fp32 sum of two bf16 values is exact
  ThreadPool pool(2);
  std::vector<uint16_t> out2 = a.bits;  // in place: out aliases a
  residual_fwd(out2.data(), out2.data(), b.data(), n, &pool);
  ExpectBitwiseEqual("residual out, 2 threads in place", out2, want);
}

struct BiasCase {
  int64_t n, c;
};

class BiasTest : public ::testing::TestWithParam<BiasCase> {};

TEST_P(BiasTest, MatchesReference) {
  const auto [n, c] = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(n * 31 + c));
  const auto x = RandomBf16(n * c, 1.0f, rng), bias = RandomBf16(c, 1.0f, rng);
  const auto dout = RandomBf16(n * c, 1.0f, rng), db0 = RandomBf16(c, 1.0f, rng);

  std::vector<uint16_t> out(n * c);
  bias_add_fwd(out.data(), x.data(), bias.data(), n, c, nullptr);
  std::vector<uint16_t> want(n * c);
  for (int64_t i = 0; i < n * c; ++i) want[i] = numeric::Fp32ToBf16(x.f32[i] + bias.f32[i % c]);
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
  ExpectClose("bias dbias (bf16 dout)", db, ref_db, kFp32Rtol, atol);
  ExpectClose("bias dbias (fp32 dout)", db_f32, ref_db, kFp32Rtol, atol);

  ThreadPool pool(2);
  std::vector<uint16_t> out2 = x.bits;  // in place
  bias_add_fwd(out2.data(), out2.data(), bias.data(), n, c, &pool);
  ExpectBitwiseEqual("bias_add out, 2 threads", out2, out);
  std::vector<float> db2 = db0.f32;
  bias_bwd(db2.data(), dout.data(), n, c, &pool);
  ExpectBitwiseEqual("bias dbias, 2 threads", db2, db);
}

INSTANTIATE_TEST_SUITE_P(Shapes, BiasTest,
                         ::testing::Values(BiasCase{1, 33}, BiasCase{37, 33}, BiasCase{300, 1030},
                                           BiasCase{2000, 7}),
                         [](const auto& info) {
                           return "n" + std::to_string(info.param.n) + "_c" +
                                  std::to_string(info.param.c);
                         });

}  // namespace
}  // namespace mobius::kernels::cpu
