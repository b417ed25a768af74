// rope_* against reference ops_rope.h, in bf16 and fp16, with inverse frequencies from
// reference::RopeInverseFrequencies (plain, linear and llama3 scaling).
#include <random>
#include <vector>

#include "common/model/model_config.h"
#include "gtest/gtest.h"
#include "test/worker/kernels/kernel_test_util.h"
#include "worker/kernels/cpu/rope.h"
#include "worker/reference/ops_rope.h"

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

model::RopeScaling Scaling(model::RopeScaling::Type type) {
  model::RopeScaling s;
  s.type = type;
  s.factor = 8.0;
  s.low_freq_factor = 1.0;
  s.high_freq_factor = 4.0;
  s.original_max_position_embeddings = 64;  // small, so that T crosses all three llama3 bands
  return s;
}

template <typename T>
void CheckRope(int64_t b, int64_t t, int64_t nh, int64_t hd, model::RopeScaling::Type type) {
  using F = Format<T>;
  SCOPED_TRACE(::testing::Message() << F::kName << " B " << b << " T " << t << " NH " << nh
                                    << " hd " << hd << " scaling " << static_cast<int>(type));
  const std::vector<float> inv_freq =
      reference::RopeInverseFrequencies(hd, 10000.0, Scaling(type));
  std::vector<float> ref_cos, ref_sin;
  reference::RopeTables(&ref_cos, &ref_sin, inv_freq, t);
  std::vector<float> cos(t * hd / 2), sin(t * hd / 2);
  rope_tables(cos.data(), sin.data(), inv_freq.data(), t, hd / 2);
  ExpectBitwiseEqual("rope cos table", cos, ref_cos);
  ExpectBitwiseEqual("rope sin table", sin, ref_sin);

  const int64_t n = b * t * nh * hd;
  std::mt19937 rng(static_cast<uint32_t>(n + hd));
  const auto x = RandomHalf<T>(n, 1.0f, rng), dy = RandomHalf<T>(n, 1.0f, rng);
  const auto dx0 = RandomHalf<T>(n, 0.1f, rng);
  std::vector<T> out(n), dx = dx0.bits;
  rope_fwd(out.data(), x.data(), cos.data(), sin.data(), b, t, nh, hd, nullptr);
  rope_bwd(dx.data(), dy.data(), cos.data(), sin.data(), b, t, nh, hd, nullptr);
  std::vector<float> ref_out(n), ref_dx = dx0.f32;
  reference::RopeForward(ref_out.data(), x.f32.data(), ref_cos.data(), ref_sin.data(), b, t, nh,
                         hd);
  reference::RopeBackward(ref_dx.data(), dy.f32.data(), ref_cos.data(), ref_sin.data(), b, t, nh,
                          hd);
  // Two-term sums that may cancel: atol 1e-6 of the scale covers fp32 vs double.
  ExpectClose("rope out", ToFloats(out), ref_out, F::kRtol, 1e-6 * MaxAbs(ref_out) + F::kAtol);
  ExpectClose("rope dinp", ToFloats(dx), ref_dx, F::kRtol, 1e-6 * MaxAbs(ref_dx) + F::kAtol);

  ThreadPool pool(2);
  std::vector<T> out2 = x.bits, dx2 = dx0.bits;
  rope_fwd(out2.data(), out2.data(), cos.data(), sin.data(), b, t, nh, hd, &pool);  // in place
  rope_bwd(dx2.data(), dy.data(), cos.data(), sin.data(), b, t, nh, hd, &pool);
  ExpectBitwiseEqual("rope out, 2 threads in place", out2, out);
  ExpectBitwiseEqual("rope dinp, 2 threads", dx2, dx);
}

template <typename T>
class RopeTest : public ::testing::Test {};
TYPED_TEST_SUITE(RopeTest, HalfFormats, FormatNames);

TYPED_TEST(RopeTest, MatchesReference) {
  CheckRope<TypeParam>(2, 37, 4, 16, model::RopeScaling::Type::kNone);
  CheckRope<TypeParam>(1, 1, 2, 64, model::RopeScaling::Type::kNone);
  CheckRope<TypeParam>(2, 300, 3, 64, model::RopeScaling::Type::kLinear);
  CheckRope<TypeParam>(1, 500, 2, 128, model::RopeScaling::Type::kLlama3);
}

}  // namespace
}  // namespace mobius::kernels::cpu
