#include "server/jobs/service/job_identity.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/jobspec/json.h"
#include "common/model/model_config_parse.h"
#include "common/status_macros.h"
#include "server/launch/user_inspect.h"

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

absl::StatusOr<model::ModelConfig> CheckSpecFilesAs(const JobManagerOptions& options, uid_t uid,
                                                    const jobspec::JobSpec& spec) {
  inspect::InspectRequest request;
  request.spec_json = jobspec::JobSpecToJson(spec);
  request.checkpoint_dir = spec.checkpoint.dir;  // a new job: any owner record is another job's
  MOBIUS_ASSIGN_OR_RETURN(inspect::InspectResult result, InspectAs(options, uid, request));
  return model::ParseModelConfig(result.model_config_json, spec.model_dir + "/config.json");
}

}  // namespace mobius::jobs
