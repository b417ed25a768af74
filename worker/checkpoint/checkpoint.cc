#include "worker/checkpoint/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/escaping.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/checkpoint/model_init.h"

namespace mobius::checkpoint {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr int64_t kMaxJsonBytes = int64_t{64} << 20;



absl::StatusOr<Json> ReadJson(const std::string& path) {
  MOBIUS_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, kMaxJsonBytes));
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  return j;
}

absl::StatusOr<int64_t> IntField(const Json& j, const char* key, const std::string& path) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": field \"", key, "\" must be a non-negative integer"));
  }
  return j[key].get<int64_t>();
}

absl::StatusOr<std::string> StringField(const Json& j, const char* key, const std::string& path) {
  if (!j.contains(key) || !j[key].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": field \"", key, "\" must be a string"));
  }
  return j[key].get<std::string>();
}

struct TrainerState {
  TrainingState state;
  bool model_is_f32 = false;
  bool has_optimizer_state = false;
};

absl::StatusOr<TrainerState> ParseTrainerState(const std::string& path) {
  MOBIUS_ASSIGN_OR_RETURN(Json j, ReadJson(path));
  TrainerState t;
  MOBIUS_ASSIGN_OR_RETURN(std::string format, StringField(j, "format", path));
  MOBIUS_ASSIGN_OR_RETURN(int64_t version, IntField(j, "version", path));
  if (format != kCheckpointFormat || version != kCheckpointVersion) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a ", kCheckpointFormat, " version ",
                                                   kCheckpointVersion, " file (format \"", format,
                                                   "\", version ", version, ")"));
  }
  MOBIUS_ASSIGN_OR_RETURN(t.state.step, IntField(j, "step", path));
  MOBIUS_ASSIGN_OR_RETURN(t.state.lr_step, IntField(j, "lr_step", path));
  MOBIUS_ASSIGN_OR_RETURN(std::string rng_hex, StringField(j, "rng_state_hex", path));
  if (rng_hex.size() % 2 != 0 || !std::all_of(rng_hex.begin(), rng_hex.end(), ::isxdigit)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": field \"rng_state_hex\" is not hex"));
  }
  t.state.rng_state = absl::HexStringToBytes(rng_hex);
  MOBIUS_ASSIGN_OR_RETURN(std::string dtype, StringField(j, "model_dtype", path));
  if (dtype != "F32" && dtype != "BF16") {
    return absl::InvalidArgumentError(absl::StrCat(path, ": model_dtype \"", dtype, "\""));
  }
  t.model_is_f32 = dtype == "F32";
  if (!j.contains("has_optimizer_state") || !j["has_optimizer_state"].is_boolean() ||
      !j.contains("data_position") || !j["data_position"].is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": needs boolean \"has_optimizer_state\" and object \"data_position\""));
  }
  t.has_optimizer_state = j["has_optimizer_state"].get<bool>();
  if (j.contains("loss_scale")) {
    if (!j["loss_scale"].is_number() || !j.contains("loss_scale_good_steps") ||
        !j["loss_scale_good_steps"].is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": \"loss_scale\" must be a number with an integer \"loss_scale_good_steps\""));
    }
    t.state.loss_scale = j["loss_scale"].get<double>();
    t.state.loss_scale_good_steps = j["loss_scale_good_steps"].get<int64_t>();
  }
  for (const auto& [k, v] : j["data_position"].items()) {
    if (!v.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": data_position[\"", k, "\"] must be a string"));
    }
    t.state.data_position[k] = v.get<std::string>();
  }
  return t;
}

