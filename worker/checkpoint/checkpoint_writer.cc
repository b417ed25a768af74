#include "worker/checkpoint/checkpoint_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/errors.h"
#include "common/numeric/bf16.h"
#include "common/status_macros.h"
#include "worker/checkpoint/model_init.h"

namespace mobius::checkpoint {
namespace {

// The model's config.json as kept verbatim, less a quantization_config (gpt-oss's MXFP4, a
// bitsandbytes base): the checkpoint's tensors are plain bf16 or fp32, and transformers would
// read them as quantized. Unparseable text is kept as it is.
std::string WithoutQuantizationConfig(const std::string& text) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("quantization_config")) return text;
  j.erase("quantization_config");
  return j.dump(2) + "\n";
}


namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr char kExportPrefix[] = "export-";

absl::Status FsError(const std::error_code& ec, const std::string& what) {
  return ErrnoError(ec.value(), what, __FILE__, __LINE__);
}

absl::StatusOr<std::string> TrainerStateJson(
    const TrainingState& s, io::DType model_dtype, bool has_optimizer_state,
    const std::map<std::string, std::string>& extra = {}) {
  Json data = Json::object();
  for (const auto& [k, v] : s.data_position) data[k] = v;
  Json j = {{"format", kCheckpointFormat},
            {"version", kCheckpointVersion},
            {"step", s.step},
            {"lr_step", s.lr_step},
            {"rng_state_hex", absl::BytesToHexString(s.rng_state)},
            {"data_position", data},
            {"model_dtype", io::DTypeName(model_dtype)},
            {"has_optimizer_state", has_optimizer_state}};
  if (s.loss_scale > 0) {
    j["loss_scale"] = s.loss_scale;
    j["loss_scale_good_steps"] = s.loss_scale_good_steps;
  }
  for (const auto& [k, v] : extra) j[k] = v;
  try {  // dump() throws on strings that are not UTF-8; keep exceptions inside this module
    return j.dump(2) + "\n";
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer_state.json: strings must be UTF-8: ", e.what()));
  }
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
  Json done = {{"format", kCheckpointFormat}, {"step", step}, {"files", files}};
  return WriteFileAtomically(dir + "/DONE", done.dump(2) + "\n");
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

absl::Status WriteAllAt(int fd, const void* data, uint64_t bytes, uint64_t offset,
                        const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = pwrite(fd, p, std::min<uint64_t>(bytes, uint64_t{1} << 30),
                             static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("write ", path));
    p += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

// Copies a small file (tokenizer files) with fsync, keeping nothing but its bytes.
absl::Status CopyFile(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) return FsError(ec, absl::StrCat("copy ", from, " to ", to));
  const int fd = open(to.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("open ", to));
  const int rc = fsync(fd);
  close(fd);
  if (rc != 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("fsync ", to));
  return absl::OkStatus();
}

// Hard link, else (another file system, a file system without links) a copy.
absl::Status LinkOrCopy(const std::string& from, const std::string& to) {
  if (link(from.c_str(), to.c_str()) == 0) return absl::OkStatus();
  return CopyFile(from, to);
}

absl::Status WriteExport(const std::string& root, const std::string& checkpoint_dir,
                         const CheckpointPlan& plan, const SaveOptions& options, int64_t step) {
  const std::string final_dir = root + "/" + ExportDirName(step);
  const std::string tmp = absl::StrCat(final_dir, ".tmp-", getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec) || ec) return FsError(ec, absl::StrCat("create ", tmp));
  std::vector<std::string> names = plan.model_files;
  names.push_back("config.json");
  for (const std::string& f : options.copy_files) {
    names.push_back(fs::path(f).filename().string());
  }
  absl::Status st;
  for (const std::string& name : names) {
    st = LinkOrCopy(checkpoint_dir + "/" + name, tmp + "/" + name);
    if (!st.ok()) break;
  }
  if (st.ok()) st = SyncDirectory(tmp);
  if (st.ok()) st = Publish(tmp, final_dir, root);
  if (!st.ok()) fs::remove_all(tmp, ec);
  return st;
}

