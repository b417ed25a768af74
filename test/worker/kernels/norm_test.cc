// layernorm_* and rmsnorm_* against reference ops_norm.h on the same 16-bit-rounded inputs, in
// bf16 and fp16 (each test runs both formats; tolerances: kernel_test_util.h).
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

using testing::ExpectBitwiseEqual;
using testing::ExpectClose;
using testing::Format;
using testing::HalfTensor;
using testing::kFp32Rtol;
using testing::MaxAbs;
using testing::RandomHalf;
using testing::ToFloats;

struct NormCase {
  int64_t n, c;
};

// Everything one run of forward + backward produces, for the tolerance and determinism checks.
template <typename T>
struct NormResult {
  std::vector<T> out, dinp_half;
  std::vector<float> mean, rstd, dinp_f32, dweight, dbias;
};

// The inputs of one shape in one format (the same draws for every format).
template <typename T>
struct NormInputs {
  NormInputs(int64_t n, int64_t c) {
    std::mt19937 rng(static_cast<uint32_t>(n * 1000 + c));
    inp = RandomHalf<T>(n * c, 1.5f, rng, 0.7f);
    weight = RandomHalf<T>(c, 0.5f, rng, 1.0f);
    bias = RandomHalf<T>(c, 0.5f, rng);
    dout = RandomHalf<T>(n * c, 1.0f, rng);
    dinp0 = RandomHalf<T>(n * c, 0.1f, rng);  // gradients accumulate: start from non-zero values
    dweight0 = RandomHalf<T>(c, 1.0f, rng).f32;
    dbias0 = RandomHalf<T>(c, 1.0f, rng).f32;
  }
  HalfTensor<T> inp, weight, bias, dout, dinp0;
  std::vector<float> dweight0, dbias0;
};

class NormTest : public ::testing::TestWithParam<NormCase> {
 protected:
  template <typename T>
  NormResult<T> RunLayerNorm(const NormInputs<T>& in, ThreadPool* pool) const {
    const auto [n, c] = GetParam();
    NormResult<T> r{std::vector<T>(n * c), in.dinp0.bits, std::vector<float>(n),
                    std::vector<float>(n), in.dinp0.f32, in.dweight0, in.dbias0};
    layernorm_fwd(r.out.data(), r.mean.data(), r.rstd.data(), in.inp.data(), in.weight.data(),
                  in.bias.data(), n, c, kEps, pool);
    layernorm_bwd(r.dinp_half.data(), r.dweight.data(), r.dbias.data(), in.dout.data(),
                  in.inp.data(), in.weight.data(), r.mean.data(), r.rstd.data(), n, c, pool);
    std::vector<float> dw(c), db(c);  // the fp32-dinp variant must give the same dweight/dbias
    layernorm_bwd(r.dinp_f32.data(), dw.data(), db.data(), in.dout.data(), in.inp.data(),
                  in.weight.data(), r.mean.data(), r.rstd.data(), n, c, pool);
    return r;
  }

  template <typename T>
  NormResult<T> RunRmsNorm(const NormInputs<T>& in, ThreadPool* pool) const {
    const auto [n, c] = GetParam();
    NormResult<T> r{std::vector<T>(n * c), in.dinp0.bits, {}, std::vector<float>(n),
                    in.dinp0.f32, in.dweight0, {}};
    rmsnorm_fwd(r.out.data(), r.rstd.data(), in.inp.data(), in.weight.data(), n, c, kEps, pool);
    rmsnorm_bwd(r.dinp_half.data(), r.dweight.data(), in.dout.data(), in.inp.data(),
                in.weight.data(), r.rstd.data(), n, c, pool);
    std::vector<float> dw(c);
    rmsnorm_bwd(r.dinp_f32.data(), dw.data(), in.dout.data(), in.inp.data(), in.weight.data(),
                r.rstd.data(), n, c, pool);
    return r;
  }