// Sizes of every file DONE lists; checksums of those whose position in DONE's (name-sorted) list
// is congruent to `part` mod `parts` (parts == 0: none).
absl::Status VerifyDone(const std::string& dir, int64_t step, int part, int parts) {
  const std::string path = dir + "/DONE";
  if (access(path.c_str(), F_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ": incomplete checkpoint (no DONE marker)"));
  }
  MOBIUS_ASSIGN_OR_RETURN(Json done, ReadJson(path));
  MOBIUS_ASSIGN_OR_RETURN(int64_t done_step, IntField(done, "step", path));
  if (done_step != step || !done.contains("files") || !done["files"].is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": step ", done_step, " or file list does not match trainer_state"));
  }
  int position = -1;
  for (const auto& [name, entry] : done["files"].items()) {
    ++position;
    const std::string file = dir + "/" + name;
    if (!entry.is_object() || !entry.contains("bytes") || !entry["bytes"].is_number_unsigned() ||
        !entry.contains("fnv1a64") || !entry["fnv1a64"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": bad entry for ", name));
    }
    struct stat st;
    if (name.find('/') != std::string::npos || stat(file.c_str(), &st) != 0) {
      return absl::DataLossError(absl::StrCat(file, ": listed in DONE but missing"));
    }
    const uint64_t bytes = entry["bytes"].get<uint64_t>();
    if (static_cast<uint64_t>(st.st_size) != bytes) {
      return absl::DataLossError(absl::StrCat(file, ": ", st.st_size, " bytes, DONE says ", bytes));
    }
    if (parts == 0 || position % parts != part) continue;
    MOBIUS_ASSIGN_OR_RETURN(FileDigest d, DigestFile(file));
    if (absl::StrFormat("%016x", d.fnv1a64) != entry["fnv1a64"].get<std::string>()) {
      return absl::DataLossError(absl::StrCat(file, ": checksum mismatch (corrupted file)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateMoments(const model::ModelConfig& config, const CheckpointTensors& t,
                             bool* has_optimizer_state) {
  const bool has_m = t.adam_m != nullptr && !t.adam_m->tensors.empty();
  const bool has_v = t.adam_v != nullptr && !t.adam_v->tensors.empty();
  if (has_m != has_v) {
    return absl::InvalidArgumentError("checkpoint: adam_m and adam_v must both be given or neither");
  }
  *has_optimizer_state = has_m;
  if (!has_m) return absl::OkStatus();
  MOBIUS_RETURN_IF_ERROR(Annotate(reference::ValidateParameters(config, *t.adam_m), "adam_m"));
  return Annotate(reference::ValidateParameters(config, *t.adam_v), "adam_v");
}

}  // namespace

absl::StatusOr<std::string> SaveCheckpoint(const std::string& root,
                                           const model::ModelConfig& config,
                                           const CheckpointTensors& tensors,
                                           const TrainingState& state, const SaveOptions& options) {
  if (tensors.master == nullptr) {
    return absl::InvalidArgumentError("checkpoint: master weights are required");
  }
  if (state.step < 0 || state.lr_step < 0) {
    return absl::InvalidArgumentError("checkpoint: step and lr_step must be >= 0");
  }
  MOBIUS_RETURN_IF_ERROR(reference::ValidateConfig(config));
  MOBIUS_RETURN_IF_ERROR(Annotate(reference::ValidateParameters(config, *tensors.master), "master"));
  bool has_optimizer_state = false;
  MOBIUS_RETURN_IF_ERROR(ValidateMoments(config, tensors, &has_optimizer_state));
  // One party doing every step of checkpoint_writer.h's protocol.
  MOBIUS_ASSIGN_OR_RETURN(CheckpointPlan plan,
                          PlanCheckpoint(config, options, has_optimizer_state));
  const std::string tag = absl::StrCat(getpid());
  const std::string tmp = PartialCheckpointDir(root, state.step, tag);
  absl::Status written = [&]() -> absl::Status {
    MOBIUS_RETURN_IF_ERROR(CreateCheckpointFiles(root, plan, state.step, tag));
    MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointTensorWriter> writer,
                            CheckpointTensorWriter::Open(tmp, plan));
    for (const auto& [name, t] : tensors.master->tensors) {
      MOBIUS_RETURN_IF_ERROR(writer->WriteTensor(
          name, t.data.data(), has_optimizer_state ? tensors.adam_m->data(name) : nullptr,
          has_optimizer_state ? tensors.adam_v->data(name) : nullptr));
    }
    return absl::OkStatus();
  }();
  if (!written.ok()) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    return Annotate(written, absl::StrCat("saving checkpoint ", root, "/",
                                          CheckpointDirName(state.step)));
  }
  return FinishCheckpoint(root, config, plan, state, options, tag);
}