// After `final_dir` of `step` is in place: keep_last pruning (checkpoints and their exports),
// leftovers of interrupted saves of this or earlier steps (one writer per root at a time).
void Prune(const std::string& root, const std::string& final_dir, int64_t step, int keep_last) {
  std::error_code ec;
  std::vector<std::pair<int64_t, std::string>> complete = CompleteCheckpoints(root);
  int64_t oldest_kept = 0;
  if (keep_last > 0 && complete.size() > static_cast<size_t>(keep_last)) {
    oldest_kept = complete[complete.size() - keep_last].first;
    for (size_t i = 0; i + keep_last < complete.size(); ++i) {
      if (complete[i].second != final_dir) fs::remove_all(complete[i].second, ec);
    }
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    const bool is_checkpoint = absl::StartsWith(name, "checkpoint-");
    const bool is_export = absl::StartsWith(name, kExportPrefix);
    if (!is_checkpoint && !is_export) continue;
    const size_t digits_at = is_checkpoint ? sizeof("checkpoint-") - 1 : sizeof(kExportPrefix) - 1;
    int64_t of_step = -1;
    const std::string digits = name.substr(digits_at, 8);
    if (digits.size() != 8 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    of_step = std::stoll(digits);
    const bool partial = name.find(".tmp-") != std::string::npos ||
                         name.find(".old-") != std::string::npos;
    if ((partial && of_step <= step) || (is_export && !partial && of_step < oldest_kept)) {
      fs::remove_all(entry.path(), ec);
    }
  }
}

}  // namespace

uint64_t CheckpointPlan::total_bytes() const {
  uint64_t total = 0;
  for (const File& f : files) total += f.bytes;
  return total;
}

absl::StatusOr<CheckpointPlan> PlanCheckpoint(const model::ModelConfig& config,
                                              const SaveOptions& options,
                                              bool has_optimizer_state) {
  MOBIUS_RETURN_IF_ERROR(reference::ValidateConfig(config));
  if (options.model_dtype != io::DType::kBF16 && options.model_dtype != io::DType::kF32) {
    return absl::InvalidArgumentError("checkpoint: model_dtype must be BF16 or F32");
  }
  CheckpointPlan plan;
  plan.model_dtype = options.model_dtype;
  plan.has_optimizer_state = has_optimizer_state;
  const TensorShapes shapes = reference::ParameterShapes(config);
  for (const auto& [name, shape] : shapes) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    plan.tensors[name].num_elements = n;
  }
  // The files hold gpt-oss's expert tensors fused (transformers' layout); each part is written at
  // its slice of the fused tensor.
  const TensorShapes file_shapes = model::FuseExpertTensors(config, shapes);
  std::map<std::string, const model::FusedTensor*> fused_by_name;
  const std::vector<model::FusedTensor> fused = model::FusedExpertTensors(config);
  for (const model::FusedTensor& f : fused) fused_by_name[f.name] = &f;
  // One tensor set: its shards' headers and every tensor's place.
  auto add_set = [&](const std::string& base, io::DType dtype,
                     CheckpointPlan::Place CheckpointPlan::Tensor::*place) -> absl::Status {
    const TensorSetPlan set = PlanTensorSet(base, file_shapes, dtype, options.max_shard_bytes);
    for (const TensorSetShard& shard : set.shards) {
      std::vector<io::TensorToWrite> entries;
      for (const auto& [name, shape] : shard.tensors) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        entries.push_back({name, dtype, shape, nullptr,
                           static_cast<size_t>(n) * io::DTypeSize(dtype)});
      }
      MOBIUS_ASSIGN_OR_RETURN(io::SafetensorsLayout layout,
                              io::PlanSafetensors(entries, {{"format", "pt"}}));
      const int file = static_cast<int>(plan.files.size());
      plan.files.push_back({shard.file, layout.header, layout.file_bytes});
      for (const auto& [name, offset] : layout.offsets) {
        auto f = fused_by_name.find(name);
        if (f == fused_by_name.end()) {
          plan.tensors[name].*place = {file, offset};
          continue;
        }
        const std::vector<std::string>& parts = f->second->parts;
        for (size_t e = 0; e < parts.size(); ++e) {
          const uint64_t part = static_cast<uint64_t>(plan.tensors[parts[e]].num_elements) *
                                io::DTypeSize(dtype);
          plan.tensors[parts[e]].*place = {file, offset + e * part};
        }
      }
      if (base == "model") plan.model_files.push_back(shard.file);
    }
    if (!set.index_file.empty()) {
      plan.index_files[set.index_file] = set.index_json;
      if (base == "model") plan.model_files.push_back(set.index_file);
    }
    return absl::OkStatus();
  };
  MOBIUS_RETURN_IF_ERROR(add_set("model", options.model_dtype, &CheckpointPlan::Tensor::model));
  if (options.model_dtype == io::DType::kF32) {
    for (auto& [name, t] : plan.tensors) t.master = t.model;
  } else {
    MOBIUS_RETURN_IF_ERROR(add_set("master", io::DType::kF32, &CheckpointPlan::Tensor::master));
  }
  if (has_optimizer_state) {
    MOBIUS_RETURN_IF_ERROR(add_set("optimizer_m", io::DType::kF32, &CheckpointPlan::Tensor::m));
    MOBIUS_RETURN_IF_ERROR(add_set("optimizer_v", io::DType::kF32, &CheckpointPlan::Tensor::v));
  }
  return plan;
}

