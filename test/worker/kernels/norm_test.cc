// layernorm_* and rmsnorm_* against reference ops_norm.h on the same bf16-rounded inputs.
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "test/worker/kernels/kernel_test_util.h"
#include "worker/kernels/cpu/layernorm.h"
#include "worker/kernels/cpu/rmsnorm.h"
#include "worker/reference/ops_norm.h"

namespace mobius::kernels::cpu {
namespace {

using testing::Bf16Tensor;
using testing::ExpectBitwiseEqual;
using testing::ExpectClose;
using testing::kBf16Rtol;
using testing::kFp32Rtol;
using testing::MaxAbs;
using testing::RandomBf16;
using testing::ToFloats;

struct NormCase {
  int64_t n, c;
};

// Everything one run of forward + backward produces, for the tolerance and determinism checks.
struct NormResult {
  std::vector<uint16_t> out, dinp_bf16;
  std::vector<float> mean, rstd, dinp_f32, dweight, dbias;
};

class NormTest : public ::testing::TestWithParam<NormCase> {
 protected:
  void SetUp() override {
    const auto [n, c] = GetParam();
    std::mt19937 rng(static_cast<uint32_t>(n * 1000 + c));
    inp_ = RandomBf16(n * c, 1.5f, rng, 0.7f);
    weight_ = RandomBf16(c, 0.5f, rng, 1.0f);
    bias_ = RandomBf16(c, 0.5f, rng);
    dout_ = RandomBf16(n * c, 1.0f, rng);
    dinp0_ = RandomBf16(n * c, 0.1f, rng);  // gradients accumulate: start from non-zero values
    dweight0_ = RandomBf16(c, 1.0f, rng).f32;
    dbias0_ = RandomBf16(c, 1.0f, rng).f32;
  }

  NormResult RunLayerNorm(ThreadPool* pool) const {
    const auto [n, c] = GetParam();
    NormResult r{std::vector<uint16_t>(n * c), dinp0_.bits, std::vector<float>(n),
                 std::vector<float>(n), dinp0_.f32, dweight0_, dbias0_};
    layernorm_fwd(r.out.data(), r.mean.data(), r.rstd.data(), inp_.data(), weight_.data(),
                  bias_.data(), n, c, kEps, pool);
    layernorm_bwd(r.dinp_bf16.data(), r.dweight.data(), r.dbias.data(), dout_.data(), inp_.data(),
                  weight_.data(), r.mean.data(), r.rstd.data(), n, c, pool);
    std::vector<float> dw(c), db(c);  // the fp32-dinp variant must give the same dweight/dbias
    layernorm_bwd(r.dinp_f32.data(), dw.data(), db.data(), dout_.data(), inp_.data(),
                  weight_.data(), r.mean.data(), r.rstd.data(), n, c, pool);
    return r;
  }

  NormResult RunRmsNorm(ThreadPool* pool) const {
    const auto [n, c] = GetParam();
    NormResult r{std::vector<uint16_t>(n * c), dinp0_.bits, {}, std::vector<float>(n),
                 dinp0_.f32, dweight0_, {}};
    rmsnorm_fwd(r.out.data(), r.rstd.data(), inp_.data(), weight_.data(), n, c, kEps, pool);
    rmsnorm_bwd(r.dinp_bf16.data(), r.dweight.data(), dout_.data(), inp_.data(), weight_.data(),
                r.rstd.data(), n, c, pool);
    std::vector<float> dw(c);
    rmsnorm_bwd(r.dinp_f32.data(), dw.data(), dout_.data(), inp_.data(), weight_.data(),
                r.rstd.data(), n, c, pool);
    return r;
  }

