#include "worker/checkpoint/adapter_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/checkpoint/tensor_files.h"

namespace mobius::checkpoint {
namespace {

using Json = nlohmann::json;

// A value that is absent, null, false, empty ({} / [] / "") or "none": the key does not change the
// merge.
bool Unset(const Json& j, const char* key) {
  if (!j.contains(key)) return true;
  const Json& v = j[key];
  return v.is_null() || (v.is_boolean() && !v.get<bool>()) ||
         ((v.is_object() || v.is_array() || v.is_string()) && v.empty()) ||
         (v.is_string() && v.get<std::string>().empty());
}

}  // namespace

double LoraAdapterConfig::scaling() const {
  return use_rslora ? lora_alpha / std::sqrt(static_cast<double>(r))
                    : lora_alpha / static_cast<double>(r);
}

absl::StatusOr<LoraAdapterConfig> ParseLoraAdapterConfig(absl::string_view json_text,
                                                         absl::string_view origin) {
  const Json j = Json::parse(json_text.begin(), json_text.end(), nullptr,
                             /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": not a JSON object"));
  }
  auto field_error = [&](absl::string_view key, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": field \"", key, "\": ", what));
  };
  auto bool_field = [&](const char* key, bool* out) -> absl::Status {
    if (!j.contains(key) || j[key].is_null()) return absl::OkStatus();
    if (!j[key].is_boolean()) return field_error(key, "must be true or false");
    *out = j[key].get<bool>();
    return absl::OkStatus();
  };

  if (!j.contains("peft_type") || !j["peft_type"].is_string()) {
    return field_error("peft_type", "missing (a LoRA adapter has \"LORA\")");
  }
  if (const std::string type = j["peft_type"].get<std::string>(); type != "LORA") {
    return field_error("peft_type", absl::StrCat("\"", type,
                                                 "\" is not a LoRA adapter (only \"LORA\" adapters "
                                                 "can be merged)"));
  }
  LoraAdapterConfig c;
  if (!j.contains("r") || !j["r"].is_number_integer() || j["r"].get<int64_t>() < 1) {
    return field_error("r", "must be an integer >= 1");
  }
  c.r = j["r"].get<int64_t>();
  if (!j.contains("lora_alpha") || !j["lora_alpha"].is_number() ||
      !std::isfinite(j["lora_alpha"].get<double>())) {
    return field_error("lora_alpha", "must be a number");
  }
  c.lora_alpha = j["lora_alpha"].get<double>();
  MOBIUS_RETURN_IF_ERROR(bool_field("use_rslora", &c.use_rslora));
  MOBIUS_RETURN_IF_ERROR(bool_field("fan_in_fan_out", &c.fan_in_fan_out));

  if (!j.contains("target_modules") || j["target_modules"].is_null()) {
    return field_error("target_modules", "missing (a list of module names, e.g. [\"q_proj\"])");
  }
  const Json& targets = j["target_modules"];
  if (targets.is_string()) {
    return field_error("target_modules",
                       absl::StrCat("a regular expression (\"", targets.get<std::string>(),
                                    "\") is not supported: list the module names instead, e.g. "
                                    "[\"q_proj\", \"v_proj\"]"));
  }
  if (!targets.is_array()) return field_error("target_modules", "must be a list of module names");
  for (size_t i = 0; i < targets.size(); ++i) {
    if (!targets[i].is_string()) {
      return field_error(absl::StrCat("target_modules[", i, "]"), "must be a module name");
    }
    c.target_modules.push_back(targets[i].get<std::string>());
  }

  for (const char* key : {"use_dora", "rank_pattern", "alpha_pattern", "layers_to_transform",
                          "modules_to_save", "exclude_modules"}) {
    if (!Unset(j, key)) {
      return field_error(key, absl::StrCat("is set (", j[key].dump(),
                                           "); merging such an adapter is not supported"));
    }
  }
  if (j.contains("bias") && !j["bias"].is_null() &&
      !(j["bias"].is_string() && j["bias"].get<std::string>() == "none")) {
    return field_error("bias",
                       absl::StrCat("is ", j["bias"].dump(),
                                    "; only adapters without bias tensors (\"none\") can be "
                                    "merged"));
  }
  if (j.contains("base_model_name_or_path") && !j["base_model_name_or_path"].is_null()) {
    if (!j["base_model_name_or_path"].is_string()) {
      return field_error("base_model_name_or_path", "must be a string");
    }
    c.base_model_name_or_path = j["base_model_name_or_path"].get<std::string>();
  }
  return c;
}

absl::StatusOr<LoraAdapterConfig> LoadLoraAdapterConfig(const std::string& adapter_dir) {
  const std::string path = adapter_dir + "/" + kAdapterConfigFile;
  MOBIUS_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, int64_t{1} << 20));
  return ParseLoraAdapterConfig(text, path);
}

}  // namespace mobius::checkpoint
