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
#include "worker/checkpoint/model_init.h"

namespace mobius::checkpoint {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr char kFormat[] = "mobius-checkpoint";
constexpr int kVersion = 1;
constexpr char kDirPrefix[] = "checkpoint-";
constexpr int64_t kMaxJsonBytes = int64_t{64} << 20;

absl::Status FsError(const std::error_code& ec, const std::string& what) {
  return ErrnoError(ec.value(), what, __FILE__, __LINE__);
}

// The step of a complete checkpoint directory name ("checkpoint-<digits>"), or -1.
int64_t StepOfName(const std::string& name) {
  if (name.rfind(kDirPrefix, 0) != 0) return -1;
  const std::string digits = name.substr(sizeof(kDirPrefix) - 1);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  int64_t step = 0;
  return absl::SimpleAtoi(digits, &step) ? step : -1;
}

// Complete checkpoints under `root` by step, oldest first.
std::vector<std::pair<int64_t, std::string>> CompleteCheckpoints(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(root, ec)) {
    const int64_t step = StepOfName(entry.path().filename().string());
    if (step < 0 || !entry.is_directory(ec)) continue;
    if (access((entry.path() / "DONE").c_str(), F_OK) != 0) continue;
    found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

absl::StatusOr<std::string> DumpJson(const Json& j, const std::string& what) {
  try {  // dump() throws on strings that are not UTF-8; keep exceptions inside this module
    return j.dump(2) + "\n";
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": strings must be UTF-8: ", e.what()));
  }
}

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

absl::StatusOr<std::string> TrainerStateJson(const TrainingState& s, io::DType model_dtype,
                                             bool has_optimizer_state) {
  Json data = Json::object();
  for (const auto& [k, v] : s.data_position) data[k] = v;
  Json j = {{"format", kFormat},
            {"version", kVersion},
            {"step", s.step},
            {"lr_step", s.lr_step},
            {"rng_state_hex", absl::BytesToHexString(s.rng_state)},
            {"data_position", data},
            {"model_dtype", io::DTypeName(model_dtype)},
            {"has_optimizer_state", has_optimizer_state}};
  return DumpJson(j, "trainer_state.json");
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
  if (format != kFormat || version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a ", kFormat, " version ",
                                                   kVersion, " file (format \"", format,
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
  for (const auto& [k, v] : j["data_position"].items()) {
    if (!v.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": data_position[\"", k, "\"] must be a string"));
    }
    t.state.data_position[k] = v.get<std::string>();
  }
  return t;
}

// DONE: the size and checksum of every other file, so a load notices truncation or bit rot.
absl::Status WriteDone(const std::string& dir, int64_t step) {
  Json files = Json::object();
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    names.push_back(e.path().filename().string());
  }
  if (ec) return FsError(ec, absl::StrCat("list ", dir));
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    MOBIUS_ASSIGN_OR_RETURN(FileDigest d, DigestFile(dir + "/" + name));
    files[name] = {{"bytes", d.bytes}, {"fnv1a64", absl::StrFormat("%016x", d.fnv1a64)}};
  }
  Json done = {{"format", kFormat}, {"step", step}, {"files", files}};
  return WriteFileAtomically(dir + "/DONE", done.dump(2) + "\n");
}

