#include "server/jobs/service/job_identity.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/jobspec/json.h"
#include "common/model/model_config_parse.h"
#include "common/status_macros.h"
#include "host/launch/user_inspect.h"

namespace mobius::jobs {

absl::Status CheckMaySubmit(const JobManagerOptions& options, const Caller& caller) {
  if (!options.single_user || caller.uid == getuid() || caller.admin) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "this mobiusd runs unprivileged as uid ", getuid(),
      " (single-user mode): its jobs run as that user, so only it and the admins may submit; ",
      caller.user, " (uid ", caller.uid,
      ") needs a daemon of its own or one running as root (docs/operations.md)"));
}

absl::StatusOr<std::optional<Identity>> JobIdentity(const JobManagerOptions& options, uid_t uid) {
  if (options.single_user || uid == getuid()) return std::optional<Identity>();
  MOBIUS_ASSIGN_OR_RETURN(Identity who, LookUpIdentity(uid));
  MOBIUS_RETURN_IF_ERROR(CheckCanActAs(who));
  return std::optional<Identity>(std::move(who));
}

Identity JobFilesOwner(const std::optional<Identity>& identity) {
  return identity.has_value() ? *identity : ProcessIdentity();
}

absl::StatusOr<inspect::InspectResult> InspectAs(const JobManagerOptions& options, uid_t uid,
                                                 const inspect::InspectRequest& request) {
  MOBIUS_ASSIGN_OR_RETURN(std::optional<Identity> identity, JobIdentity(options, uid));
  launch::UserInspectOptions uo;
  uo.binary =
      options.inspect_binary.empty()
          ? (std::filesystem::path(options.worker_binary).parent_path() / "mobius-inspect").string()
          : options.inspect_binary;
  uo.identity = std::move(identity);
  MOBIUS_ASSIGN_OR_RETURN(inspect::InspectResult result, launch::InspectAsUser(request, uo));
  if (!result.status.ok()) return result.status;
  return result;
}

absl::StatusOr<runtime::CompletionRecord> ReadCompletionAs(const JobManagerOptions& options,
                                                           uid_t uid,
                                                           const std::string& checkpoint_dir) {
  inspect::InspectRequest request;
  request.completion_dir = checkpoint_dir;
  MOBIUS_ASSIGN_OR_RETURN(inspect::InspectResult result, InspectAs(options, uid, request));
  runtime::CompletionRecord record;
  record.job_id = result.completion_job_id;
  record.final_checkpoint = result.completion_checkpoint;
  record.steps_done = result.completion_steps;
  record.finished_unix_ms = result.completion_unix_ms;
  return record;
}

absl::StatusOr<model::ModelConfig> CheckSpecFilesAs(const JobManagerOptions& options, uid_t uid,
                                                    const jobspec::JobSpec& spec,
                                                    SpecCheckCache* cache,
                                                    const std::string& job_id) {
  inspect::InspectRequest request;
  request.spec_json = jobspec::JobSpecToJson(spec);
  request.checkpoint_dir = spec.checkpoint.dir;
  request.job_id = job_id;  // empty (a new job): any owner record is another job's
  if (cache != nullptr) {
    if (std::optional<model::ModelConfig> known = cache->Find(uid, request.spec_json)) {
      return *std::move(known);
    }
  }
  MOBIUS_ASSIGN_OR_RETURN(inspect::InspectResult result, InspectAs(options, uid, request));
  MOBIUS_ASSIGN_OR_RETURN(
      model::ModelConfig config,
      model::ParseModelConfig(result.model_config_json, spec.model_dir + "/config.json"));
  if (cache != nullptr) cache->Add(uid, request.spec_json, config);
  return config;
}

std::optional<model::ModelConfig> SpecCheckCache::Find(uid_t uid, const std::string& spec_json) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find({uid, spec_json});
  if (it == entries_.end()) return std::nullopt;
  if (absl::Now() - it->second.added > kSpecCheckTtl) {
    entries_.erase(it);
    return std::nullopt;
  }
  return it->second.config;
}

void SpecCheckCache::Add(uid_t uid, const std::string& spec_json,
                         const model::ModelConfig& config) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = now - it->second.added > kSpecCheckTtl ? entries_.erase(it) : std::next(it);
  }
  if (entries_.size() >= 256) entries_.erase(entries_.begin());
  entries_[{uid, spec_json}] = {config, now};
}

}  // namespace mobius::jobs
