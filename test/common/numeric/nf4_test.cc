// QLoRA's NF4 with double-quantised scales (common/numeric/nf4.h) against bitsandbytes 0.50.2 on
// the CPU (test/reference/golden_nf4/nf4.json, made by test/reference/make_nf4_golden.py): the
// same code tables, packed bytes, scale codes, second-level scales and offset, and the same bf16
// values out, on normal and heavy-tailed weights, an odd length, an all-zero block with an
// outlier, and more than one block of 256 scales.
#include <algorithm>
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

// The vectorised quantiser counts exactly as the definition does (the number of midpoints between
// neighbouring levels strictly below x / absmax): on values at the midpoints themselves (ties go
// to the lower level), just beside them, at the levels, beyond +-1, NaN and infinities in a block.
TEST(Nf4, CodesAreTheDefinitionsOnTiesAndOddValues) {
  std::vector<float> bounds;
  for (int i = 0; i < 15; ++i) bounds.push_back((Nf4Code()[i] + Nf4Code()[i + 1]) / 2);
  std::vector<float> x;
  for (float b : bounds) {
    x.insert(x.end(), {b, std::nextafter(b, 2.0f), std::nextafter(b, -2.0f)});
  }
  for (float c : Nf4Code()) x.push_back(c);
  x.insert(x.end(), {1.0f, -1.0f, 0.0f, -0.0f});
  while (x.size() % 64 != 0) x.push_back(0.5f);
  // A block whose absmax is 1 keeps the values as they are; one with NaN and infinities too.
  std::vector<float> odd(64, 0.25f);
  odd[3] = std::nanf("");
  odd[9] = INFINITY;
  odd[10] = -INFINITY;
  odd[11] = 3.0f;
  x.insert(x.end(), odd.begin(), odd.end());
  const int64_t n = static_cast<int64_t>(x.size());
  const Nf4Tensor t = QuantizeNf4(x.data(), n);
  for (int64_t b = 0; b * 64 < n; ++b) {
    float m = 0;
    for (int64_t i = b * 64; i < std::min(n, b * 64 + 64); ++i) m = std::max(m, std::fabs(x[i]));
    const float r = 1.0f / std::max(m, 1e-38f);
    for (int64_t i = b * 64; i < std::min(n, b * 64 + 64); ++i) {
      const float v = std::clamp(x[i] * r, -1.0f, 1.0f);
      int want = 0;
      for (float bound : bounds) want += bound < v ? 1 : 0;
      const int got = (i % 2 == 0) ? t.packed[i / 2] >> 4 : t.packed[i / 2] & 0xF;
      EXPECT_EQ(got, want) << "value " << i << " = " << x[i];
    }
  }
}

// The streaming quantiser (the store fill's) writes the same blob as the whole-tensor one, for
// pieces of any multiple of 64 and a partial last block.
TEST(Nf4, StreamingQuantizerEqualsTheWholeTensor) {
  for (int64_t n : {int64_t{64 * 1000 + 33}, int64_t{64 * 256 * 3}}) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.013f * static_cast<float>(i * i % 9973));
    std::vector<uint8_t> whole(Nf4Bytes(n));
    WriteNf4Blob(QuantizeNf4(x.data(), n), whole.data());
    for (int64_t piece : {int64_t{64}, int64_t{64 * 37}, int64_t{64 * 1024}}) {
      std::vector<uint8_t> blob(Nf4Bytes(n), 0xCD);
      Nf4BlobQuantizer q(n, blob.data());
      for (int64_t begin = 0; begin < n; begin += piece) q.Add(&x[begin], std::min(piece, n - begin));
      q.Finish();
      EXPECT_EQ(blob, whole) << "n " << n << " piece " << piece;
    }
  }
}

// Every block's scale code is the dynamic map's nearest entry to (absmax - offset) / group scale
// (the lower one unless the upper is strictly nearer), over 4096 blocks whose absmaxes sweep the
// whole map, ties and exact entries included.
TEST(Nf4, ScaleCodesAreTheNearestDynamicEntry) {
  const int64_t blocks = 4096, n = blocks * 64;
  std::vector<float> x(n, 0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    x[b * 64] = std::pow(1.003f, static_cast<float>(b));  // absmax from 1 to ~2e5
    if (b % 97 == 0) x[b * 64] = 1.0f;
  }
  const Nf4Tensor t = QuantizeNf4(x.data(), n);
  const std::array<float, 256>& map = DynamicCode();
  for (int64_t b = 0; b < blocks; ++b) {
    const float m = t.scale_scales[b / 256];
    const float v = m > 0 ? (x[b * 64] - t.scale_offset) / m : 0.0f;
    auto it = std::upper_bound(map.begin(), map.end(), v);
    int64_t idx = it == map.begin() ? 0 : (it - map.begin()) - 1;
    if (idx < 255 && std::fabs(v - map[idx + 1]) < std::fabs(v - map[idx])) ++idx;
    EXPECT_EQ(t.scale_codes[b], idx) << "block " << b;
  }
}

}  // namespace
}  // namespace mobius::numeric