absl::StatusOr<OpenedCheckpoint> OpenCheckpoint(const std::string& directory,
                                                const model::ModelConfig& config) {
  MOBIUS_RETURN_IF_ERROR(reference::ValidateConfig(config));
  if (access((directory + "/DONE").c_str(), F_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(directory, ": incomplete checkpoint (no DONE marker)"));
  }
  MOBIUS_ASSIGN_OR_RETURN(TrainerState ts, ParseTrainerState(directory + "/trainer_state.json"));
  MOBIUS_RETURN_IF_ERROR(VerifyDone(directory, ts.state.step, 0, 0));
  OpenedCheckpoint out;
  out.directory = directory;
  out.state = ts.state;
  const TensorShapes shapes = reference::ParameterShapes(config);
  const io::DType f32 = io::DType::kF32;
  const std::vector<model::FusedTensor> fused = model::FusedExpertTensors(config);
  MOBIUS_ASSIGN_OR_RETURN(out.master, TensorSetReader::Open(directory,
                                                            ts.model_is_f32 ? "model" : "master",
                                                            shapes, f32, fused));
  if (ts.has_optimizer_state) {
    MOBIUS_ASSIGN_OR_RETURN(out.adam_m,
                            TensorSetReader::Open(directory, "optimizer_m", shapes, f32, fused));
    MOBIUS_ASSIGN_OR_RETURN(out.adam_v,
                            TensorSetReader::Open(directory, "optimizer_v", shapes, f32, fused));
  }
  return out;
}

absl::StatusOr<TrainingState> ReadTrainingState(const std::string& directory,
                                                std::string* adapter) {
  const std::string path = directory + "/trainer_state.json";
  MOBIUS_ASSIGN_OR_RETURN(TrainerState ts, ParseTrainerState(path));
  if (adapter != nullptr) {
    MOBIUS_ASSIGN_OR_RETURN(Json j, ReadJson(path));
    *adapter = j.contains("adapter") && j["adapter"].is_string() ? j["adapter"].get<std::string>()
                                                                  : "";
  }
  return ts.state;
}

absl::Status VerifyCheckpointChecksums(const std::string& directory, int part, int parts) {
  if (parts <= 0 || part < 0 || part >= parts) {
    return absl::InvalidArgumentError(absl::StrCat("checksum part ", part, " of ", parts));
  }
  MOBIUS_ASSIGN_OR_RETURN(TrainerState ts, ParseTrainerState(directory + "/trainer_state.json"));
  return VerifyDone(directory, ts.state.step, part, parts);
}

absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(const std::string& directory,
                                                const model::ModelConfig& config,
                                                const LoadOptions& options) {
  MOBIUS_ASSIGN_OR_RETURN(OpenedCheckpoint opened, OpenCheckpoint(directory, config));
  if (options.verify_checksums) {
    MOBIUS_RETURN_IF_ERROR(VerifyCheckpointChecksums(directory, 0, 1));
  }
  LoadedCheckpoint out;
  out.directory = directory;
  out.state = opened.state;
  auto read_all = [&](const TensorSetReader& reader) {
    reference::Parameters p;
    for (const auto& [name, shape] : reference::ParameterShapes(config)) {
      reference::Tensor& t = p.tensors[name];
      t.shape = shape;
      t.data.resize(static_cast<size_t>(reader.view(name).num_elements()));
      reader.ReadF32(name, t.data.data());
    }
    return p;
  };
  out.master = read_all(*opened.master);
  if (opened.adam_m != nullptr) {
    out.adam_m = read_all(*opened.adam_m);
    out.adam_v = read_all(*opened.adam_v);
  }
  return out;
}

}  // namespace mobius::checkpoint
