// embedding_* against reference ops_embedding.h, in bf16 and fp16. The backward adds each table
// row's contributions in the reference's order, so its fp32 gradients match bitwise.
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "test/worker/kernels/kernel_test_util.h"
#include "worker/kernels/cpu/embedding.h"
#include "worker/reference/ops_embedding.h"

namespace mobius::kernels::cpu {
namespace {

using testing::ExpectBitwiseEqual;
using testing::ExpectClose;
using testing::Format;
using testing::FormatNames;
using testing::HalfFormats;
using testing::RandomHalf;
using testing::ToFloats;

template <typename T>
void CheckEmbedding(int64_t b, int64_t t, int64_t c, int64_t v, bool positions) {
  SCOPED_TRACE(::testing::Message() << Format<T>::kName << " B " << b << " T " << t << " C " << c
                                    << " V " << v << (positions ? " with wpe" : " without wpe"));
  std::mt19937 rng(static_cast<uint32_t>(b * t * c + v));
  std::vector<int32_t> tokens(b * t);
  for (auto& tok : tokens) tok = static_cast<int32_t>(rng() % v);  // small V: many repeats
  const auto wte = RandomHalf<T>(v * c, 1.0f, rng), wpe = RandomHalf<T>(t * c, 1.0f, rng);
  const auto dout = RandomHalf<T>(b * t * c, 1.0f, rng);
  const auto dwte0 = RandomHalf<T>(v * c, 1.0f, rng), dwpe0 = RandomHalf<T>(t * c, 1.0f, rng);
  const T* wpe_bits = positions ? wpe.data() : nullptr;

  std::vector<T> out(b * t * c);
  embedding_fwd(out.data(), tokens.data(), wte.data(), wpe_bits, b, t, c, nullptr);
  std::vector<float> ref_out(b * t * c);
  reference::EmbeddingForward(ref_out.data(), tokens.data(), wte.f32.data(),
                              positions ? wpe.f32.data() : nullptr, b, t, c);
  ExpectClose("embedding out", ToFloats(out), ref_out, Format<T>::kRtol, Format<T>::kAtol);

  std::vector<float> dwte = dwte0.f32, dwpe = dwpe0.f32;
  embedding_bwd(dwte.data(), positions ? dwpe.data() : nullptr, dout.data(), tokens.data(), b, t,
                c, nullptr);
  std::vector<float> ref_dwte = dwte0.f32, ref_dwpe = dwpe0.f32;
  reference::EmbeddingBackward(ref_dwte.data(), positions ? ref_dwpe.data() : nullptr,
                               dout.f32.data(), tokens.data(), b, t, c);
  ExpectBitwiseEqual("embedding dwte", dwte, ref_dwte);
  ExpectBitwiseEqual("embedding dwpe", dwpe, ref_dwpe);

  ThreadPool pool(2);
  std::vector<T> out2(b * t * c);
  embedding_fwd(out2.data(), tokens.data(), wte.data(), wpe_bits, b, t, c, &pool);
  ExpectBitwiseEqual("embedding out, 2 threads", out2, out);
  std::vector<float> dwte2 = dwte0.f32, dwpe2 = dwpe0.f32;
  embedding_bwd(dwte2.data(), positions ? dwpe2.data() : nullptr, dout.data(), tokens.data(), b,
                t, c, &pool);
  ExpectBitwiseEqual("embedding dwte, 2 threads", dwte2, dwte);
  ExpectBitwiseEqual("embedding dwpe, 2 threads", dwpe2, dwpe);
}

template <typename T>
class EmbeddingTest : public ::testing::Test {};
TYPED_TEST_SUITE(EmbeddingTest, HalfFormats, FormatNames);

TYPED_TEST(EmbeddingTest, GptTwoWithLearnedPositions) {
  CheckEmbedding<TypeParam>(2, 37, 33, 11, true);
  CheckEmbedding<TypeParam>(3, 300, 64, 1000, true);
}

TYPED_TEST(EmbeddingTest, RopeModelsWithoutPositions) {
  CheckEmbedding<TypeParam>(1, 1, 33, 5, false);
  CheckEmbedding<TypeParam>(2, 129, 48, 17, false);
}

}  // namespace
}  // namespace mobius::kernels::cpu
