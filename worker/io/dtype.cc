// DType helpers and the exact widening conversions to fp32.
#include <cstdint>
#include <cstring>
#include <optional>

#include "absl/strings/string_view.h"
#include "worker/io/safetensors.h"
#include "worker/io/safetensors_internal.h"

namespace mobius::io {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// bf16 is the top half of an fp32, so widening is a shift (NaN payloads and signs survive).
float BFloat16ToFloat(uint16_t h) { return FromBits(uint32_t{h} << 16); }

// IEEE binary16 -> binary32, exact for every input: subnormal halves become normal floats, inf
// stays inf, NaN keeps its sign and payload (the quiet bit moves with the mantissa).
float HalfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return FromBits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return FromBits(sign);
    // Subnormal: normalise so that the implicit leading 1 is bit 10.
    exponent = 1;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    mantissa &= 0x3ffu;
  }
  // exponent may be <= 0 here for subnormals; the rebias (127 - 15) keeps it positive.
  return FromBits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// A template, not a function pointer, so that the conversion inlines and the bf16 loop (a shift)
// vectorises: loading a model widens every weight once.
template <typename Convert>
void Widen(const uint8_t* in, int64_t n, float* out, Convert convert) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, sizeof h);  // unaligned-safe; files are little-endian like us
    out[i] = convert(h);
  }
}

}  // namespace

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kU8:
      return 1;
  }
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kU8:
      return "U8";
  }
  return "?";
}

int64_t TensorView::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void CopyToF32(const TensorView& tensor, float* out) {
  const int64_t n = tensor.num_elements();
  const auto* in = static_cast<const uint8_t*>(tensor.data);
  if (n == 0) return;
  switch (tensor.dtype) {
    case DType::kF32:
      std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kBF16:
      Widen(in, n, out, [](uint16_t h) { return BFloat16ToFloat(h); });
      return;
    case DType::kF16:
      Widen(in, n, out, [](uint16_t h) { return HalfToFloat(h); });
      return;
    case DType::kU8:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
      return;
  }
}

namespace internal {

std::optional<DType> DTypeFromName(absl::string_view name) {
  if (name == "F32") return DType::kF32;
  if (name == "BF16") return DType::kBF16;
  if (name == "F16") return DType::kF16;
  if (name == "U8") return DType::kU8;
  return std::nullopt;
}

}  // namespace internal
}  // namespace mobius::io
