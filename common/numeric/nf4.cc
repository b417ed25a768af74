#include "common/numeric/nf4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/numeric/bf16.h"

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

// NF4: the number of midpoints strictly below v (torch.bucketize, right=False), counted without
// branches so that a block's loop vectorises.
inline uint8_t Nf4Index(float v) {
  int count = 0;
  for (int k = 0; k < 15; ++k) count += kNf4Bounds[k] < v ? 1 : 0;
  return static_cast<uint8_t>(count);
}

// The dynamic map: the largest entry <= v (the first one below it), then the right neighbour
// when it is strictly nearer (bitsandbytes' CPU blockwise quantiser).
uint8_t DynamicIndex(float v) {
  auto it = std::upper_bound(kDynamic.begin(), kDynamic.end(), v);
  int64_t idx = it == kDynamic.begin() ? 0 : (it - kDynamic.begin()) - 1;
  if (idx < 255) {
    const float left = std::fabs(v - kDynamic[idx]), right = std::fabs(v - kDynamic[idx + 1]);
    if (right < left) ++idx;
  }
  return static_cast<uint8_t>(idx);
}

Nf4Tensor Quantize(const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  Nf4Tensor t;
  t.numel = n;
  const int64_t blocks = (n + kNf4BlockSize - 1) / kNf4BlockSize;
  const int64_t full = n / kNf4BlockSize;
  std::vector<float> absmax(blocks, 0.0f);
  std::vector<uint8_t> q(n + (n % 2), 7);  // an odd tail pads with the code of 0
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kNf4BlockSize, end = std::min(n, begin + kNf4BlockSize);
    float m = 0;
    for (int64_t i = begin; i < end; ++i) m = std::max(m, std::fabs(x[i]));
    absmax[b] = m;
    const float safe = std::max(m, 1e-38f);
    if (b < full) {  // full blocks multiply by the reciprocal, the partial one divides
      const float r = 1.0f / safe;
      // Bound by bound over the block (Nf4Index's count, in an order that vectorises).
      float v[kNf4BlockSize];
      uint8_t c[kNf4BlockSize] = {};
      for (int64_t i = 0; i < kNf4BlockSize; ++i) {
        v[i] = std::clamp(x[begin + i] * r, -1.0f, 1.0f);
      }
      for (int k = 0; k < 15; ++k) {
        const float bound = kNf4Bounds[k];
        for (int64_t i = 0; i < kNf4BlockSize; ++i) c[i] += bound < v[i] ? 1 : 0;
      }
      std::memcpy(&q[begin], c, kNf4BlockSize);
    } else {
      for (int64_t i = begin; i < end; ++i) q[i] = Nf4Index(std::clamp(x[i] / safe, -1.0f, 1.0f));
    }
  }
  t.packed.resize(q.size() / 2);
  for (size_t i = 0; i < t.packed.size(); ++i) {
    t.packed[i] = static_cast<uint8_t>((q[2 * i] << 4) | q[2 * i + 1]);
  }
  // Double quantisation of the scales.
  double sum = 0;
  for (float a : absmax) sum += a;
  t.scale_offset = blocks > 0 ? static_cast<float>(sum / static_cast<double>(blocks)) : 0.0f;
  const int64_t groups = (blocks + kNf4ScaleBlockSize - 1) / kNf4ScaleBlockSize;
  t.scale_codes.resize(blocks);
  t.scale_scales.resize(groups);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t begin = g * kNf4ScaleBlockSize;
    const int64_t end = std::min(blocks, begin + kNf4ScaleBlockSize);
    float m = 0;
    for (int64_t i = begin; i < end; ++i) m = std::max(m, std::fabs(absmax[i] - t.scale_offset));
    t.scale_scales[g] = m;
    for (int64_t i = begin; i < end; ++i) {  // equal scales: all at the offset
      t.scale_codes[i] = DynamicIndex(m > 0 ? (absmax[i] - t.scale_offset) / m : 0.0f);
    }
  }
  return t;
}

}  // namespace

const std::array<float, 16>& Nf4Code() { return kNf4; }
const std::array<float, 256>& DynamicCode() { return kDynamic; }

Nf4Tensor QuantizeNf4(const float* x, int64_t n) {
  return Quantize(std::vector<float>(x, x + n));
}

Nf4Tensor QuantizeNf4(const uint16_t* bf16, int64_t n) {
  std::vector<float> x(n);
  Bf16ToFp32(bf16, x.data(), n);
  return Quantize(x);
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
