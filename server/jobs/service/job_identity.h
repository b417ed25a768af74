// Whose identity a job's processes take, and the daemon's checks of a spec's files with it.
//   - As root (the multi-user mode: the systemd unit): a job runs as the user who submitted it,
//     with that user's primary group and supplementary groups (common/os/identity.h), as Slurm's
//     job steps do; root's own jobs run as root.
//   - Unprivileged (JobManagerOptions::single_user): every job runs as the daemon's user, so only
//     that user and the admins may submit; anyone else is refused with PERMISSION_DENIED saying
//     so.
// The daemon opens no path of a spec itself: CheckSpecFilesAs runs the checks in
// `mobius-inspect` as the job's identity (host/launch/user_inspect.h).
//
// Thread-safety: functions; may be called from any thread.
#ifndef MOBIUS_SERVER_JOBS_SERVICE_JOB_IDENTITY_H_
#define MOBIUS_SERVER_JOBS_SERVICE_JOB_IDENTITY_H_

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/inspect/inspection.h"
#include "common/jobspec/spec.h"
#include "common/model/model_config.h"
#include "common/os/identity.h"
#include "common/run/completion_record.h"
#include "server/jobs/service/job_manager.h"

namespace mobius::jobs {

// OK when `caller` may submit (or plan) jobs on this daemon (see above).
absl::Status CheckMaySubmit(const JobManagerOptions& options, const Caller& caller);

// The identity a job of `uid` runs as; nullopt: this process's own. NOT_FOUND when `uid` has no
// passwd entry (LookUpIdentity), PERMISSION_DENIED when this process cannot switch to it.
absl::StatusOr<std::optional<Identity>> JobIdentity(const JobManagerOptions& options, uid_t uid);

// The identity that owns the job's files in the state directory (users/<uid>/).
Identity JobFilesOwner(const std::optional<Identity>& identity);

// The checks of `request` as `uid`'s job identity: the check child's result, its status folded in
// (the first failed check's code and message, naming the path).
absl::StatusOr<inspect::InspectResult> InspectAs(const JobManagerOptions& options, uid_t uid,
                                                 const inspect::InspectRequest& request);

// The completion record of `checkpoint_dir` (common/run/completion_record.h) as `uid`'s job
// identity reads it (the daemon may not read the user's directory itself): the daemon's
// JobManagerOptions::read_completion.
absl::StatusOr<runtime::CompletionRecord> ReadCompletionAs(const JobManagerOptions& options,
                                                           uid_t uid,
                                                           const std::string& checkpoint_dir);

// Submit's and Plan's checks of `spec` (normalised) as `uid`: validation with the file checks,
// the model config (returned, for the planner), a text dataset's files, the checkpoint directory
// when the spec names one (another job's is refused). `job_id`: the job a stored spec belongs to
// (its own checkpoint directory is fine: the re-plan after a restart); empty for a new job.
//
// A passed check is remembered for kSpecCheckTtl per (uid, spec): a burst of submits of one spec
// (a sweep, a scheduler's retries) starts one check child, not one each. That cannot let a job
// read what its user may not: every run checks its files again as the user (SetUpRun) and its
// processes open them as the user. Failures are not remembered (a user fixing a permission
// resubmits at once). `cache` may be null (no memory).
class SpecCheckCache;
inline constexpr absl::Duration kSpecCheckTtl = absl::Seconds(10);
absl::StatusOr<model::ModelConfig> CheckSpecFilesAs(const JobManagerOptions& options, uid_t uid,
                                                    const jobspec::JobSpec& spec,
                                                    SpecCheckCache* cache = nullptr,
                                                    const std::string& job_id = "");

// The passed checks above, by (uid, spec JSON), at most 256, each for kSpecCheckTtl.
// Thread-safe.
class SpecCheckCache {
 public:
  std::optional<model::ModelConfig> Find(uid_t uid, const std::string& spec_json);
  void Add(uid_t uid, const std::string& spec_json, const model::ModelConfig& config);

 private:
  struct Entry {
    model::ModelConfig config;
    absl::Time added;
  };
  absl::Mutex mu_;
  std::map<std::pair<uid_t, std::string>, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mobius::jobs

#endif  // MOBIUS_SERVER_JOBS_SERVICE_JOB_IDENTITY_H_
