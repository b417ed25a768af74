#include "common/inspect/inspection.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/inspect/dataset_descriptor.h"
#include "common/inspect/launch_checks.h"
#include "common/jobspec/json.h"
#include "common/jobspec/validate.h"
#include "common/model/model_config_parse.h"
#include "common/run/checkpoint_dirs.h"
#include "common/run/checkpoint_owner.h"
#include "common/run/completion_record.h"
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

// The job's user can create `dir` (its nearest existing ancestor is a directory it may write and
// search) or write into it (it is one). PERMISSION_DENIED / NOT_FOUND / INVALID_ARGUMENT naming
// the directory and the system error.
absl::Status CheckWritableDir(const std::string& dir) {
  std::string at = dir;
  while (!at.empty()) {
    struct stat st;
    if (stat(at.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint.dir: ", at, " is not a directory"));
      }
      if (access(at.c_str(), W_OK | X_OK) != 0) {
        return MOBIUS_ERRNO_ERROR(
            absl::StrCat("checkpoint.dir: ", dir, at == dir ? "" : absl::StrCat(" (in ", at, ")"),
                         ": the job's user (uid ", getuid(), ") cannot write there"));
      }
      return absl::OkStatus();
    }
    if (errno != ENOENT) {
      return MOBIUS_ERRNO_ERROR(absl::StrCat("checkpoint.dir: ", dir, " (at ", at, ")"));
    }
    const size_t slash = at.find_last_of('/');
    if (slash == std::string::npos || slash == 0) break;
    at.resize(slash);
  }
  return absl::OkStatus();
}

// PERMISSION_DENIED naming `field` and `path` when the job's user may not read it (or search it,
// for a directory); OK otherwise, a missing path included (validation names that).
absl::Status CheckReadable(const std::string& field, const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno != EACCES) return absl::OkStatus();
  } else if (access(path.c_str(), S_ISDIR(st.st_mode) ? R_OK | X_OK : R_OK) == 0) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(field, ": ", path,
                                                  ": Permission denied (the job runs as uid ",
                                                  getuid(), ", which may not read it)"));
}

absl::Status CheckReadableInputs(const jobspec::JobSpec& spec) {
  if (absl::Status s = CheckReadable("model_dir", spec.model_dir); !s.ok()) return s;
  if (absl::Status s = CheckReadable("model_dir", spec.model_dir + "/config.json"); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckReadable("dataset.path", spec.dataset.path); !s.ok()) return s;
  for (const std::string& p : spec.dataset.paths) {
    if (absl::Status s = CheckReadable("dataset.paths", p); !s.ok()) return s;
  }
  if (absl::Status s = CheckReadable("dataset.tokenizer", spec.dataset.tokenizer); !s.ok()) {
    return s;
  }
  return CheckReadable("adapter.init_from", spec.adapter ? spec.adapter->init_from : "");
}

// The job's user (this process) is in `group` (checkpoint.group): PERMISSION_DENIED otherwise.
absl::Status CheckGroupMember(const std::string& group) {
  absl::StatusOr<gid_t> gid = checkpoint::ResolveGroup(group);
  if (!gid.ok()) return gid.status();
  std::vector<gid_t> groups(static_cast<size_t>(std::max(0, getgroups(0, nullptr))));
  groups.resize(static_cast<size_t>(std::max(0, getgroups(static_cast<int>(groups.size()),
                                                          groups.data()))));
  if (getgid() == *gid || std::find(groups.begin(), groups.end(), *gid) != groups.end()) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat("checkpoint.group: the job's user (uid ",
                                                  getuid(), ") is not in group ", group));
}

absl::Status RunChecks(const InspectRequest& r, InspectResult& out) {
  absl::StatusOr<jobspec::JobSpec> spec = jobspec::JobSpecFromJson(r.spec_json);
  if (!spec.ok()) return spec.status();
  if (absl::Status readable = CheckReadableInputs(*spec); !readable.ok()) return readable;
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
  if (!spec->checkpoint.group.empty()) {
    absl::Status member = CheckGroupMember(spec->checkpoint.group);
    if (!member.ok()) return member;
  }
  if (!r.checkpoint_dir.empty()) {
    absl::Status writable = CheckWritableDir(r.checkpoint_dir);
    if (!writable.ok()) return writable;
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
  if (!request.completion_dir.empty()) {
    absl::StatusOr<runtime::CompletionRecord> record =
        runtime::ReadCompletionRecord(request.completion_dir);
    out.status = record.status();
    if (record.ok()) {
      out.completion_job_id = record->job_id;
      out.completion_checkpoint = record->final_checkpoint;
      out.completion_steps = record->steps_done;
      out.completion_unix_ms = record->finished_unix_ms;
    }
    return out;
  }
  out.status = RunChecks(request, out);
  return out;
}

std::string InspectRequestToJson(const InspectRequest& r) {
  return json{{"spec", r.spec_json},
              {"job_id", r.job_id},
              {"checkpoint_dir", r.checkpoint_dir},
              {"dataset_cache_dir", r.dataset_cache_dir},
              {"run_config", r.run_config_json},
              {"completion_dir", r.completion_dir}}
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
  r.completion_dir = j.value("completion_dir", "");
  return r;
}

std::string InspectResultToJson(const InspectResult& r) {
  return json{{"code", static_cast<int>(r.status.code())},
              {"message", std::string(r.status.message())},
              {"model_config", r.model_config_json},
              {"dataset_descriptor", r.dataset_descriptor},
              {"cached_token_file", r.cached_token_file},
              {"latest_checkpoint", r.latest_checkpoint},
              {"completion_job_id", r.completion_job_id},
              {"completion_checkpoint", r.completion_checkpoint},
              {"completion_steps", r.completion_steps},
              {"completion_unix_ms", r.completion_unix_ms}}
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
  r.completion_job_id = j.value("completion_job_id", "");
  r.completion_checkpoint = j.value("completion_checkpoint", "");
  r.completion_steps = j.value("completion_steps", int64_t{0});
  r.completion_unix_ms = j.value("completion_unix_ms", int64_t{0});
  return r;
}

}  // namespace mobius::inspect