absl::Status VerifyDone(const std::string& dir, int64_t step, bool checksums) {
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
  for (const auto& [name, entry] : done["files"].items()) {
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
    if (!checksums) continue;
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

// Moves `tmp` to `final_dir`, replacing an existing directory only once the new one is in place.
absl::Status Publish(const std::string& tmp, const std::string& final_dir, const std::string& root) {
  std::error_code ec;
  std::string old;
  if (fs::exists(final_dir, ec)) {
    old = absl::StrCat(final_dir, ".old-", getpid());
    fs::remove_all(old, ec);
    if (rename(final_dir.c_str(), old.c_str()) != 0) {
      return MOBIUS_ERRNO_ERROR(absl::StrCat("rename ", final_dir, " to ", old));
    }
  }
  if (rename(tmp.c_str(), final_dir.c_str()) != 0) {
    return MOBIUS_ERRNO_ERROR(absl::StrCat("rename ", tmp, " to ", final_dir));
  }
  MOBIUS_RETURN_IF_ERROR(SyncDirectory(root));
  if (!old.empty()) fs::remove_all(old, ec);
  return absl::OkStatus();
}

}  // namespace

std::string CheckpointDirName(int64_t step) { return absl::StrFormat("%s%08d", kDirPrefix, step); }

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
  MOBIUS_ASSIGN_OR_RETURN(std::string trainer_state,
                          TrainerStateJson(state, options.model_dtype, has_optimizer_state));

  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return FsError(ec, absl::StrCat("create ", root));
  const std::string final_dir = root + "/" + CheckpointDirName(state.step);
  const std::string tmp = absl::StrCat(final_dir, ".tmp-", getpid());
  fs::remove_all(tmp, ec);  // a leftover of an earlier crash of a process with our pid
  if (!fs::create_directory(tmp, ec) || ec) return FsError(ec, absl::StrCat("create ", tmp));

  absl::Status status = [&]() -> absl::Status {
    WriteModelOptions model_options;
    model_options.dtype = options.model_dtype;
    model_options.generation_config = false;
    model_options.max_shard_bytes = options.max_shard_bytes;
    model_options.config_json = options.config_json;
    MOBIUS_RETURN_IF_ERROR(WriteModelDirectory(tmp, config, *tensors.master, model_options));
    const TensorShapes shapes = reference::ParameterShapes(config);
    auto write_f32 = [&](const char* base, const reference::Parameters& p) {
      return WriteTensorSet(tmp, base, p, shapes, io::DType::kF32, options.max_shard_bytes).status();
    };
    if (options.model_dtype != io::DType::kF32) {
      MOBIUS_RETURN_IF_ERROR(write_f32("master", *tensors.master));
    }
    if (has_optimizer_state) {
      MOBIUS_RETURN_IF_ERROR(write_f32("optimizer_m", *tensors.adam_m));
      MOBIUS_RETURN_IF_ERROR(write_f32("optimizer_v", *tensors.adam_v));
    }
    MOBIUS_RETURN_IF_ERROR(WriteFileAtomically(tmp + "/trainer_state.json", trainer_state));
    MOBIUS_RETURN_IF_ERROR(WriteDone(tmp, state.step));
    MOBIUS_RETURN_IF_ERROR(SyncDirectory(tmp));
    return Publish(tmp, final_dir, root);
  }();
  if (!status.ok()) {
    fs::remove_all(tmp, ec);
    return Annotate(status, absl::StrCat("saving checkpoint ", final_dir));
  }
  if (options.keep_last > 0) {
    auto complete = CompleteCheckpoints(root);
    for (size_t i = 0; i + options.keep_last < complete.size(); ++i) {
      if (complete[i].second != final_dir) fs::remove_all(complete[i].second, ec);
    }
  }
  return final_dir;
}

absl::StatusOr<std::string> LatestCheckpoint(const std::string& root) {
  auto complete = CompleteCheckpoints(root);
  if (complete.empty()) {
    return absl::NotFoundError(absl::StrCat("no complete checkpoint under ", root));
  }
  return complete.back().second;
}

absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(const std::string& directory,
                                                const model::ModelConfig& config,
                                                const LoadOptions& options) {
  MOBIUS_RETURN_IF_ERROR(reference::ValidateConfig(config));
  if (access((directory + "/DONE").c_str(), F_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(directory, ": incomplete checkpoint (no DONE marker)"));
  }
  MOBIUS_ASSIGN_OR_RETURN(TrainerState ts, ParseTrainerState(directory + "/trainer_state.json"));
  MOBIUS_RETURN_IF_ERROR(VerifyDone(directory, ts.state.step, options.verify_checksums));
  LoadedCheckpoint out;
  out.directory = directory;
  out.state = ts.state;
  const TensorShapes shapes = reference::ParameterShapes(config);
  const io::DType f32 = io::DType::kF32;
  MOBIUS_ASSIGN_OR_RETURN(out.master, ReadTensorSet(directory, ts.model_is_f32 ? "model" : "master",
                                                    shapes, f32));
  if (ts.has_optimizer_state) {
    MOBIUS_ASSIGN_OR_RETURN(out.adam_m, ReadTensorSet(directory, "optimizer_m", shapes, f32));
    MOBIUS_ASSIGN_OR_RETURN(out.adam_v, ReadTensorSet(directory, "optimizer_v", shapes, f32));
  }
  return out;
}

}  // namespace mobius::checkpoint
