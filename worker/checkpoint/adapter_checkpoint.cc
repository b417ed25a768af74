#include "worker/checkpoint/adapter_checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/checkpoint/tensor_files.h"

namespace mobius::checkpoint {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// An adapter's tensors are small: one file each, never sharded.
constexpr int64_t kNoShards = INT64_MAX;

absl::Status CheckPeftConfig(const std::string& path, int64_t rank,
                             const std::vector<std::string>& targets) {
  MOBIUS_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, int64_t{1} << 20));
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  if (!j.contains("peft_type") || j["peft_type"] != "LORA") {
    return bad("peft_type must be \"LORA\" (only LoRA adapters are supported)");
  }
  if (!j.contains("r") || !j["r"].is_number_integer() || j["r"].get<int64_t>() != rank) {
    return bad(absl::StrCat("r must be ", rank, ", the run's adapter rank (got ",
                            j.contains("r") ? j["r"].dump() : "none", ")"));
  }
  if (!j.contains("target_modules") || !j["target_modules"].is_array()) {
    return bad("target_modules must be a list of module names (a regular expression is not "
               "supported: name the modules)");
  }
  std::vector<std::string> have;
  for (const Json& t : j["target_modules"]) {
    if (!t.is_string()) return bad("target_modules must be strings");
    have.push_back(t.get<std::string>());
  }
  std::vector<std::string> want = targets;
  std::sort(have.begin(), have.end());
  std::sort(want.begin(), want.end());
  if (have != want) {
    return bad(absl::StrCat("target_modules [", absl::StrJoin(have, ", "),
                            "] differ from the run's [", absl::StrJoin(want, ", "), "]"));
  }
  return absl::OkStatus();
}

}  // namespace

TensorShapes AdapterShapes(const std::vector<model::LoraModule>& modules, int64_t rank) {
  TensorShapes shapes;
  for (const model::LoraModule& m : modules) {
    shapes.push_back({m.a_name(), {rank, m.in}});
    shapes.push_back({m.b_name(), {m.out, rank}});
  }
  return shapes;
}

std::string PeftAdapterConfigJson(const AdapterInfo& info) {
  Json j = {{"alpha_pattern", Json::object()},
            {"auto_mapping", nullptr},
            {"base_model_name_or_path", info.base_model},
            {"bias", "none"},
            {"fan_in_fan_out", info.fan_in_fan_out},
            {"inference_mode", true},
            {"init_lora_weights", true},
            {"layer_replication", nullptr},
            {"layers_pattern", nullptr},
            {"layers_to_transform", nullptr},
            {"loftq_config", Json::object()},
            {"lora_alpha", info.alpha},
            {"lora_dropout", info.dropout},
            {"megatron_config", nullptr},
            {"megatron_core", "megatron.core"},
            {"modules_to_save", nullptr},
            {"peft_type", "LORA"},
            {"r", info.rank},
            {"rank_pattern", Json::object()},
            {"revision", nullptr},
            {"target_modules", info.target_modules},
            {"task_type", "CAUSAL_LM"},
            {"use_dora", false},
            {"use_rslora", false}};
  return j.dump(2) + "\n";
}

absl::StatusOr<reference::Parameters> ReadPeftAdapter(const std::string& dir, int64_t rank,
                                                      const std::vector<std::string>& targets,
                                                      const TensorShapes& shapes,
                                                      const std::set<std::string>* only) {
  MOBIUS_RETURN_IF_ERROR(CheckPeftConfig(dir + "/adapter_config.json", rank, targets));
  return ReadTensorSet(dir, "adapter_model", shapes, std::nullopt, only);
}

absl::StatusOr<std::string> SaveAdapterCheckpoint(const std::string& root,
                                                  const AdapterInfo& info,
                                                  const TensorShapes& shapes,
                                                  const AdapterTensors& tensors,
                                                  const TrainingState& state,
                                                  const std::vector<std::string>& copy_files,
                                                  int keep_last) {
  if (tensors.master == nullptr) {
    return absl::InvalidArgumentError("adapter checkpoint: the adapters are required");
  }
  const bool moments = tensors.adam_m != nullptr && !tensors.adam_m->tensors.empty();
  const std::string tag = absl::StrCat(getpid());
  const std::string tmp = PartialCheckpointDir(root, state.step, tag);
  absl::Status written = [&]() -> absl::Status {
    std::error_code ec;
    fs::create_directories(root, ec);
    fs::remove_all(tmp, ec);
    if (!fs::create_directory(tmp, ec) || ec) {
      return absl::PermissionDeniedError(absl::StrCat("cannot create ", tmp, ": ", ec.message()));
    }
    MOBIUS_RETURN_IF_ERROR(
        WriteFileAtomically(tmp + "/adapter_config.json", PeftAdapterConfigJson(info)));
    MOBIUS_RETURN_IF_ERROR(WriteTensorSet(tmp, "adapter_model", *tensors.master, shapes,
                                          io::DType::kF32, kNoShards)
                               .status());
    if (moments) {
      MOBIUS_RETURN_IF_ERROR(WriteTensorSet(tmp, "optimizer_m", *tensors.adam_m, shapes,
                                            io::DType::kF32, kNoShards)
                                 .status());
      MOBIUS_RETURN_IF_ERROR(WriteTensorSet(tmp, "optimizer_v", *tensors.adam_v, shapes,
                                            io::DType::kF32, kNoShards)
                                 .status());
    }
    return absl::OkStatus();
  }();
  if (!written.ok()) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    return written;
  }
  std::map<std::string, std::string> extra = {{"adapter", "lora"}};
  if (!info.base_quantization.empty()) extra["base_quantization"] = info.base_quantization;
  return SealCheckpoint(root, tag, state, io::DType::kF32, moments, copy_files, keep_last, extra);
}

absl::StatusOr<LoadedAdapterCheckpoint> LoadAdapterCheckpoint(
    const std::string& dir, int64_t rank, const std::vector<std::string>& targets,
    const TensorShapes& shapes, const std::set<std::string>* only) {
  std::error_code ec;
  if (!fs::exists(dir + "/DONE", ec)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, ": incomplete checkpoint (no DONE)"));
  }
  std::string adapter;
  LoadedAdapterCheckpoint out;
  MOBIUS_ASSIGN_OR_RETURN(out.state, ReadTrainingState(dir, &adapter));
  if (adapter != "lora" || !fs::exists(dir + "/adapter_model.safetensors", ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": not an adapter run's checkpoint (a full fine-tuning run wrote it)"));
  }
  MOBIUS_RETURN_IF_ERROR(VerifyCheckpointChecksums(dir, 0, 1));
  MOBIUS_ASSIGN_OR_RETURN(out.master, ReadPeftAdapter(dir, rank, targets, shapes, only));
  if (fs::exists(dir + "/optimizer_m.safetensors", ec)) {
    MOBIUS_ASSIGN_OR_RETURN(out.adam_m,
                            ReadTensorSet(dir, "optimizer_m", shapes, io::DType::kF32, only));
    MOBIUS_ASSIGN_OR_RETURN(out.adam_v,
                            ReadTensorSet(dir, "optimizer_v", shapes, io::DType::kF32, only));
  }
  return out;
}

}  // namespace mobius::checkpoint
