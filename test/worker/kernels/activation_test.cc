// gelu_* and swiglu_* against reference ops_activation.h on the same 16-bit-rounded inputs, in bf16
// and fp16 (one typed suite per op; tolerances: kernel_test_util.h).
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "test/worker/kernels/kernel_test_util.h"
#include "worker/kernels/cpu/gelu.h"
#include "worker/kernels/cpu/swiglu.h"
#include "worker/reference/ops_activation.h"

namespace mobius::kernels::cpu {
namespace {

using testing::ExpectBitwiseEqual;
using testing::ExpectClose;
using testing::Format;
using testing::FormatNames;
using testing::HalfFormats;
using testing::MaxAbs;
using testing::RandomHalf;
using testing::ToFloats;

// Odd sizes: not a multiple of the staging block, and one past a parallel piece.
const int64_t kSizes[] = {1, 33, 1000, (1 << 14) + 7};

// atol: the outputs cross zero (gelu(x) ~ x/2 near 0, gradients ~ 0.5), where a relative bound
// means nothing; 1e-6 of the tensor's scale covers fp32 vs double there.
constexpr double kAtolShare = 1e-6;

template <typename T>
class GeluTest : public ::testing::Test {};
TYPED_TEST_SUITE(GeluTest, HalfFormats, FormatNames);

TYPED_TEST(GeluTest, MatchesReferenceAndIsDeterministic) {
  using T = TypeParam;
  using F = Format<T>;
  for (int64_t n : kSizes) {
    SCOPED_TRACE(n);
    std::mt19937 rng(static_cast<uint32_t>(n));
    const auto x = RandomHalf<T>(n, 3.0f, rng), dy = RandomHalf<T>(n, 1.0f, rng);
    const auto dx0 = RandomHalf<T>(n, 0.1f, rng);
    std::vector<T> out(n), dx = dx0.bits;
    gelu_fwd(out.data(), x.data(), n, nullptr);
    gelu_bwd(dx.data(), dy.data(), x.data(), n, nullptr);
    std::vector<float> ref_out(n), ref_dx = dx0.f32;
    reference::GeluForward(ref_out.data(), x.f32.data(), n);
    reference::GeluBackward(ref_dx.data(), dy.f32.data(), x.f32.data(), n);
    ExpectClose("gelu out", ToFloats(out), ref_out, F::kRtol,
                kAtolShare * MaxAbs(ref_out) + F::kAtol);
    ExpectClose("gelu dinp", ToFloats(dx), ref_dx, F::kRtol,
                kAtolShare * MaxAbs(ref_dx) + F::kAtol);

    ThreadPool pool(2);
    std::vector<T> out2(n), dx2 = dx0.bits;
    gelu_fwd(out2.data(), x.data(), n, &pool);
    gelu_bwd(dx2.data(), dy.data(), x.data(), n, &pool);
    ExpectBitwiseEqual("gelu out, 2 threads", out2, out);
    ExpectBitwiseEqual("gelu dinp, 2 threads", dx2, dx);
  }
}

template <typename T>
class SwiGluTest : public ::testing::Test {};
TYPED_TEST_SUITE(SwiGluTest, HalfFormats, FormatNames);

TYPED_TEST(SwiGluTest, MatchesReferenceAndIsDeterministic) {
  using T = TypeParam;
  using F = Format<T>;
  for (int64_t n : kSizes) {
    SCOPED_TRACE(n);
    std::mt19937 rng(static_cast<uint32_t>(n) + 7);
    const auto gate = RandomHalf<T>(n, 3.0f, rng), up = RandomHalf<T>(n, 1.0f, rng);
    const auto dy = RandomHalf<T>(n, 1.0f, rng), dg0 = RandomHalf<T>(n, 0.1f, rng);
    const auto du0 = RandomHalf<T>(n, 0.1f, rng);
    std::vector<T> out(n), dg = dg0.bits, du = du0.bits;
    swiglu_fwd(out.data(), gate.data(), up.data(), n, nullptr);
    swiglu_bwd(dg.data(), du.data(), dy.data(), gate.data(), up.data(), n, nullptr);
    std::vector<float> ref_out(n), ref_dg = dg0.f32, ref_du = du0.f32;
    reference::SwiGluForward(ref_out.data(), gate.f32.data(), up.f32.data(), n);
    reference::SwiGluBackward(ref_dg.data(), ref_du.data(), dy.f32.data(), gate.f32.data(),
                              up.f32.data(), n);
    ExpectClose("swiglu out", ToFloats(out), ref_out, F::kRtol,
                kAtolShare * MaxAbs(ref_out) + F::kAtol);
    ExpectClose("swiglu dgate", ToFloats(dg), ref_dg, F::kRtol,
                kAtolShare * MaxAbs(ref_dg) + F::kAtol);
    ExpectClose("swiglu dup", ToFloats(du), ref_du, F::kRtol,
                kAtolShare * MaxAbs(ref_du) + F::kAtol);

    ThreadPool pool(2);
    std::vector<T> out2(n), dg2 = dg0.bits, du2 = du0.bits;
    swiglu_fwd(out2.data(), gate.data(), up.data(), n, &pool);
    swiglu_bwd(dg2.data(), du2.data(), dy.data(), gate.data(), up.data(), n, &pool);
    ExpectBitwiseEqual("swiglu out, 2 threads", out2, out);
    ExpectBitwiseEqual("swiglu dgate, 2 threads", dg2, dg);
    ExpectBitwiseEqual("swiglu dup, 2 threads", du2, du);
  }
}

}  // namespace
}  // namespace mobius::kernels::cpu
