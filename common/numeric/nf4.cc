#include "common/numeric/nf4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/numeric/bf16.h"
#include "common/numeric/clones.h"

namespace mobius::numeric {
namespace {

// bitsandbytes' NF4 table (functional.get_4bit_type("nf4")), as fp32 hex.
constexpr std::array<float, 16> kNf4 = {
    -0x1.p+0f,       -0x1.647362p-1f, -0x1.0cd66p-1f,  -0x1.94654p-2f,
    -0x1.23449ap-2f, -0x1.7a6a7ep-3f, -0x1.74f0e2p-4f, 0x0.0p+0f,
    0x1.45f5fep-4f,  0x1.4995c6p-3f,  0x1.f809bap-3f,  0x1.5a0674p-2f,
    0x1.c3497p-2f,   0x1.200f56p-1f,  0x1.722766p-1f,  0x1.p+0f};

// bitsandbytes' create_dynamic_map(signed=True), sorted, as fp32 hex.
constexpr std::array<float, 256> kDynamic = {
    -0x1.fc6666p-1f, -0x1.f53334p-1f, -0x1.ee0000p-1f, -0x1.e6ccccp-1f,
    -0x1.df999ap-1f, -0x1.d86666p-1f, -0x1.d13334p-1f, -0x1.ca0000p-1f,
    -0x1.c2ccccp-1f, -0x1.bb999ap-1f, -0x1.b46666p-1f, -0x1.ad3334p-1f,
    -0x1.a60000p-1f, -0x1.9eccccp-1f, -0x1.97999ap-1f, -0x1.906666p-1f,
    -0x1.893334p-1f, -0x1.820000p-1f, -0x1.7accccp-1f, -0x1.73999ap-1f,
    -0x1.6c6668p-1f, -0x1.653334p-1f, -0x1.5e0000p-1f, -0x1.56ccccp-1f,
    -0x1.4f999ap-1f, -0x1.486668p-1f, -0x1.413334p-1f, -0x1.3a0000p-1f,
    -0x1.32ccccp-1f, -0x1.2b999ap-1f, -0x1.246668p-1f, -0x1.1d3334p-1f,
    -0x1.160000p-1f, -0x1.0eccccp-1f, -0x1.079998p-1f, -0x1.006666p-1f,
    -0x1.f26664p-2f, -0x1.e40000p-2f, -0x1.d59998p-2f, -0x1.c73334p-2f,
    -0x1.b8ccccp-2f, -0x1.aa6666p-2f, -0x1.9c0000p-2f, -0x1.8d9998p-2f,
    -0x1.7f3334p-2f, -0x1.70ccccp-2f, -0x1.626666p-2f, -0x1.540000p-2f,
    -0x1.459998p-2f, -0x1.373334p-2f, -0x1.28ccccp-2f, -0x1.1a6668p-2f,
    -0x1.0c0000p-2f, -0x1.fb3332p-3f, -0x1.de6666p-3f, -0x1.c1999ap-3f,
    -0x1.a4ccccp-3f, -0x1.880000p-3f, -0x1.6b3334p-3f, -0x1.4e6666p-3f,
    -0x1.31999ap-3f, -0x1.14ccccp-3f, -0x1.f00000p-4f, -0x1.b66668p-4f,
    -0x1.93d70ap-4f, -0x1.8851eep-4f, -0x1.7ccccep-4f, -0x1.7147aep-4f,
    -0x1.65c290p-4f, -0x1.5a3d70p-4f, -0x1.4eb854p-4f, -0x1.433334p-4f,
    -0x1.37ae14p-4f, -0x1.2c28f6p-4f, -0x1.20a3d6p-4f, -0x1.151ebap-4f,
    -0x1.09999ap-4f, -0x1.fc28f6p-5f, -0x1.e51ebap-5f, -0x1.ce147ap-5f,
    -0x1.b70a3ep-5f, -0x1.a00000p-5f, -0x1.88f5c2p-5f, -0x1.71eb86p-5f,
    -0x1.5ae146p-5f, -0x1.43d70ap-5f, -0x1.2ccccep-5f, -0x1.15c290p-5f,
    -0x1.fd70a4p-6f, -0x1.cf5c2ap-6f, -0x1.a147aep-6f, -0x1.733334p-6f,
    -0x1.451ebap-6f, -0x1.170a3ep-6f, -0x1.d1eb86p-7f, -0x1.75c290p-7f,
    -0x1.3e76c8p-7f, -0x1.2c0830p-7f, -0x1.19999ap-7f, -0x1.072b02p-7f,
    -0x1.e978d4p-8f, -0x1.c49ba6p-8f, -0x1.9fbe76p-8f, -0x1.7ae148p-8f,
    -0x1.56041ap-8f, -0x1.3126e8p-8f, -0x1.0c49bap-8f, -0x1.ced914p-9f,
    -0x1.851eb8p-9f, -0x1.3b645ap-9f, -0x1.e353f8p-10f, -0x1.4fdf3ap-10f,
    -0x1.eecbfep-11f, -0x1.b3d07cp-11f, -0x1.78d500p-11f, -0x1.3dd982p-11f,
    -0x1.02de02p-11f, -0x1.8fc506p-12f, -0x1.19ce0ap-12f, -0x1.47ae16p-13f,
    -0x1.743e96p-14f, -0x1.15df66p-14f, -0x1.6f0068p-15f, -0x1.64840cp-16f,
    -0x1.040bfep-17f, -0x1.b43528p-19f, -0x1.27476ep-21f, 0x0.0p+0f,
    0x1.27476ep-21f, 0x1.b43528p-19f, 0x1.040bfep-17f, 0x1.64840cp-16f,
    0x1.6f0068p-15f, 0x1.15df66p-14f, 0x1.743e96p-14f, 0x1.47ae16p-13f,
    0x1.19ce0ap-12f, 0x1.8fc506p-12f, 0x1.02de02p-11f, 0x1.3dd982p-11f,
    0x1.78d500p-11f, 0x1.b3d07cp-11f, 0x1.eecbfep-11f, 0x1.4fdf3ap-10f,
    0x1.e353f8p-10f, 0x1.3b645ap-9f, 0x1.851eb8p-9f, 0x1.ced914p-9f,
    0x1.0c49bap-8f, 0x1.3126e8p-8f, 0x1.56041ap-8f, 0x1.7ae148p-8f,
    0x1.9fbe76p-8f, 0x1.c49ba6p-8f, 0x1.e978d4p-8f, 0x1.072b02p-7f,
    0x1.19999ap-7f, 0x1.2c0830p-7f, 0x1.3e76c8p-7f, 0x1.75c290p-7f,
    0x1.d1eb86p-7f, 0x1.170a3ep-6f, 0x1.451ebap-6f, 0x1.733334p-6f,
    0x1.a147aep-6f, 0x1.cf5c2ap-6f, 0x1.fd70a4p-6f, 0x1.15c290p-5f,
    0x1.2ccccep-5f, 0x1.43d70ap-5f, 0x1.5ae146p-5f, 0x1.71eb86p-5f,
    0x1.88f5c2p-5f, 0x1.a00000p-5f, 0x1.b70a3ep-5f, 0x1.ce147ap-5f,
    0x1.e51ebap-5f, 0x1.fc28f6p-5f, 0x1.09999ap-4f, 0x1.151ebap-4f,
    0x1.20a3d6p-4f, 0x1.2c28f6p-4f, 0x1.37ae14p-4f, 0x1.433334p-4f,
    0x1.4eb854p-4f, 0x1.5a3d70p-4f, 0x1.65c290p-4f, 0x1.7147aep-4f,
    0x1.7ccccep-4f, 0x1.8851eep-4f, 0x1.93d70ap-4f, 0x1.b66668p-4f,
    0x1.f00000p-4f, 0x1.14ccccp-3f, 0x1.31999ap-3f, 0x1.4e6666p-3f,
    0x1.6b3334p-3f, 0x1.880000p-3f, 0x1.a4ccccp-3f, 0x1.c1999ap-3f,
    0x1.de6666p-3f, 0x1.fb3332p-3f, 0x1.0c0000p-2f, 0x1.1a6668p-2f,
    0x1.28ccccp-2f, 0x1.373334p-2f, 0x1.459998p-2f, 0x1.540000p-2f,
    0x1.626666p-2f, 0x1.70ccccp-2f, 0x1.7f3334p-2f, 0x1.8d9998p-2f,
    0x1.9c0000p-2f, 0x1.aa6666p-2f, 0x1.b8ccccp-2f, 0x1.c73334p-2f,
    0x1.d59998p-2f, 0x1.e40000p-2f, 0x1.f26664p-2f, 0x1.006666p-1f,
    0x1.079998p-1f, 0x1.0eccccp-1f, 0x1.160000p-1f, 0x1.1d3334p-1f,
    0x1.246668p-1f, 0x1.2b999ap-1f, 0x1.32ccccp-1f, 0x1.3a0000p-1f,
    0x1.413334p-1f, 0x1.486668p-1f, 0x1.4f999ap-1f, 0x1.56ccccp-1f,
    0x1.5e0000p-1f, 0x1.653334p-1f, 0x1.6c6668p-1f, 0x1.73999ap-1f,
    0x1.7accccp-1f, 0x1.820000p-1f, 0x1.893334p-1f, 0x1.906666p-1f,
    0x1.97999ap-1f, 0x1.9eccccp-1f, 0x1.a60000p-1f, 0x1.ad3334p-1f,
    0x1.b46666p-1f, 0x1.bb999ap-1f, 0x1.c2ccccp-1f, 0x1.ca0000p-1f,
    0x1.d13334p-1f, 0x1.d86666p-1f, 0x1.df999ap-1f, 0x1.e6ccccp-1f,
    0x1.ee0000p-1f, 0x1.f53334p-1f, 0x1.fc6666p-1f, 0x1.p+0f,
};

// The midpoints between neighbouring NF4 levels, ascending.
constexpr std::array<float, 15> kNf4Bounds = [] {
  std::array<float, 15> b{};
  for (int i = 0; i < 15; ++i) b[i] = (kNf4[i] + kNf4[i + 1]) / 2;
  return b;
}();

// NF4: the number of midpoints strictly below v (torch.bucketize, right=False). A value outside
// [-1, 1] counts as its clamp would (all midpoints lie inside); NaN counts none.
inline uint8_t Nf4Index(float v) {
  int count = 0;
  for (int k = 0; k < 15; ++k) count += kNf4Bounds[k] < v ? 1 : 0;
  return static_cast<uint8_t>(count);
}

// The dynamic map: the largest entry <= v (the first one below it), then the right neighbour
// when it is strictly nearer (bitsandbytes' CPU blockwise quantiser). The upper bound is found by
// a branch-free binary search (one per block of 64 values; a branchy one cost as much as the
// codes); NaN lands past the end, as std::upper_bound puts it.
uint8_t DynamicIndex(float v) {
  int64_t pos = 0;  // the first entry greater than v
  for (int64_t step = 128; step > 0; step /= 2) pos += !(v < kDynamic[pos + step - 1]) ? step : 0;
  pos += !(v < kDynamic[pos]) ? 1 : 0;
  int64_t idx = pos == 0 ? 0 : pos - 1;
  if (idx < 255) {
    const float left = std::fabs(v - kDynamic[idx]), right = std::fabs(v - kDynamic[idx + 1]);
    if (right < left) ++idx;
  }
  return static_cast<uint8_t>(idx);
}

using V8f = float __attribute__((vector_size(32)));
using V8i = int32_t __attribute__((vector_size(32)));

// Full blocks of 64 (AVX2 where the CPU has it; the same bits either way): each block's absmax
// (NaN ignored, as std::max(m, |x|) does), then each value times the reciprocal placed among the 15
// midpoints by a branch-free binary search, eight lanes at a time: pos = 0, then pos += step where
// midpoint[pos + step - 1] < v, for steps 8, 4, 2, 1 (the candidates of a step looked up with one
// lane permutation). pos is the number of midpoints strictly below v, as Nf4Index counts them.
// Codes are packed two per byte, the first value in the high nibble.
MOBIUS_NUMERIC_CLONES void QuantizeFullBlocks(const float* __restrict x, int64_t blocks,
                                              uint8_t* __restrict packed,
                                              float* __restrict absmax) {
  constexpr int kLanes = 8, kVectors = kNf4BlockSize / kLanes;
  const auto& b = kNf4Bounds;
  const V8f step8 = V8f{} + b[7];                                         // pos + 7
  const V8f step4 = {b[3], b[11], b[3], b[11], b[3], b[11], b[3], b[11]};  // pos + 3, by pos / 8
  const V8f step2 = {b[1], b[5], b[9], b[13], b[1], b[5], b[9], b[13]};    // pos + 1, by pos / 4
  const V8f step1 = {b[0], b[2], b[4], b[6], b[8], b[10], b[12], b[14]};   // pos, by pos / 2
  for (int64_t blk = 0; blk < blocks; ++blk) {
    V8f in[kVectors];
    std::memcpy(in, x + blk * kNf4BlockSize, sizeof(in));
    V8f m = {};
#pragma GCC unroll 8
    for (int j = 0; j < kVectors; ++j) {
      const V8f a = reinterpret_cast<V8f>(reinterpret_cast<V8i>(in[j]) & 0x7fffffff);
      m = m < a ? a : m;
    }
    m = m < __builtin_shuffle(m, V8i{4, 5, 6, 7, 0, 1, 2, 3})
            ? __builtin_shuffle(m, V8i{4, 5, 6, 7, 0, 1, 2, 3}) : m;
    m = m < __builtin_shuffle(m, V8i{2, 3, 0, 1, 6, 7, 4, 5})
            ? __builtin_shuffle(m, V8i{2, 3, 0, 1, 6, 7, 4, 5}) : m;
    m = m < __builtin_shuffle(m, V8i{1, 0, 3, 2, 5, 4, 7, 6})
            ? __builtin_shuffle(m, V8i{1, 0, 3, 2, 5, 4, 7, 6}) : m;
    const float block_max = m[0];  // every lane holds the maximum
    absmax[blk] = block_max;
    const float r = 1.0f / std::max(block_max, 1e-38f);
    int32_t codes[kNf4BlockSize];
#pragma GCC unroll 8
    for (int j = 0; j < kVectors; ++j) {
      const V8f v = in[j] * r;
      V8i pos = (step8 < v) & 8;
      pos += (__builtin_shuffle(step4, pos >> 3) < v) & 4;
      pos += (__builtin_shuffle(step2, pos >> 2) < v) & 2;
      pos += (__builtin_shuffle(step1, pos >> 1) < v) & 1;
      std::memcpy(codes + j * kLanes, &pos, sizeof(pos));
    }
    uint8_t* out = packed + blk * (kNf4BlockSize / 2);
    for (int i = 0; i < kNf4BlockSize / 2; ++i) {
      out[i] = static_cast<uint8_t>((codes[2 * i] << 4) | codes[2 * i + 1]);
    }
  }
}

}  // namespace

Nf4BlobQuantizer::Nf4BlobQuantizer(int64_t n, void* blob)
    : layout_(MakeNf4BlobLayout(n)),
      blob_(static_cast<uint8_t*>(blob)),
      absmax_(static_cast<size_t>(layout_.blocks)) {}

void Nf4BlobQuantizer::Add(const float* x, int64_t count) {
  const int64_t full = count / kNf4BlockSize;
  QuantizeFullBlocks(x, full, blob_ + layout_.packed + done_ / 2,
                     absmax_.data() + done_ / kNf4BlockSize);
  if (const int64_t rest = count - full * kNf4BlockSize; rest > 0) {  // the tensor's last block
    const float* v = x + full * kNf4BlockSize;
    float m = 0;
    for (int64_t i = 0; i < rest; ++i) m = std::max(m, std::fabs(v[i]));
    absmax_[(done_ / kNf4BlockSize) + full] = m;
    const float safe = std::max(m, 1e-38f);  // the partial block divides, as bitsandbytes does
    uint8_t* out = blob_ + layout_.packed + (done_ + full * kNf4BlockSize) / 2;
    for (int64_t i = 0; i < rest; i += 2) {
      const uint8_t hi = Nf4Index(std::clamp(v[i] / safe, -1.0f, 1.0f));
      const uint8_t lo = i + 1 < rest ? Nf4Index(std::clamp(v[i + 1] / safe, -1.0f, 1.0f)) : 7;
      out[i / 2] = static_cast<uint8_t>((hi << 4) | lo);  // an odd tail pads with 0's code
    }
  }
  done_ += count;
}

void Nf4BlobQuantizer::Finish() {
  const int64_t blocks = layout_.blocks;
  double sum = 0;
  for (float a : absmax_) sum += a;
  const float offset = blocks > 0 ? static_cast<float>(sum / static_cast<double>(blocks)) : 0.0f;
  std::memcpy(blob_, &offset, 4);
  for (int64_t g = 0; g < layout_.groups; ++g) {
    const int64_t begin = g * kNf4ScaleBlockSize;
    const int64_t end = std::min(blocks, begin + kNf4ScaleBlockSize);
    float m = 0;
    for (int64_t i = begin; i < end; ++i) m = std::max(m, std::fabs(absmax_[i] - offset));
    std::memcpy(blob_ + layout_.scales + 4 * g, &m, 4);
    for (int64_t i = begin; i < end; ++i) {  // equal scales: all at the offset
      blob_[layout_.codes + i] = DynamicIndex(m > 0 ? (absmax_[i] - offset) / m : 0.0f);
    }
  }
}

const std::array<float, 16>& Nf4Code() { return kNf4; }
const std::array<float, 256>& DynamicCode() { return kDynamic; }

Nf4Tensor QuantizeNf4(const float* x, int64_t n) {
  std::vector<uint8_t> blob(static_cast<size_t>(Nf4Bytes(n)));
  Nf4BlobQuantizer q(n, blob.data());
  q.Add(x, n);
  q.Finish();
  return ReadNf4Blob(blob.data(), n);
}

Nf4Tensor QuantizeNf4(const uint16_t* bf16, int64_t n) {
  std::vector<float> x(n);
  Bf16ToFp32(bf16, x.data(), n);
  return QuantizeNf4(x.data(), n);
}

std::vector<float> Nf4BlockScales(const Nf4Tensor& t) {
  std::vector<float> out(t.scale_codes.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = Nf4BlobScale(kDynamic[t.scale_codes[i]], t.scale_scales[i / kNf4ScaleBlockSize],
                          t.scale_offset);
  }
  return out;
}

void DequantizeNf4(const Nf4Tensor& t, float* out) {
  const std::vector<float> scales = Nf4BlockScales(t);
  for (int64_t i = 0; i < t.numel; ++i) {
    const uint8_t byte = t.packed[i / 2];
    const uint8_t q = (i % 2 == 0) ? byte >> 4 : byte & 0xF;
    out[i] = kNf4[q] * scales[i / kNf4BlockSize];
  }
}

void DequantizeNf4ToBf16(const Nf4Tensor& t, uint16_t* out) {
  std::vector<float> x(t.numel);
  DequantizeNf4(t, x.data());
  Fp32ToBf16(x.data(), out, t.numel);
}

int64_t Nf4Bytes(int64_t n) {
  const int64_t blocks = (n + kNf4BlockSize - 1) / kNf4BlockSize;
  const int64_t groups = (blocks + kNf4ScaleBlockSize - 1) / kNf4ScaleBlockSize;
  return (n + 1) / 2 + blocks + 4 * groups + 4;
}

Nf4BlobLayout MakeNf4BlobLayout(int64_t n) {
  Nf4BlobLayout l;
  l.numel = n;
  l.blocks = (n + kNf4BlockSize - 1) / kNf4BlockSize;
  l.groups = (l.blocks + kNf4ScaleBlockSize - 1) / kNf4ScaleBlockSize;
  l.scales = 4;
  l.codes = l.scales + 4 * l.groups;
  l.packed = l.codes + l.blocks;
  l.bytes = l.packed + (n + 1) / 2;
  return l;
}

void WriteNf4Blob(const Nf4Tensor& t, void* out) {
  const Nf4BlobLayout l = MakeNf4BlobLayout(t.numel);
  auto* b = static_cast<uint8_t*>(out);
  std::memcpy(b, &t.scale_offset, 4);
  std::memcpy(b + l.scales, t.scale_scales.data(), 4 * t.scale_scales.size());
  std::memcpy(b + l.codes, t.scale_codes.data(), t.scale_codes.size());
  std::memcpy(b + l.packed, t.packed.data(), t.packed.size());
}

Nf4Tensor ReadNf4Blob(const void* blob, int64_t n) {
  const Nf4BlobLayout l = MakeNf4BlobLayout(n);
  const auto* b = static_cast<const uint8_t*>(blob);
  Nf4Tensor t;
  t.numel = n;
  std::memcpy(&t.scale_offset, b, 4);
  t.scale_scales.resize(l.groups);
  std::memcpy(t.scale_scales.data(), b + l.scales, 4 * l.groups);
  t.scale_codes.assign(b + l.codes, b + l.codes + l.blocks);
  t.packed.assign(b + l.packed, b + l.bytes);
  return t;
}

}  // namespace mobius::numeric