std::string PartialCheckpointDir(const std::string& root, int64_t step, const std::string& tag) {
  return absl::StrCat(root, "/", CheckpointDirName(step), ".tmp-", tag);
}

std::string ExportDirName(int64_t step) { return absl::StrFormat("%s%08d", kExportPrefix, step); }

absl::Status CreateCheckpointFiles(const std::string& root, const CheckpointPlan& plan,
                                   int64_t step, const std::string& tag) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return FsError(ec, absl::StrCat("create ", root));
  const std::string tmp = PartialCheckpointDir(root, step, tag);
  fs::remove_all(tmp, ec);  // a leftover of an earlier crash with the same tag
  if (!fs::create_directory(tmp, ec) || ec) return FsError(ec, absl::StrCat("create ", tmp));
  for (const CheckpointPlan::File& f : plan.files) {
    const std::string path = tmp + "/" + f.name;
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("create ", path));
    absl::Status st = WriteAllAt(fd, f.header.data(), f.header.size(), 0, path);
    if (st.ok() && ftruncate(fd, static_cast<off_t>(f.bytes)) != 0) {
      st = MOBIUS_ERRNO_ERROR(absl::StrCat("size ", path, " to ", f.bytes, " bytes"));
    }
    close(fd);
    MOBIUS_RETURN_IF_ERROR(st);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CheckpointTensorWriter>> CheckpointTensorWriter::Open(
    const std::string& dir, const CheckpointPlan& plan) {
  std::vector<int> fds;
  for (const CheckpointPlan::File& f : plan.files) {
    const std::string path = dir + "/" + f.name;
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
      absl::Status st = MOBIUS_ERRNO_ERROR(absl::StrCat("open ", path));
      for (int opened : fds) close(opened);
      return st;
    }
    fds.push_back(fd);
  }
  return std::unique_ptr<CheckpointTensorWriter>(
      new CheckpointTensorWriter(dir, &plan, std::move(fds)));
}

CheckpointTensorWriter::~CheckpointTensorWriter() {
  for (int fd : fds_) close(fd);
}

absl::Status CheckpointTensorWriter::Write(const CheckpointPlan::Place& place, const void* data,
                                           uint64_t bytes) {
  if (place.file < 0) return absl::OkStatus();
  MOBIUS_RETURN_IF_ERROR(WriteAllAt(fds_[place.file], data, bytes, place.offset,
                                    dir_ + "/" + plan_->files[place.file].name));
  bytes_written_ += bytes;
  return absl::OkStatus();
}

