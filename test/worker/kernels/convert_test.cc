// Bf16RowToFp32 / Fp32RowToBf16 (convert.h) against common/numeric/bf16.h, bit for bit: every bf16
// pattern, and for each the floats just below, at and above its rounding tie (NaNs and infinities
// included), in rows whose length is not a multiple of the vector width.
#include "worker/kernels/cpu/convert.h"

#include <bit>
#include <cstdint>
#include <vector>

#include "common/numeric/bf16.h"
#include "gtest/gtest.h"

namespace mobius::kernels::cpu {
namespace {

TEST(ConvertTest, EveryBf16WidensExactly) {
  std::vector<uint16_t> src(65536 + 5);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i);
  std::vector<float> got(src.size());
  Bf16RowToFp32(got.data(), src.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]),
              std::bit_cast<uint32_t>(numeric::Bf16ToFp32(src[i])))
        << "bits " << src[i];
  }
}

TEST(ConvertTest, NarrowingRoundsLikeTheScalarVersion) {
  std::vector<float> src;
  for (uint32_t hi = 0; hi < 65536; ++hi) {
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, hi * 2654435761u >> 16}) {
      src.push_back(std::bit_cast<float>(hi << 16 | lo));
    }
  }
  src.resize(src.size() - 3);  // a tail that is not a whole vector
  std::vector<uint16_t> got(src.size());
  Fp32RowToBf16(got.data(), src.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_EQ(got[i], numeric::Fp32ToBf16(src[i])) << "float bits " << std::bit_cast<uint32_t>(src[i]);
  }
}

}  // namespace
}  // namespace mobius::kernels::cpu