  static constexpr float kEps = 1e-5f;
  Bf16Tensor inp_, weight_, bias_, dout_, dinp0_;
  std::vector<float> dweight0_, dbias0_;
};

TEST_P(NormTest, LayerNormMatchesReference) {
  const auto [n, c] = GetParam();
  const NormResult r = RunLayerNorm(nullptr);
  std::vector<float> out(n * c), mean(n), rstd(n);
  reference::LayerNormForward(out.data(), mean.data(), rstd.data(), inp_.f32.data(),
                              weight_.f32.data(), bias_.f32.data(), n, c, kEps);
  ExpectClose("layernorm out", ToFloats(r.out), out, kBf16Rtol, 1e-5 * MaxAbs(out));
  ExpectClose("layernorm mean", r.mean, mean, kFp32Rtol, 1e-6 * MaxAbs(inp_.f32));
  ExpectClose("layernorm rstd", r.rstd, rstd, kFp32Rtol, 0.0);

  std::vector<float> dinp = dinp0_.f32, dweight = dweight0_, dbias = dbias0_;
  reference::LayerNormBackward(dinp.data(), dweight.data(), dbias.data(), dout_.f32.data(),
                               inp_.f32.data(), weight_.f32.data(), mean.data(), rstd.data(), n, c);
  ExpectClose("layernorm dinp (bf16)", ToFloats(r.dinp_bf16), dinp, kBf16Rtol,
              1e-5 * MaxAbs(dinp));
  ExpectClose("layernorm dinp (fp32)", r.dinp_f32, dinp, kFp32Rtol, 2e-5 * MaxAbs(dinp));
  ExpectClose("layernorm dweight", r.dweight, dweight, kFp32Rtol, 2e-5 * MaxAbs(dweight));
  ExpectClose("layernorm dbias", r.dbias, dbias, kFp32Rtol, 2e-5 * MaxAbs(dbias));
}

TEST_P(NormTest, RmsNormMatchesReference) {
  const auto [n, c] = GetParam();
  const NormResult r = RunRmsNorm(nullptr);
  std::vector<float> out(n * c), rstd(n);
  reference::RmsNormForward(out.data(), rstd.data(), inp_.f32.data(), weight_.f32.data(), n, c,
                            kEps);
  ExpectClose("rmsnorm out", ToFloats(r.out), out, kBf16Rtol, 1e-6 * MaxAbs(out));
  ExpectClose("rmsnorm rstd", r.rstd, rstd, kFp32Rtol, 0.0);

  std::vector<float> dinp = dinp0_.f32, dweight = dweight0_;
  reference::RmsNormBackward(dinp.data(), dweight.data(), dout_.f32.data(), inp_.f32.data(),
                             weight_.f32.data(), rstd.data(), n, c);
  ExpectClose("rmsnorm dinp (bf16)", ToFloats(r.dinp_bf16), dinp, kBf16Rtol, 1e-5 * MaxAbs(dinp));
  ExpectClose("rmsnorm dinp (fp32)", r.dinp_f32, dinp, kFp32Rtol, 2e-5 * MaxAbs(dinp));
  ExpectClose("rmsnorm dweight", r.dweight, dweight, kFp32Rtol, 2e-5 * MaxAbs(dweight));
}

TEST_P(NormTest, SameBitsForOneTwoAndThreeThreads) {
  const NormResult ln1 = RunLayerNorm(nullptr), rms1 = RunRmsNorm(nullptr);
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    const NormResult ln = RunLayerNorm(&pool), rms = RunRmsNorm(&pool);
    ExpectBitwiseEqual("layernorm out", ln.out, ln1.out);
    ExpectBitwiseEqual("layernorm mean", ln.mean, ln1.mean);
    ExpectBitwiseEqual("layernorm rstd", ln.rstd, ln1.rstd);
    ExpectBitwiseEqual("layernorm dinp", ln.dinp_bf16, ln1.dinp_bf16);
    ExpectBitwiseEqual("layernorm dinp fp32", ln.dinp_f32, ln1.dinp_f32);
    ExpectBitwiseEqual("layernorm dweight", ln.dweight, ln1.dweight);
    ExpectBitwiseEqual("layernorm dbias", ln.dbias, ln1.dbias);
    ExpectBitwiseEqual("rmsnorm out", rms.out, rms1.out);
    ExpectBitwiseEqual("rmsnorm dinp", rms.dinp_bf16, rms1.dinp_bf16);
    ExpectBitwiseEqual("rmsnorm dweight", rms.dweight, rms1.dweight);
  }
}

// Block norms ([B*T, C], odd widths) and Qwen3's per-head q/k norm ([B*T*heads, head_dim]).
INSTANTIATE_TEST_SUITE_P(Shapes, NormTest,
                         ::testing::Values(NormCase{1, 33}, NormCase{37, 33}, NormCase{70, 768},
                                           NormCase{2 * 13 * 4, 16}, NormCase{2 * 13 * 8, 64},
                                           NormCase{1000, 128}),
                         [](const auto& info) {
                           return "n" + std::to_string(info.param.n) + "_c" +
                                  std::to_string(info.param.c);
                         });

}  // namespace
}  // namespace mobius::kernels::cpu
