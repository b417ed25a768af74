// Start-up: what becomes of the jobs the store still has RUNNING (job_manager.h, "restart").
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/jobspec/json.h"
#include "common/run/completion_record.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "server/jobs/service/job_dirs.h"
#include "server/jobs/service/job_manager_state.h"

namespace mobius::jobs {
namespace {

// The job's completion record when it proves the run finished: written for this job id, with at
// least the job's total steps. Anything else (none, unreadable, another job's) is "not completed".
std::optional<runtime::CompletionRecord> CompletedRun(const JobManagerOptions& options,
                                                      const JobRecord& job,
                                                      const jobspec::JobSpec& spec) {
  const std::string dir = JobCheckpointDir(options, job, spec);
  absl::StatusOr<runtime::CompletionRecord> record = options.read_completion
                                                         ? options.read_completion(job, dir)
                                                         : runtime::ReadCompletionRecord(dir);
  if (!record.ok()) {
    if (!absl::IsNotFound(record.status())) {
      LOG(WARNING) << "job " << job.id << ": its completion record cannot be used ("
                   << record.status() << "): taken as not completed";
    }
    return std::nullopt;
  }
  if (record->job_id != job.id) {
    LOG(WARNING) << "job " << job.id << ": the completion record in " << dir << " is job "
                 << record->job_id << "'s: taken as not completed";
    return std::nullopt;
  }
  if (record->steps_done <= 0 || record->steps_done < job.total_steps) {
    LOG(WARNING) << "job " << job.id << ": its completion record in " << dir << " has "
                 << record->steps_done << " steps of " << job.total_steps
                 << ": taken as not completed";
    return std::nullopt;
  }
  return *record;
}

}  // namespace

absl::Status JobManager::State::RecoverRunningJobs() {
  MOBIUS_ASSIGN_OR_RETURN(std::vector<JobRecord> was_running,
                          store->JobsInStates({JobState::kRunning}));
  for (const JobRecord& job : was_running) {
    absl::StatusOr<jobspec::JobSpec> spec = jobspec::JobSpecFromJson(job.spec_json);
    absl::Status st;
    if (std::optional<runtime::CompletionRecord> done =
            spec.ok() ? CompletedRun(options, job, *spec) : std::nullopt) {
      if (!done->final_checkpoint.empty()) {
        Informational(job.id, "checkpoint records",
                      store->SetCheckpoint(job.id, done->final_checkpoint, done->steps_done));
      }
      st = Transition(job.id, JobState::kSucceeded,
                      absl::StrCat("completed before the daemon stopped: ",
                                   runtime::DescribeCompletionRecord(*done)));
    } else {
      const int max_restarts = spec.ok() ? spec->max_restarts : 0;
      if (job.restarts >= max_restarts) {
        st = Transition(job.id, JobState::kFailed,
                        absl::StrCat("the daemon stopped while it ran and its ", max_restarts,
                                     " restart(s) are used up"));
      } else {
        st = Transition(
            job.id, JobState::kQueued,
            job.checkpoint.empty()
                ? std::string("the daemon stopped while it ran; starts over")
                : absl::StrCat("the daemon stopped while it ran; resumes from ", job.checkpoint),
            /*count_restart=*/true);
      }
    }
    if (!st.ok()) LOG(ERROR) << "job " << job.id << ": after the restart: " << st;
  }
  return absl::OkStatus();
}

}  // namespace mobius::jobs
