// QLoRA's 4-bit NormalFloat (NF4) with double-quantised block scales, bit for bit as
// bitsandbytes stores a 4-bit weight (Dettmers et al. 2023, "QLoRA"; bitsandbytes'
// quantize_4bit(quant_type="nf4", blocksize=64, compress_statistics=True)):
//
//   - blocks of 64 values; a block's scale is absmax = max |x|;
//   - each value x / absmax (clamped to [-1, 1]) becomes the index of the nearest of the 16 NF4
//     levels (Nf4Code(); a value exactly between two levels takes the lower one, as bitsandbytes'
//     bucketize does); two codes per byte, the first value in the high nibble;
//   - the block scales are themselves quantised: offset = their mean (fp32), then each
//     (absmax - offset) in blocks of 256 scales: an 8-bit index into bitsandbytes' signed dynamic
//     map (DynamicCode(), the nearest entry, the lower one on a tie) and one fp32 scale (that
//     block's max |absmax - offset|) per 256;
//   - dequantising: absmax = DynamicCode()[code] * scale + offset; x = Nf4Code()[q] * absmax,
//     in fp32.
// About 0.516 bytes per value (4 bits, plus 1 byte per 64 and 4 bytes per 16384).
//
// Checked against bitsandbytes 0.50.2 on the CPU (test/reference/make_nf4_golden.py).
// Thread-safety: pure functions.
#ifndef MOBIUS_COMMON_NUMERIC_NF4_H_
#define MOBIUS_COMMON_NUMERIC_NF4_H_

#include <array>
#include <cstdint>
#include <vector>

namespace mobius::numeric {

inline constexpr int64_t kNf4BlockSize = 64;
inline constexpr int64_t kNf4ScaleBlockSize = 256;

// The 16 NF4 levels, ascending, from -1 to 1 (bitsandbytes' table; QLoRA's normal quantiles).
const std::array<float, 16>& Nf4Code();
// bitsandbytes' create_dynamic_map(signed=True): 256 values, ascending, -0.99297 .. 1.
const std::array<float, 256>& DynamicCode();

struct Nf4Tensor {
  int64_t numel = 0;
  std::vector<uint8_t> packed;        // (numel + 1) / 2 bytes
  std::vector<uint8_t> scale_codes;   // one per block of 64 (the last may be partial)
  std::vector<float> scale_scales;    // one per 256 scale codes (the last may be partial)
  float scale_offset = 0;             // the mean of the block absmaxes
};

// Quantises n values (the bf16 bit patterns of a weight, or fp32).
Nf4Tensor QuantizeNf4(const uint16_t* bf16, int64_t n);
Nf4Tensor QuantizeNf4(const float* x, int64_t n);

// Each block's absmax as dequantised (fp32), scale_codes.size() of them.
std::vector<float> Nf4BlockScales(const Nf4Tensor& t);

// The t.numel values in fp32, or rounded to bf16 (round to nearest even, as a torch .to()).
void DequantizeNf4(const Nf4Tensor& t, float* out);
void DequantizeNf4ToBf16(const Nf4Tensor& t, uint16_t* out);

// Bytes of the 4-bit form of n values (packed codes, scale codes and scales, the offset).
int64_t Nf4Bytes(int64_t n);

// The blob: an Nf4Tensor as one contiguous run of Nf4Bytes(n) bytes, the form the host store keeps
// and a stage upload moves (worker kernels dequantise straight from it). Starting 4-byte aligned:
//   [0, 4)               scale_offset, fp32
//   [scales, +4 G)       scale_scales, fp32, G = ceil(B / 256)
//   [codes, +B)          scale_codes, one byte per block, B = ceil(n / 64)
//   [packed, +ceil(n/2)) the 4-bit codes, two per byte, the first value in the high nibble
struct Nf4BlobLayout {
  int64_t numel = 0, blocks = 0, groups = 0;
  int64_t scales = 4, codes = 0, packed = 0, bytes = 0;  // byte offsets; bytes = Nf4Bytes(numel)
};
Nf4BlobLayout MakeNf4BlobLayout(int64_t n);
// Writes t's blob into out [Nf4Bytes(t.numel)].
void WriteNf4Blob(const Nf4Tensor& t, void* out);
// The tensor a blob of n values holds.
Nf4Tensor ReadNf4Blob(const void* blob, int64_t n);

// QuantizeNf4 straight into a blob, from values that arrive in pieces (what the store fill uses,
// one slice of a tensor at a time): Add the n values in order, every piece but the last a multiple
// of 64 values long, then Finish. The packed codes are written as pieces arrive, the scales at
// Finish (they need every block's absmax: 4 bytes per 64 values are held until then). The blob
// then equals WriteNf4Blob(QuantizeNf4(the n values)). Vectorised (AVX2 where the CPU has it,
// the same bits either way). Not thread-safe; separate quantizers may run in parallel.
class Nf4BlobQuantizer {
 public:
  Nf4BlobQuantizer(int64_t n, void* blob);  // blob: Nf4Bytes(n) bytes, written, never read
  void Add(const float* x, int64_t count);
  void Finish();

 private:
  Nf4BlobLayout layout_;
  uint8_t* blob_;
  std::vector<float> absmax_;
  int64_t done_ = 0;
};

// One value of a blob, dequantised to fp32 exactly as DequantizeNf4 computes it (scale code
// times its group's scale, plus the offset, then the level times that): the expression every
// kernel evaluates, in this order, without fused multiply-adds.
inline float Nf4BlobScale(float dynamic_code, float group_scale, float offset) {
  const float scaled = dynamic_code * group_scale;
  return scaled + offset;
}

}  // namespace mobius::numeric

#endif  // MOBIUS_COMMON_NUMERIC_NF4_H_