  template <typename T>
  void CheckLayerNorm() const {
    using F = Format<T>;
    SCOPED_TRACE(F::kName);
    const auto [n, c] = GetParam();
    const NormInputs<T> in(n, c);
    const NormResult<T> r = RunLayerNorm(in, nullptr);
    std::vector<float> out(n * c), mean(n), rstd(n);
    reference::LayerNormForward(out.data(), mean.data(), rstd.data(), in.inp.f32.data(),
                                in.weight.f32.data(), in.bias.f32.data(), n, c, kEps);
    ExpectClose("layernorm out", ToFloats(r.out), out, F::kRtol, 1e-5 * MaxAbs(out) + F::kAtol);
    ExpectClose("layernorm mean", r.mean, mean, kFp32Rtol, 1e-6 * MaxAbs(in.inp.f32));
    ExpectClose("layernorm rstd", r.rstd, rstd, kFp32Rtol, 0.0);

    std::vector<float> dinp = in.dinp0.f32, dweight = in.dweight0, dbias = in.dbias0;
    reference::LayerNormBackward(dinp.data(), dweight.data(), dbias.data(), in.dout.f32.data(),
                                 in.inp.f32.data(), in.weight.f32.data(), mean.data(), rstd.data(),
                                 n, c);
    ExpectClose("layernorm dinp (16-bit)", ToFloats(r.dinp_half), dinp, F::kRtol,
                1e-5 * MaxAbs(dinp) + F::kAtol);
    ExpectClose("layernorm dinp (fp32)", r.dinp_f32, dinp, kFp32Rtol, 2e-5 * MaxAbs(dinp));
    ExpectClose("layernorm dweight", r.dweight, dweight, kFp32Rtol, 2e-5 * MaxAbs(dweight));
    ExpectClose("layernorm dbias", r.dbias, dbias, kFp32Rtol, 2e-5 * MaxAbs(dbias));
  }

  template <typename T>
  void CheckRmsNorm() const {
    using F = Format<T>;
    SCOPED_TRACE(F::kName);
    const auto [n, c] = GetParam();
    const NormInputs<T> in(n, c);
    const NormResult<T> r = RunRmsNorm(in, nullptr);
    std::vector<float> out(n * c), rstd(n);
    reference::RmsNormForward(out.data(), rstd.data(), in.inp.f32.data(), in.weight.f32.data(), n,
                              c, kEps);
    ExpectClose("rmsnorm out", ToFloats(r.out), out, F::kRtol, 1e-6 * MaxAbs(out) + F::kAtol);
    ExpectClose("rmsnorm rstd", r.rstd, rstd, kFp32Rtol, 0.0);

    std::vector<float> dinp = in.dinp0.f32, dweight = in.dweight0;
    reference::RmsNormBackward(dinp.data(), dweight.data(), in.dout.f32.data(), in.inp.f32.data(),
                               in.weight.f32.data(), rstd.data(), n, c);
    ExpectClose("rmsnorm dinp (16-bit)", ToFloats(r.dinp_half), dinp, F::kRtol,
                1e-5 * MaxAbs(dinp) + F::kAtol);
    ExpectClose("rmsnorm dinp (fp32)", r.dinp_f32, dinp, kFp32Rtol, 2e-5 * MaxAbs(dinp));
    ExpectClose("rmsnorm dweight", r.dweight, dweight, kFp32Rtol, 2e-5 * MaxAbs(dweight));
  }

  template <typename T>
  void CheckThreads() const {
    SCOPED_TRACE(Format<T>::kName);
    const auto [n, c] = GetParam();
    const NormInputs<T> in(n, c);
    const NormResult<T> ln1 = RunLayerNorm(in, nullptr), rms1 = RunRmsNorm(in, nullptr);
    for (int threads : {2, 3}) {
      ThreadPool pool(threads);
      const NormResult<T> ln = RunLayerNorm(in, &pool), rms = RunRmsNorm(in, &pool);
      ExpectBitwiseEqual("layernorm out", ln.out, ln1.out);
      ExpectBitwiseEqual("layernorm mean", ln.mean, ln1.mean);
      ExpectBitwiseEqual("layernorm rstd", ln.rstd, ln1.rstd);
      ExpectBitwiseEqual("layernorm dinp", ln.dinp_half, ln1.dinp_half);
      ExpectBitwiseEqual("layernorm dinp fp32", ln.dinp_f32, ln1.dinp_f32);
      ExpectBitwiseEqual("layernorm dweight", ln.dweight, ln1.dweight);
      ExpectBitwiseEqual("layernorm dbias", ln.dbias, ln1.dbias);
      ExpectBitwiseEqual("rmsnorm out", rms.out, rms1.out);
      ExpectBitwiseEqual("rmsnorm dinp", rms.dinp_half, rms1.dinp_half);
      ExpectBitwiseEqual("rmsnorm dweight", rms.dweight, rms1.dweight);
    }
  }

  static constexpr float kEps = 1e-5f;
};

TEST_P(NormTest, LayerNormMatchesReference) {
  CheckLayerNorm<uint16_t>();
  CheckLayerNorm<F16>();
}

TEST_P(NormTest, RmsNormMatchesReference) {
  CheckRmsNorm<uint16_t>();
  CheckRmsNorm<F16>();
}

TEST_P(NormTest, SameBitsForOneTwoAndThreeThreads) {
  CheckThreads<uint16_t>();
  CheckThreads<F16>();
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
