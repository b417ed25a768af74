// LoRA adapters on disk in Hugging Face PEFT's format, and the checkpoints of an adapter run.
//
// A PEFT adapter directory (what peft's save_pretrained writes and PeftModel.from_pretrained
// loads): adapter_config.json (peft_type "LORA", r, lora_alpha, lora_dropout, target_modules,
// fan_in_fan_out, base_model_name_or_path, ... exactly the keys PEFT 0.10 writes: it refuses
// unknown ones) and adapter_model.safetensors (fp32, PEFT's tensor names, model/lora.h).
//
// An adapter run's checkpoint ROOT/checkpoint-<step>/ is such a directory plus the resume state:
//   adapter_config.json, adapter_model.safetensors   the adapters after `step` steps (fp32: also
//                                                    the optimizer's master copy)
//   optimizer_m.safetensors, optimizer_v.safetensors Adam moments, PEFT names (after step 1)
//   trainer_state.json                               checkpoint.h's, with "adapter": "lora"
//                                                    (and "base_quantization": "nf4" over an
//                                                    NF4 base)
//   tokenizer files, DONE                            as checkpoint.h's
// The base model is not copied: the checkpoint names it (base_model_name_or_path, absolute), and
// `mobius export --merge` writes base + adapter as one Hugging Face model. Atomic, pruned and found
// (LatestCheckpoint) like a full checkpoint; nothing depends on the GPU count.
//
// Thread-safety: independent functions; one writer per root at a time.
#ifndef MOBIUS_WORKER_CHECKPOINT_ADAPTER_CHECKPOINT_H_
#define MOBIUS_WORKER_CHECKPOINT_ADAPTER_CHECKPOINT_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/lora.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/reference/parameters.h"

namespace mobius::checkpoint {

struct AdapterInfo {
  int64_t rank = 0;
  double alpha = 0;
  double dropout = 0;
  std::vector<std::string> target_modules;
  std::string base_model;    // base_model_name_or_path: the base model directory
  bool fan_in_fan_out = false;  // Conv1D base weights (GPT-2)
  // "" or "nf4": the frozen base the adapters were trained over (adapter.base_quantization).
  // Not in adapter_config.json (PEFT refuses unknown keys): trainer_state.json's
  // "base_quantization", which `mobius generate --adapter` reads to run over the same base.
  std::string base_quantization;
};

// The tensors of the adapters of `modules` in order: A [rank, in], B [out, rank] per module.
TensorShapes AdapterShapes(const std::vector<model::LoraModule>& modules, int64_t rank);

// adapter_config.json's text (PEFT 0.10's keys).
std::string PeftAdapterConfigJson(const AdapterInfo& info);

// Reads a PEFT adapter directory: its adapter_config.json must be LORA with r = `rank`,
// `target_modules` the same set (a regex string is refused: name the modules), and
// adapter_model.safetensors exactly `shapes` (F32, BF16 or F16, widened). Errors name the file
// and the field or tensor (INVALID_ARGUMENT; NOT_FOUND for a missing file). `only` (nullptr:
// all): the tensors to read (every one is still checked).
absl::StatusOr<reference::Parameters> ReadPeftAdapter(const std::string& dir, int64_t rank,
                                                      const std::vector<std::string>& targets,
                                                      const TensorShapes& shapes,
                                                      const std::set<std::string>* only = nullptr);

struct AdapterTensors {
  const reference::Parameters* master = nullptr;  // required
  const reference::Parameters* adam_m = nullptr;  // null or empty: none yet
  const reference::Parameters* adam_v = nullptr;
};

// Saves an adapter run's checkpoint (above) into `root`; `shapes` orders the tensors.
absl::StatusOr<std::string> SaveAdapterCheckpoint(const std::string& root,
                                                  const AdapterInfo& info,
                                                  const TensorShapes& shapes,
                                                  const AdapterTensors& tensors,
                                                  const TrainingState& state,
                                                  const std::vector<std::string>& copy_files,
                                                  int keep_last);

struct LoadedAdapterCheckpoint {
  reference::Parameters master, adam_m, adam_v;  // moments empty before step 1
  TrainingState state;
};
// Loads an adapter checkpoint, checking DONE (sizes and checksums), the adapter's rank and
// targets, and the tensors' names and shapes. FAILED_PRECONDITION without DONE or for a full
// model's checkpoint (no adapter_model.safetensors); DATA_LOSS on a checksum mismatch. `only`:
// as ReadPeftAdapter's, for the moments too.
absl::StatusOr<LoadedAdapterCheckpoint> LoadAdapterCheckpoint(
    const std::string& dir, int64_t rank, const std::vector<std::string>& targets,
    const TensorShapes& shapes, const std::set<std::string>* only = nullptr);

}  // namespace mobius::checkpoint

#endif  // MOBIUS_WORKER_CHECKPOINT_ADAPTER_CHECKPOINT_H_
