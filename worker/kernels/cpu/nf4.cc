#include "worker/kernels/cpu/nf4.h"

#include <algorithm>
#include <cstring>

#include "common/numeric/nf4.h"

namespace mobius::kernels::cpu {
namespace {

template <typename T>
void Dequantize(T* out, const void* blob, int64_t n, ThreadPool* pool) {
  const numeric::Nf4BlobLayout l = numeric::MakeNf4BlobLayout(n);
  const auto* b = static_cast<const uint8_t*>(blob);
  float offset;
  std::memcpy(&offset, b, 4);
  const uint8_t* codes = b + l.codes;
  const uint8_t* packed = b + l.packed;
  const std::array<float, 16>& level = numeric::Nf4Code();
  const std::array<float, 256>& dynamic = numeric::DynamicCode();
  // Pieces of whole 64-value blocks (an even count of values: a byte never straddles two).
  constexpr int64_t kBlocksPerPiece = 256;
  ParallelForRange(pool, l.blocks, kBlocksPerPiece, [&](int64_t first, int64_t last) {
    float row[numeric::kNf4BlockSize];
    for (int64_t blk = first; blk < last; ++blk) {
      float group;
      std::memcpy(&group, b + l.scales + 4 * (blk / numeric::kNf4ScaleBlockSize), 4);
      const float absmax = numeric::Nf4BlobScale(dynamic[codes[blk]], group, offset);
      const int64_t begin = blk * numeric::kNf4BlockSize;
      const int64_t count = std::min(numeric::kNf4BlockSize, n - begin);
      for (int64_t i = 0; i < count; ++i) {
        const uint8_t byte = packed[(begin + i) / 2];
        row[i] = level[(i % 2 == 0) ? byte >> 4 : byte & 0xF] * absmax;
      }
      StoreRow(out + begin, row, count);
    }
  });
}

}  // namespace

void dequantize_nf4(uint16_t* out, const void* blob, int64_t n, ThreadPool* pool) {
  Dequantize(out, blob, n, pool);
}

void dequantize_nf4(F16* out, const void* blob, int64_t n, ThreadPool* pool) {
  Dequantize(out, blob, n, pool);
}

}  // namespace mobius::kernels::cpu