absl::Status CheckpointTensorWriter::WriteTensor(const std::string& name, const float* master,
                                                 const float* m, const float* v) {
  auto it = plan_->tensors.find(name);
  if (it == plan_->tensors.end()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint: no tensor named ", name));
  }
  const CheckpointPlan::Tensor& t = it->second;
  const uint64_t n = static_cast<uint64_t>(t.num_elements);
  MOBIUS_RETURN_IF_ERROR(Write(t.master, master, 4 * n));
  if (plan_->model_dtype == io::DType::kBF16) {
    // Rounded in slices, so the only buffer is one slice of bf16.
    constexpr uint64_t kSlice = uint64_t{1} << 20;
    std::vector<uint16_t> bf16(std::min(n, kSlice));
    for (uint64_t done = 0; done < n; done += kSlice) {
      const uint64_t k = std::min(kSlice, n - done);
      numeric::Fp32ToBf16(master + done, bf16.data(), k);
      CheckpointPlan::Place at = t.model;
      at.offset += 2 * done;
      MOBIUS_RETURN_IF_ERROR(Write(at, bf16.data(), 2 * k));
    }
  }
  if (plan_->has_optimizer_state) {
    MOBIUS_RETURN_IF_ERROR(Write(t.m, m, 4 * n));
    MOBIUS_RETURN_IF_ERROR(Write(t.v, v, 4 * n));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FinishCheckpoint(const std::string& root,
                                             const model::ModelConfig& config,
                                             const CheckpointPlan& plan,
                                             const TrainingState& state,
                                             const SaveOptions& options, const std::string& tag) {
  if (state.step < 0 || state.lr_step < 0) {
    return absl::InvalidArgumentError("checkpoint: step and lr_step must be >= 0");
  }
  const std::string tmp = PartialCheckpointDir(root, state.step, tag);
  const std::string final_dir = root + "/" + CheckpointDirName(state.step);
  absl::Status status = [&]() -> absl::Status {
    MOBIUS_ASSIGN_OR_RETURN(std::string trainer_state,
                            TrainerStateJson(state, plan.model_dtype, plan.has_optimizer_state));
    for (const CheckpointPlan::File& f : plan.files) {
      const std::string path = tmp + "/" + f.name;
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("open ", path));
      const int rc = fsync(fd);
      close(fd);
      if (rc != 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("fsync ", path));
    }
    const std::string config_json = options.config_json.empty()
                                        ? ModelConfigJson(config, plan.model_dtype)
                                        : WithoutQuantizationConfig(options.config_json);
    MOBIUS_RETURN_IF_ERROR(WriteFileAtomically(tmp + "/config.json", config_json));
    for (const auto& [name, text] : plan.index_files) {
      MOBIUS_RETURN_IF_ERROR(WriteFileAtomically(tmp + "/" + name, text));
    }
    for (const std::string& file : options.copy_files) {
      const std::string name = fs::path(file).filename().string();
      MOBIUS_RETURN_IF_ERROR(CopyFile(file, tmp + "/" + name));
    }
    MOBIUS_RETURN_IF_ERROR(WriteFileAtomically(tmp + "/trainer_state.json", trainer_state));
    MOBIUS_RETURN_IF_ERROR(WriteDone(tmp, state.step));
    MOBIUS_RETURN_IF_ERROR(SyncDirectory(tmp));
    return Publish(tmp, final_dir, root);
  }();
  std::error_code ec;
  if (!status.ok()) {
    fs::remove_all(tmp, ec);
    return Annotate(status, absl::StrCat("saving checkpoint ", final_dir));
  }
  if (options.export_model) {
    MOBIUS_RETURN_IF_ERROR(Annotate(WriteExport(root, final_dir, plan, options, state.step),
                                    absl::StrCat("exporting the model of ", final_dir)));
  }
  Prune(root, final_dir, state.step, options.keep_last);
  return final_dir;
}

absl::StatusOr<std::string> SealCheckpoint(const std::string& root, const std::string& tag,
                                           const TrainingState& state, io::DType model_dtype,
                                           bool has_optimizer_state,
                                           const std::vector<std::string>& copy_files,
                                           int keep_last,
                                           const std::map<std::string, std::string>& extra) {
  if (state.step < 0 || state.lr_step < 0) {
    return absl::InvalidArgumentError("checkpoint: step and lr_step must be >= 0");
  }
  const std::string tmp = PartialCheckpointDir(root, state.step, tag);
  const std::string final_dir = root + "/" + CheckpointDirName(state.step);
  absl::Status status = [&]() -> absl::Status {
    MOBIUS_ASSIGN_OR_RETURN(
        std::string trainer_state,
        TrainerStateJson(state, model_dtype, has_optimizer_state, extra));
    for (const std::string& file : copy_files) {
      MOBIUS_RETURN_IF_ERROR(CopyFile(file, tmp + "/" + fs::path(file).filename().string()));
    }
    MOBIUS_RETURN_IF_ERROR(WriteFileAtomically(tmp + "/trainer_state.json", trainer_state));
    MOBIUS_RETURN_IF_ERROR(WriteDone(tmp, state.step));
    MOBIUS_RETURN_IF_ERROR(SyncDirectory(tmp));
    return Publish(tmp, final_dir, root);
  }();
  if (!status.ok()) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    return Annotate(status, absl::StrCat("saving checkpoint ", final_dir));
  }
  Prune(root, final_dir, state.step, keep_last);
  return final_dir;
}

std::vector<std::string> TokenizerFiles(const std::string& dir_or_file) {
  static const char* const kNames[] = {"tokenizer.json",   "tokenizer_config.json",
                                       "special_tokens_map.json", "tokenizer.model",
                                       "vocab.json",       "merges.txt",
                                       "added_tokens.json", "chat_template.jinja"};
  std::error_code ec;
  fs::path dir = fs::absolute(dir_or_file, ec);
  if (!fs::is_directory(dir, ec)) dir = dir.parent_path();
  std::vector<std::string> found;
  for (const char* name : kNames) {
    if (fs::is_regular_file(dir / name, ec)) found.push_back((dir / name).string());
  }
  return found;
}

}  // namespace mobius::checkpoint
