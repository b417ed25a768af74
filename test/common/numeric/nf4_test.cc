// QLoRA's NF4 with double-quantised scales (common/numeric/nf4.h) against bitsandbytes 0.50.2 on
// the CPU (test/reference/golden_nf4/nf4.json, made by test/reference/make_nf4_golden.py): the
// same code tables, packed bytes, scale codes, second-level scales and offset, and the same bf16
// values out, on normal and heavy-tailed weights, an odd length, an all-zero block with an
// outlier, and more than one block of 256 scales.
#include <cmath>
#include <cstring>
#include <fstream>

#include "common/numeric/nf4.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/paths.h"

namespace mobius::numeric {
namespace {

using json = nlohmann::json;

const json& Golden() {
  static const json* g = [] {
    std::ifstream in(testing::SourcePath("test/reference/golden_nf4/nf4.json"));
    return new json(json::parse(in));
  }();
  return *g;
}

TEST(Nf4, CodeTablesAreBitsandbytes) {
  const std::vector<float> nf4 = Golden()["nf4_code"], dynamic = Golden()["dynamic_code"];
  ASSERT_EQ(nf4.size(), 16u);
  ASSERT_EQ(dynamic.size(), 256u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(Nf4Code()[i], nf4[i]) << i;
  for (int i = 0; i < 256; ++i) EXPECT_EQ(DynamicCode()[i], dynamic[i]) << i;
}

TEST(Nf4, QuantizeAndDequantizeEqualBitsandbytes) {
  for (const json& c : Golden()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::vector<uint16_t> input = c["input_bf16"];
    const Nf4Tensor t = QuantizeNf4(input.data(), static_cast<int64_t>(input.size()));
    EXPECT_EQ(t.numel, static_cast<int64_t>(input.size()));
    EXPECT_EQ(t.packed, c["packed"].get<std::vector<uint8_t>>());
    EXPECT_EQ(t.scale_codes, c["absmax_codes"].get<std::vector<uint8_t>>());
    EXPECT_EQ(t.scale_scales, c["absmax_scales"].get<std::vector<float>>());
    EXPECT_EQ(t.scale_offset, c["offset"].get<float>());
    EXPECT_EQ(Nf4BlockScales(t), c["absmax"].get<std::vector<float>>());
    std::vector<uint16_t> out(input.size());
    DequantizeNf4ToBf16(t, out.data());
    EXPECT_EQ(out, c["dequantized_bf16"].get<std::vector<uint16_t>>());
    EXPECT_EQ(static_cast<size_t>(Nf4Bytes(t.numel)),
              t.packed.size() + t.scale_codes.size() + 4 * t.scale_scales.size() + 4);
  }
}

// The error is what 4 bits allow: every value within half the widest NF4 gap of its block's
// scale (plus the scale's own 8-bit error), and a tensor of equal values round-trips exactly.
TEST(Nf4, ErrorIsBoundedAndFlatTensorsRoundTrip) {
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 0.1f;
  const Nf4Tensor t = QuantizeNf4(x.data(), static_cast<int64_t>(x.size()));
  std::vector<float> y(x.size());
  DequantizeNf4(t, y.data());
  float widest = 0;
  for (int i = 0; i < 15; ++i) widest = std::max(widest, Nf4Code()[i + 1] - Nf4Code()[i]);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_LE(std::fabs(y[i] - x[i]), 0.1f * widest * 0.52f);
  std::vector<float> flat(130, -0.25f);
  const Nf4Tensor f = QuantizeNf4(flat.data(), 130);
  std::vector<float> back(130);
  DequantizeNf4(f, back.data());
  for (float v : back) EXPECT_EQ(v, -0.25f);
  EXPECT_EQ(Nf4Bytes(0), 4);
}

// The blob (the store's form) holds exactly the tensor, at the documented offsets, in
// Nf4Bytes(n) bytes, for lengths around the block and scale-group boundaries.
TEST(Nf4, BlobRoundTripsAtItsOffsets) {
  for (int64_t n : {1, 63, 64, 65, 127, 64 * 256, 64 * 256 + 1, 64 * 300 + 7}) {
    SCOPED_TRACE(n);
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = std::cos(0.11f * static_cast<float>(i)) * (1 + i % 7);
    const Nf4Tensor t = QuantizeNf4(x.data(), n);
    const Nf4BlobLayout l = MakeNf4BlobLayout(n);
    ASSERT_EQ(l.bytes, Nf4Bytes(n));
    EXPECT_EQ(l.scales % 4, 0);
    std::vector<uint8_t> blob(l.bytes, 0xAB);
    WriteNf4Blob(t, blob.data());
    float offset;
    std::memcpy(&offset, blob.data(), 4);
    EXPECT_EQ(offset, t.scale_offset);
    EXPECT_EQ(blob[l.codes], t.scale_codes[0]);
    EXPECT_EQ(blob[l.packed], t.packed[0]);
    const Nf4Tensor back = ReadNf4Blob(blob.data(), n);
    EXPECT_EQ(back.packed, t.packed);
    EXPECT_EQ(back.scale_codes, t.scale_codes);
    EXPECT_EQ(back.scale_scales, t.scale_scales);
    EXPECT_EQ(back.scale_offset, t.scale_offset);
  }
}

}  // namespace
}  // namespace mobius::numeric
