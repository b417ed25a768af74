// Internal to the job manager (job_manager.cc: the public API; job_supervisor.cc: scheduling and
// supervision): the manager's state and the helpers both halves use. Not a public interface.
#ifndef MOBIUS_SERVER_JOBS_SERVICE_JOB_MANAGER_STATE_H_
#define MOBIUS_SERVER_JOBS_SERVICE_JOB_MANAGER_STATE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/jobs/scheduler/scheduler.h"
#include "server/jobs/service/job_identity.h"
#include "server/jobs/service/job_manager.h"
#include "server/jobs/store/job_store.h"
#include "server/planner/api/make_plan.h"
#include "server/launch/dataset_prep.h"
#include "server/launch/launcher.h"
#include "common/run/run_config.h"

namespace mobius::jobs {
namespace internal {

int64_t NowMs();
std::string GpuList(const std::vector<int>& gpus);
// What the store keeps as a run's plan (stages, mapping, predicted step time, memory, emulation).
std::string PlanSummaryJson(const planner::PlanReport& report, const runtime::RunConfig& run);
double PredictedFromPlanJson(const std::string& plan_json);

}  // namespace internal

struct JobManager::State {
  JobManagerOptions options;
  std::unique_ptr<JobStore> store;
  Scheduler scheduler;  // set in Create from options.preemption
  SpecCheckCache spec_checks;  // Submit's passed file checks (job_identity.h)

  struct Running {
    std::vector<int> gpus;
    int64_t host_bytes = 0, pinned_bytes = 0;
    uint32_t uid = 0;
    int32_t priority = 0;
    int64_t seq = 0;
    std::shared_ptr<runtime::Launcher> launcher;  // set once the workers are spawned
    bool cancel = false;         // the user cancelled
    std::string cancelled_by;
    bool shutdown = false;       // the daemon is stopping: requeue
    std::string preempted_for;   // checkpointing to make room for this job: requeue
    std::thread thread;
  };

  absl::Mutex mu;
  absl::CondVar changed;
  int64_t version ABSL_GUARDED_BY(mu) = 0;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::map<std::string, Running> running ABSL_GUARDED_BY(mu);
  std::map<std::string, QueuedDecision> queued ABSL_GUARDED_BY(mu);
  std::map<std::string, JobRequest> estimates ABSL_GUARDED_BY(mu);
  std::vector<std::thread> finished ABSL_GUARDED_BY(mu);

  void Bump() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    ++version;
    changed.SignalAll();
  }
  // A "daemon" line in the job's log (and glog).
  void DaemonLog(const std::string& id, const std::string& text);
  // How job `id`'s text dataset is tokenized (cached in its user's directory, state_dirs.h; progress in the
  // job's log); CANCELLED / ABORTED when the job is cancelled or stopped meanwhile.
  launch::DatasetPrepOptions DatasetOptions(const std::string& id, uid_t uid);
  // An audit-log entry for a state-changing call ("JobService." + method).
  void Audit(const Caller& c, const std::string& method, const std::string& target,
             const std::string& detail, const absl::Status& result);
  // Store transition + daemon log line.
  absl::Status Transition(const std::string& id, JobState to, const std::string& reason);

  void Reschedule() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void Supervise(std::string id, std::vector<int> gpus);
  void Finish(const std::string& id, const absl::Status& status, int64_t steps);
};

}  // namespace mobius::jobs

#endif  // MOBIUS_SERVER_JOBS_SERVICE_JOB_MANAGER_STATE_H_
