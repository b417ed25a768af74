#include "worker/checkpoint/mxfp4.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace mobius::checkpoint {

void Mxfp4Tensor::Dequantize(int64_t e, int64_t begin, int64_t n, float* dst) const {
  if (n <= 0) return;
  const int64_t groups = in / 32;
  const auto* b = static_cast<const uint8_t*>(blocks->data) + e * out * groups * 16;
  const auto* s = static_cast<const uint8_t*>(scales->data) + e * out * groups;
  const int64_t end = begin + n;
  const int64_t row0 = begin / out, row1 = (end - 1) / out;  // input rows [row0, row1]
  for (int64_t g = row0 / 32; g <= row1 / 32; ++g) {
    const int64_t i_lo = std::max(row0, g * 32), i_hi = std::min(row1, g * 32 + 31);
    for (int64_t o = 0; o < out; ++o) {
      const float scale = std::ldexp(1.0f, static_cast<int>(s[o * groups + g]) - 127);
      const uint8_t* bytes = b + (o * groups + g) * 16;
      for (int64_t i = i_lo; i <= i_hi; ++i) {
        const int64_t p = i * out + o;
        if (p < begin || p >= end) continue;
        const int j = static_cast<int>(i - g * 32);
        const uint8_t byte = bytes[j / 2];
        dst[p - begin] = kFp4Values[j % 2 == 0 ? byte & 0x0F : byte >> 4] * scale;
      }
    }
  }
}

absl::StatusOr<std::optional<Mxfp4Tensor>> FindMxfp4(const FindTensor& find,
                                                     const std::string& name,
                                                     const std::vector<int64_t>& shape,
                                                     const std::string& source) {
  MOBIUS_ASSIGN_OR_RETURN(const io::TensorView* blocks, find(name + "_blocks"));
  if (blocks == nullptr) return std::optional<Mxfp4Tensor>();
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": MXFP4 tensor ", name, ": ", what));
  };
  MOBIUS_ASSIGN_OR_RETURN(const io::TensorView* scales, find(name + "_scales"));
  if (scales == nullptr) return bad(absl::StrCat("missing ", name, "_scales"));
  if (shape.size() != 3 || shape[1] % 32 != 0) {
    return bad(absl::StrCat("the model's tensor [", absl::StrJoin(shape, ", "),
                            "] is not [experts, in, out] with in a multiple of 32"));
  }
  Mxfp4Tensor t{.name = name, .experts = shape[0], .in = shape[1], .out = shape[2],
                .blocks = blocks, .scales = scales};
  const std::vector<int64_t> want_blocks = {t.experts, t.out, t.in / 32, 16};
  const std::vector<int64_t> want_scales = {t.experts, t.out, t.in / 32};
  if (blocks->dtype != io::DType::kU8 || blocks->shape != want_blocks) {
    return bad(absl::StrCat("_blocks is ", io::DTypeName(blocks->dtype), " [",
                            absl::StrJoin(blocks->shape, ", "), "], want U8 [",
                            absl::StrJoin(want_blocks, ", "), "]"));
  }
  if (scales->dtype != io::DType::kU8 || scales->shape != want_scales) {
    return bad(absl::StrCat("_scales is ", io::DTypeName(scales->dtype), " [",
                            absl::StrJoin(scales->shape, ", "), "], want U8 [",
                            absl::StrJoin(want_scales, ", "), "]"));
  }
  return std::optional<Mxfp4Tensor>(std::move(t));
}

}  // namespace mobius::checkpoint
