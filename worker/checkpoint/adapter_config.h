// A Hugging Face PEFT LoRA adapter's adapter_config.json, as the adapter merge reads it
// (merge_adapter.h). PEFT writes many keys; these decide the merge:
//   peft_type               must be "LORA"
//   r                       the rank (integer >= 1)
//   lora_alpha              number; scaling = lora_alpha / r, or lora_alpha / sqrt(r) when
//   use_rslora              is true (absent or null: false)
//   fan_in_fan_out          bool (absent or null: false); the merge follows the base weight's
//                           layout (Conv1D [in, out] or Linear [out, in]) as PEFT does, which
//                           corrects a wrong flag with a warning
//   target_modules          a list of module names; PEFT's other form, one string holding a regular
//                           expression, is refused (name the modules in a list)
//   base_model_name_or_path the base model's directory, when the merge is given none
// Keys that would make the merge differ from W + scaling * B A, when set, are refused rather than
// ignored: use_dora, rank_pattern, alpha_pattern, layers_to_transform, modules_to_save,
// exclude_modules, bias other than "none".
//
// Errors: INVALID_ARGUMENT "<origin>: field \"<key>\": what is wrong". Thread-safe: pure.
#ifndef MOBIUS_WORKER_CHECKPOINT_ADAPTER_CONFIG_H_
#define MOBIUS_WORKER_CHECKPOINT_ADAPTER_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mobius::checkpoint {

struct LoraAdapterConfig {
  int64_t r = 0;
  double lora_alpha = 0;
  bool use_rslora = false;
  bool fan_in_fan_out = false;
  std::vector<std::string> target_modules;
  std::string base_model_name_or_path;  // empty when absent or null

  // PEFT's scaling: lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora (computed in double,
  // as Python does; the merge multiplies fp32 by it rounded to float, as torch does).
  double scaling() const;
};

inline constexpr char kAdapterConfigFile[] = "adapter_config.json";
inline constexpr char kAdapterModelFile[] = "adapter_model.safetensors";

absl::StatusOr<LoraAdapterConfig> ParseLoraAdapterConfig(absl::string_view json_text,
                                                         absl::string_view origin);

// Reads DIR/adapter_config.json (NOT_FOUND / PERMISSION_DENIED when unreadable).
absl::StatusOr<LoraAdapterConfig> LoadLoraAdapterConfig(const std::string& adapter_dir);

}  // namespace mobius::checkpoint

#endif  // MOBIUS_WORKER_CHECKPOINT_ADAPTER_CONFIG_H_
