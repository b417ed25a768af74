#include "common/inspect/inspection.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/inspect/dataset_descriptor.h"
#include "common/inspect/launch_checks.h"
#include "common/jobspec/json.h"
#include "common/jobspec/validate.h"
#include "common/model/model_config_parse.h"
#include "common/run/checkpoint_dirs.h"
#include "common/run/checkpoint_owner.h"
#include "common/run/run_config.h"
#include "nlohmann/json.hpp"

namespace mobius::inspect {
namespace {

using json = nlohmann::json;

// config.json's text: a regular file (a final symlink is followed: model directories are often
// links into a shared store), at most 1 MiB. Errors name the path and the system error.
absl::StatusOr<std::string> ReadModelConfigText(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("model_dir: ", path));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("model_dir: ", path, " is not a regular file"));
  }
  if (st.st_size > model::kMaxConfigJsonBytes) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        "model_dir: ", path, " has ", st.st_size, " bytes, more than the 1 MiB a config may have"));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status s = MOBIUS_ERRNO_ERROR(absl::StrCat("model_dir: read ", path));
      close(fd);
      return s;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(got);
  return text;
}

absl::Status RunChecks(const InspectRequest& r, InspectResult& out) {
  absl::StatusOr<jobspec::JobSpec> spec = jobspec::JobSpecFromJson(r.spec_json);
  if (!spec.ok()) return spec.status();
  absl::Status valid =
      jobspec::ValidateJobSpec(*spec, {.require_absolute_paths = true, .check_files_exist = true});
  if (!valid.ok()) return valid;
  absl::StatusOr<std::string> config = ReadModelConfigText(spec->model_dir);
  if (!config.ok()) return config.status();
  absl::Status parsed = model::ParseModelConfig(*config, spec->model_dir + "/config.json").status();
  if (!parsed.ok()) return parsed;
  out.model_config_json = *std::move(config);
  if (jobspec::IsTextFormat(spec->dataset.format)) {
    absl::StatusOr<std::string> descriptor = DatasetDescriptor(*spec);
    if (!descriptor.ok()) return descriptor.status();
    out.dataset_descriptor = *std::move(descriptor);
    if (!r.dataset_cache_dir.empty()) {
      out.cached_token_file = LookUpDatasetCache(r.dataset_cache_dir, out.dataset_descriptor);
    }
  }
  if (!r.checkpoint_dir.empty()) {
    absl::Status owner = checkpoint::CheckCheckpointOwner(r.checkpoint_dir, r.job_id);
    if (!owner.ok()) return owner;
    if (absl::StatusOr<std::string> latest = checkpoint::LatestCheckpoint(r.checkpoint_dir);
        latest.ok()) {
      out.latest_checkpoint = *latest;
    }
  }
  if (!r.run_config_json.empty()) {
    absl::StatusOr<runtime::RunConfig> run = runtime::RunConfigFromJson(r.run_config_json);
    if (!run.ok()) return run.status();
    return runtime::ValidateLaunch(*run);
  }
  return absl::OkStatus();
}

}  // namespace

InspectResult Inspect(const InspectRequest& request) {
  InspectResult out;
  out.status = RunChecks(request, out);
  return out;
}

std::string InspectRequestToJson(const InspectRequest& r) {
  return json{{"spec", r.spec_json},
              {"job_id", r.job_id},
              {"checkpoint_dir", r.checkpoint_dir},
              {"dataset_cache_dir", r.dataset_cache_dir},
              {"run_config", r.run_config_json}}
      .dump();
}

absl::StatusOr<InspectRequest> InspectRequestFromJson(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("inspect request: not a JSON object");
  InspectRequest r;
  for (auto [key, field] : {std::pair{"spec", &r.spec_json},
                            {"job_id", &r.job_id},
                            {"checkpoint_dir", &r.checkpoint_dir},
                            {"dataset_cache_dir", &r.dataset_cache_dir},
                            {"run_config", &r.run_config_json}}) {
    if (!j.contains(key) || !j[key].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("inspect request: ", key, " missing"));
    }
    *field = j[key].get<std::string>();
  }
  return r;
}

std::string InspectResultToJson(const InspectResult& r) {
  return json{
      {"code", static_cast<int>(r.status.code())}, {"message", std::string(r.status.message())},
      {"model_config", r.model_config_json},       {"dataset_descriptor", r.dataset_descriptor},
      {"cached_token_file", r.cached_token_file},  {"latest_checkpoint", r.latest_checkpoint}}
      .dump();
}

absl::StatusOr<InspectResult> InspectResultFromJson(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("code") || !j["code"].is_number_integer()) {
    return absl::InternalError("inspect: the check process printed no result");
  }
  InspectResult r;
  const int code = j["code"].get<int>();
  if (code < 0 || code > 16) return absl::InternalError("inspect: bad status code in the result");
  r.status = absl::Status(static_cast<absl::StatusCode>(code), j.value("message", ""));
  r.model_config_json = j.value("model_config", "");
  r.dataset_descriptor = j.value("dataset_descriptor", "");
  r.cached_token_file = j.value("cached_token_file", "");
  r.latest_checkpoint = j.value("latest_checkpoint", "");
  return r;
}

}  // namespace mobius::inspect
