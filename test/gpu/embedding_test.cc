// worker/kernels/cuda/embedding.cuh against a plain C++ reference (label `gpu`), bf16 and fp16.
#include "worker/kernels/cuda/embedding.cuh"

#include <vector>

#include "test/gpu/gpu_test_util.h"

namespace mobius::kernels::cuda {
namespace {

using gpu_test::DeviceArray;
using gpu_test::ExpectClose;
using gpu_test::kHalfTypes;
using gpu_test::RandomFloats;
using gpu_test::RandomHalf;
using gpu_test::ToHalf;

constexpr int64_t kB = 3, kT = 17, kC = 96, kV = 50, kP = 20;

std::vector<int32_t> Tokens() {
  std::vector<int32_t> tokens(kB * kT);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7 + i / 5) % kV);
  tokens[3] = tokens[40] = tokens[41] = 11;  // repeated ids: the backward must add them up
  return tokens;
}

// The forward is one fp32 add and one rounding: bitwise what the CPU computes.
TEST(EmbeddingCuda, ForwardIsBitwiseTheReference) {
  MOBIUS_REQUIRE_GPU();
  const auto tokens = Tokens();
  DeviceArray<int32_t> d_tokens(tokens);
  for (HalfType ht : kHalfTypes) {
    SCOPED_TRACE(HalfTypeName(ht));
    const auto wte = RandomHalf(ht, kV * kC, 1.0f, 1), wpe = RandomHalf(ht, kP * kC, 1.0f, 2);
    DeviceArray<uint16_t> d_wte(wte.bits), d_wpe(wpe.bits), d_out(kB * kT * kC, 0xffff);
    for (bool with_pos : {true, false}) {
      MOBIUS_ASSERT_KERNEL_OK(embedding_fwd(ht, d_out.get(), d_tokens.get(), d_wte.get(),
                                            with_pos ? d_wpe.get() : nullptr, kB, kT, kC, kV,
                                            nullptr, nullptr));
      const auto out = d_out.ToHost();
      for (int64_t bt = 0; bt < kB * kT; ++bt) {
        for (int64_t c = 0; c < kC; ++c) {
          float want = wte.values[tokens[bt] * kC + c];
          if (with_pos) want += wpe.values[(bt % kT) * kC + c];
          ASSERT_EQ(out[bt * kC + c], ToHalf(ht, want)) << "row " << bt << " col " << c;
        }
      }
    }
  }
}

// dwte: fp32 atomics in no fixed order over <= B*T unit-sized terms: fp32 rounding differences of
// a few ulps of the sum, 1e-5 of max|ref| is ample. dwpe is summed in order.
TEST(EmbeddingCuda, BackwardAccumulatesIntoTables) {
  MOBIUS_REQUIRE_GPU();
  const auto tokens = Tokens();
  DeviceArray<int32_t> d_tokens(tokens);
  for (HalfType ht : kHalfTypes) {
    SCOPED_TRACE(HalfTypeName(ht));
    const auto dout = RandomHalf(ht, kB * kT * kC, 1.0f, 3);
    auto dwte = RandomFloats(kV * kC, -1, 1, 4), dwpe = RandomFloats(kP * kC, -1, 1, 5);
    DeviceArray<uint16_t> d_dout(dout.bits);
    DeviceArray<float> d_dwte(dwte), d_dwpe(dwpe);
    MOBIUS_ASSERT_KERNEL_OK(embedding_bwd(ht, d_dwte.get(), d_dwpe.get(), d_dout.get(),
                                          d_tokens.get(), kB, kT, kC, kV, nullptr, nullptr));
    for (int64_t bt = 0; bt < kB * kT; ++bt) {
      for (int64_t c = 0; c < kC; ++c) {
        dwte[tokens[bt] * kC + c] += dout.values[bt * kC + c];
        dwpe[(bt % kT) * kC + c] += dout.values[bt * kC + c];
      }
    }
    ExpectClose(d_dwte.ToHost(), dwte, 1e-5, "dwte");
    ExpectClose(d_dwpe.ToHost(), dwpe, 1e-5, "dwpe");
  }
}

TEST(EmbeddingCuda, OutOfRangeTokensAreCountedNotRead) {
  MOBIUS_REQUIRE_GPU();
  auto tokens = Tokens();
  tokens[5] = kV;
  tokens[9] = -1;
  for (HalfType ht : kHalfTypes) {
    SCOPED_TRACE(HalfTypeName(ht));
    const auto wte = RandomHalf(ht, kV * kC, 1.0f, 6);
    DeviceArray<int32_t> d_tokens(tokens), d_invalid(1, 0);
    DeviceArray<uint16_t> d_wte(wte.bits), d_out(kB * kT * kC, 0xffff);
    DeviceArray<float> d_dwte(kV * kC, 0.0f);
    MOBIUS_ASSERT_KERNEL_OK(embedding_fwd(ht, d_out.get(), d_tokens.get(), d_wte.get(), nullptr, kB,
                                          kT, kC, kV, d_invalid.get(), nullptr));
    const auto out = d_out.ToHost();
    for (int64_t c = 0; c < kC; ++c) {
      EXPECT_EQ(out[5 * kC + c], 0);
      EXPECT_EQ(out[9 * kC + c], 0);
    }
    EXPECT_EQ(d_invalid.ToHost()[0], 2);
    MOBIUS_ASSERT_KERNEL_OK(embedding_bwd(ht, d_dwte.get(), nullptr, d_out.get(), d_tokens.get(),
                                          kB, kT, kC, kV, d_invalid.get(), nullptr));
    EXPECT_EQ(d_invalid.ToHost()[0], 4);
  }
}

}  // namespace
}  // namespace mobius::kernels::cuda
