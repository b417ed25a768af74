// Merging a PEFT LoRA adapter into its base model: a Hugging Face model directory that loads
// without PEFT (what PEFT's merge_and_unload + save_pretrained give).
//
// Inputs: ADAPTER/adapter_config.json (adapter_config.h), ADAPTER/adapter_model.safetensors
// (PEFT's names, model::LoraModule::a_name()/b_name(): lora_A [r, in], lora_B [out, r], any dtype
// the reader knows), and the base directory (config.json + model.safetensors, or shards + index;
// F32/BF16/F16). For every module of target_modules (model::LoraModules):
//   nn.Linear base W [out, in]:  W' = W + scaling * (B A)
//   Conv1D base W [in, out]:     W' = W + scaling * (B A)^T          (GPT-2; PEFT's fan_in_fan_out)
// in fp32 as PEFT computes it (the product summed over r in order, times the scaling, then added to
// W widened to fp32), then stored in the output dtype (bf16 and fp16 round to nearest even). Every
// other tensor is copied: bit for bit when its dtype does not change.
//
// A bitsandbytes 4-bit base (bnb4bit.h; a QLoRA checkpoint) is merged into its dequantised
// weights (bitsandbytes' dequantize_4bit: rounded to the dtype its quant state names, bf16 or fp16): those are written 16-bit (bf16 unless dtype says fp32; its absmax, quant maps and quant
// states are not written) and config.json loses its quantization_config; a warning says so. An
// adapter trained over an NF4 base (its checkpoint's trainer_state.json: "base_quantization":
// "nf4") merged into a 16-bit base merges into that base's NF4 rounding: each linear of
// units::Nf4BaseWeights quantised from its bf16 values and dequantised, as training saw it; a
// warning says so.
//
// Output: OUT/config.json (the base's, verbatim), the model (tensor_set_writer.h:
// model.safetensors, or model-0000i-of-0000N.safetensors + index beyond max_shard_bytes, shards cut
// in name order), generation_config.json when the base has one, and the tokenizer files
// (checkpoint_writer.h's TokenizerFiles) of the adapter directory when it has any, else the base's.
// Assembled in OUT's parent as OUT.tmp-<pid>, every file fsynced, then renamed into place; OUT may
// exist only as an empty directory.
//
// Memory: tensor by tensor. Inputs are memory-mapped and their pages dropped from this process
// once read (io::Release); unchanged tensors are written in 64 MiB pieces (converted in 4 MiB fp32
// slices when the dtype changes); an adapted weight is widened whole to fp32. Peak extra memory:
// the largest adapted weight in fp32 + one row of B A + the adapter's two matrices of one module.
//
// Errors name the file and the tensor: INVALID_ARGUMENT for a bad adapter_config.json, an adapter
// tensor that matches no module, a module with neither or only one of lora_A / lora_B, a rank
// other than r, shapes that do not fit the base, a missing base weight, a bad --dtype; NOT_FOUND
// for a missing adapter or base; ALREADY_EXISTS for an OUT that exists and is not an empty
// directory; I/O errors with errno's code.
//
// Thread-compatible (one merge per output directory).
#ifndef MOBIUS_WORKER_CHECKPOINT_MERGE_ADAPTER_H_
#define MOBIUS_WORKER_CHECKPOINT_MERGE_ADAPTER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/checkpoint/tensor_files.h"
#include "worker/io/safetensors.h"

namespace mobius::checkpoint {

struct MergeAdapterOptions {
  std::string adapter_dir;
  std::string out_dir;
  std::string base_dir;            // empty: adapter_config.json's base_model_name_or_path
  std::optional<io::DType> dtype;  // kF32 or kBF16; nullopt ("auto"): each tensor's as stored
  int64_t max_shard_bytes = kDefaultMaxShardBytes;
};

struct MergeAdapterSummary {
  std::string base_dir;        // the base used
  int64_t tensors = 0;         // written
  int64_t merged_modules = 0;  // adapted weights
  double scaling = 0;
  std::vector<std::string> files;     // every file of OUT, relative
  uint64_t largest_buffer_bytes = 0;  // the largest fp32 scratch buffer held at once
  std::vector<std::string> warnings;  // e.g. a fan_in_fan_out that did not fit the base
};

// "bf16" | "fp32" | "auto" -> MergeAdapterOptions::dtype. INVALID_ARGUMENT otherwise.
absl::StatusOr<std::optional<io::DType>> ParseMergeDType(const std::string& name);

absl::StatusOr<MergeAdapterSummary> MergeAdapter(const MergeAdapterOptions& options);

}  // namespace mobius::checkpoint

#endif  // MOBIUS_WORKER_CHECKPOINT_MERGE_ADAPTER_H_
