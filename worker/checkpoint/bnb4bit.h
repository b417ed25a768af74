// bitsandbytes 4-bit weights in a Hugging Face checkpoint, read directly (QLoRA checkpoints: a
// model loaded with BitsAndBytesConfig(load_in_4bit=True) and saved by transformers'
// save_pretrained; config.json's "quantization_config" names quant_method "bitsandbytes").
//
// bitsandbytes (Linear4bit._save_to_state_dict, QuantState.as_dict(packed=True)) stores a weight
// NAME (e.g. model.layers.0.self_attn.q_proj.weight) as these tensors:
//   NAME                                U8 [ceil(n / 2), 1]: the 4-bit codes, two per byte, the
//                                       first value in the high nibble
//   NAME.absmax                         the block scales: F32 [blocks], or, double-quantised
//                                       ("nested"), U8 [blocks] codes into the nested quant map
//   NAME.quant_map                      F32 [16]: the code's values (NF4's or FP4's table)
//   NAME.nested_absmax                  F32 [ceil(blocks / nested_blocksize)] (nested only)
//   NAME.nested_quant_map               F32 [256]: the signed dynamic map (nested only)
//   NAME.quant_state.bitsandbytes__nf4  U8: UTF-8 JSON {"quant_type", "blocksize", "dtype",
//   (or __fp4)                          "shape", and nested: "nested_blocksize", "nested_dtype",
//                                       "nested_offset"}
// A value is quant_map[code] x its block's scale, in fp32; a nested block scale is
// nested_quant_map[absmax code] x nested_absmax[its group] + nested_offset (the order
// numeric::Nf4BlobScale evaluates). bitsandbytes' dequantize_4bit rounds that to the weight's
// dtype; so does every reader here (the store's bf16, the trainer's round to nearest even).
//
// QLoRA's own configuration (nf4, blocksize 64, nested in blocks of 256, the tables equal to
// numeric::Nf4Code and DynamicCode) is exactly common/numeric/nf4.h's tensor: AsNf4 hands it over
// without requantising, so an NF4 run keeps the checkpoint's codes and scales bit for bit.
//
// Thread-safety: a Bnb4bitWeight is immutable; its views live as long as the files that hold them.
#ifndef MOBIUS_WORKER_CHECKPOINT_BNB4BIT_H_
#define MOBIUS_WORKER_CHECKPOINT_BNB4BIT_H_

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/numeric/nf4.h"
#include "worker/io/safetensors.h"

namespace mobius::checkpoint {

struct Bnb4bitWeight {
  std::string name;
  std::string quant_type;        // "nf4" or "fp4"
  std::string dtype;             // the dtype the file says the weight was ("bfloat16", ...)
  std::vector<int64_t> shape;    // the weight's
  int64_t numel = 0;
  int64_t blocksize = 0;
  int64_t blocks = 0;            // ceil(numel / blocksize)
  std::array<float, 16> quant_map{};
  const io::TensorView* packed = nullptr;  // U8, ceil(numel / 2) bytes
  const io::TensorView* absmax = nullptr;  // F32 [blocks], or U8 [blocks] when nested
  bool nested = false;
  int64_t nested_blocksize = 0;
  const io::TensorView* nested_absmax = nullptr;  // F32 [ceil(blocks / nested_blocksize)]
  std::array<float, 256> nested_quant_map{};
  float nested_offset = 0;

  // Block `b`'s scale in fp32.
  float BlockScale(int64_t block) const;
  // Elements [begin, begin + n) dequantised to fp32 into out [n].
  void Dequantize(int64_t begin, int64_t n, float* out) const;
  // The weight as common/numeric/nf4.h's tensor when it is QLoRA's exact configuration (above);
  // nullopt otherwise (FP4, another block size, no double quantisation, other tables).
  std::optional<numeric::Nf4Tensor> AsNf4() const;
};

// Whether `name` is one of the tensors bitsandbytes stores beside a 4-bit weight (its absmax,
// quant map, nested ones, quant state), which model loaders must not take for model tensors.
bool IsBnb4bitCompanion(absl::string_view name);

// The tensors of a checkpoint by name (nullptr: absent), over however many files hold them.
using FindTensor = std::function<absl::StatusOr<const io::TensorView*>(const std::string&)>;

// `name` as a bitsandbytes 4-bit weight: nullopt when the checkpoint holds no quant state for it
// (a plain tensor). INVALID_ARGUMENT naming `source` and the tensor for one that is malformed: a
// missing or misshapen companion, wrong dtypes, JSON that does not parse or lacks a field, a
// shape other than `expected_shape`, a block size that is not a positive power of two, a
// quant_type other than nf4 / fp4, packed storage other than U8 bytes.
absl::StatusOr<std::optional<Bnb4bitWeight>> FindBnb4bit(const FindTensor& find,
                                                         const std::string& name,
                                                         const std::vector<int64_t>& expected_shape,
                                                         const std::string& source);

}  // namespace mobius::checkpoint

#endif  // MOBIUS_WORKER_CHECKPOINT_BNB4BIT_H_
