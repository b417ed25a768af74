// gpt-oss's MXFP4 expert weights in a Hugging Face checkpoint (config.json's quantization_config
// quant_method "mxfp4", as OpenAI released gpt-oss), read directly and dequantised at load.
//
// A fused expert tensor NAME of shape [E, in, out] (model::FusedExpertTensors: gate_up_proj
// [E, C, 2I], down_proj [E, I, C]) is stored as
//   NAME_blocks  U8 [E, out, in / 32, 16]: per (expert, output row, group of 32 inputs) 16 bytes,
//                two FP4 (e2m1) codes per byte, the even input in the low nibble
//   NAME_scales  U8 [E, out, in / 32]: the group's power-of-two scale, biased by 127 (e8m0)
// A value is kFp4Values[code] x 2^(scale - 127), exactly (transformers' convert_moe_packed_tensors,
// which then transposes [E, out, in] to the [E, in, out] the model reads). Its bias (NAME_bias) is
// a plain tensor.
//
// Thread-safety: immutable; its views live as long as the files that hold them.
#ifndef MOBIUS_WORKER_CHECKPOINT_MXFP4_H_
#define MOBIUS_WORKER_CHECKPOINT_MXFP4_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/checkpoint/bnb4bit.h"
#include "worker/io/safetensors.h"

namespace mobius::checkpoint {

inline constexpr std::array<float, 16> kFp4Values = {
    +0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

struct Mxfp4Tensor {
  std::string name;                // the fused tensor's (without _blocks / _scales)
  int64_t experts = 0, in = 0, out = 0;
  const io::TensorView* blocks = nullptr;
  const io::TensorView* scales = nullptr;

  // Elements [begin, begin + n) of expert `e`'s [in, out] matrix (row-major, the model's layout)
  // into dst [n], fp32. Decodes a group of 32 inputs of an output row at a time (16 bytes read in
  // order), so a range of whole rows costs one pass over its groups.
  void Dequantize(int64_t e, int64_t begin, int64_t n, float* dst) const;
};

// NAME stored as MXFP4: nullopt when the checkpoint has no NAME_blocks (a plain tensor).
// INVALID_ARGUMENT naming `source` for a malformed one: a missing NAME_scales, dtypes other than
// U8, shapes other than [E, out, in / 32, 16] and [E, out, in / 32] for `shape` [E, in, out], or
// `in` not a multiple of 32.
absl::StatusOr<std::optional<Mxfp4Tensor>> FindMxfp4(const FindTensor& find,
                                                     const std::string& name,
                                                     const std::vector<int64_t>& shape,
                                                     const std::string& source);

}  // namespace mobius::checkpoint

#endif  // MOBIUS_WORKER_CHECKPOINT_MXFP4_H_
