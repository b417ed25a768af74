// Internal to the job manager (job_manager.cc: the public API; job_supervisor.cc: scheduling and
// supervision): the manager's state and the helpers both halves use. Not a public interface.
#ifndef MOBIUS_SERVER_JOBS_SERVICE_JOB_MANAGER_STATE_H_
#define MOBIUS_SERVER_JOBS_SERVICE_JOB_MANAGER_STATE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "host/scheduler/scheduler.h"
#include "server/jobs/service/job_identity.h"
#include "server/jobs/service/job_manager.h"
#include "server/jobs/service/pending_transitions.h"
#include "host/run/run_setup.h"
#include "server/jobs/service/store_write_log.h"
#include "server/jobs/service/usage_ledger.h"
#include "server/jobs/store/job_store.h"
#include "host/planner/api/make_plan.h"
#include "host/launch/dataset_prep.h"
#include "host/launch/job_cgroup.h"
#include "host/launch/launcher.h"
#include "common/run/run_config.h"

namespace mobius::jobs {
namespace internal {

int64_t NowMs();
std::string GpuList(const std::vector<int>& gpus);
// What the store keeps as a run's plan (stages, mapping, predicted step time, memory, emulation).
std::string PlanSummaryJson(const planner::PlanReport& report, const runtime::RunConfig& run);
double PredictedFromPlanJson(const std::string& plan_json);
// A state change refused for good (an illegal transition): nothing is kept, say so.
void LogIfError(const std::string& id, const absl::Status& st);

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
  // State changes the store has not taken yet (job_manager.h, "State the store cannot write").
  PendingTransitions pending ABSL_GUARDED_BY(mu);
  // Jobs the scheduler started but whose RUNNING the store refused: they wait in the queue, and
  // the retrier reschedules.
  std::map<std::string, std::string> start_refused ABSL_GUARDED_BY(mu);  // id -> the error
  absl::CondVar retry_wake;  // something to retry, or stopping
  std::thread retrier;       // RetryLoop; taken by Shutdown
  StoreWriteLog write_log;   // step reports, log lines, checkpoint records the store refused
  UsageLedger usage ABSL_GUARDED_BY(mu);  // runs' accounting not yet in the store, open runs
  std::map<uint32_t, double> share_factors ABSL_GUARDED_BY(mu);  // the last round's, by uid
  // The decayed GPU-seconds of the runs only the store holds (finished and written), by uid, as of
  // `at_ms`: they only decay from there (x 2^-(dt / half-life)), so a scheduling round reads the
  // store's history again only when the ledger wrote another finished run (`generation`).
  struct ShareCache {
    int64_t at_ms = -1;  // -1: not computed
    int64_t generation = -1;
    std::map<uint32_t, double> decayed;
  };
  ShareCache share_cache ABSL_GUARDED_BY(mu);

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
  // ---- store writes (job_store_writes.cc)
  // The job as the daemon knows it: the store's record with its pending transitions applied.
  absl::StatusOr<JobRecord> GetJob(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Every job in one of `states` as the daemon knows them (the overlay decides), in creation order.
  absl::StatusOr<std::vector<JobRecord>> JobsInStates(JobStateSet states)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The overlay on a page of ListJobs for `filter` that continued after `after_seq`: records
  // whose state is no longer in the filter leave, pending jobs whose state now is join, by seq.
  absl::Status OverlayPage(const ListJobsFilter& filter, int64_t after_seq, ListJobsPage& page)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Records a state change: in the store when it takes it now (with a daemon log line), else
  // kept pending and written by the retrier. `count_restart`: the change also counts a restart.
  // FAILED_PRECONDITION for a change the job's current state does not allow; other errors only
  // when the store refused for a reason a retry cannot cure.
  absl::Status Transition(const std::string& id, JobState to, const std::string& reason,
                          bool count_restart = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // A change that must be in the store before the daemon acts on it (QUEUED -> RUNNING): the
  // job's pending changes are written first; nothing is kept pending on failure.
  absl::Status TransitionNow(const std::string& id, JobState to, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Writes what it can of the pending transitions, in order per job; true when none are left.
  bool FlushPending() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The retrier thread: flushes with a backoff while anything is pending, and reschedules when a
  // start was refused. Returns when stopping.
  void RetryLoop();
  // Shutdown, after the retrier stopped: a last flush, and an error line per change left.
  void FinalFlush() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Informational writes (step reports, log lines, checkpoints, run info): logged, rate-limited,
  // when they fail (store_write_log.h); `what` in plural.
  void Informational(const std::string& id, const std::string& what, const absl::Status& result) {
    write_log.Record("job " + id, what, result);
  }

  // ---- start-up (job_recovery.cc)
  // The jobs the store has RUNNING: SUCCEEDED when their completion record says so, else requeued
  // (or FAILED when their restarts are used up).
  absl::Status RecoverRunningJobs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // ---- accounting (job_accounting.cc)
  // A started run's record (its GPUs from now), and its progress, touch and end (usage_ledger.h);
  // each reports what accrued to the observer; start, touch and end write what changed (a step
  // only updates memory).
  void StartUsage(const JobRecord& job, const std::vector<int>& gpus, int64_t host_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void StepUsage(const std::string& id, int64_t tokens, int64_t memory_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The run's group (the user's primary group), looked up outside the lock by the supervisor.
  void UsageGroupOf(const std::string& id, uid_t uid, const std::optional<Identity>& identity)
      ABSL_LOCKS_EXCLUDED(mu);
  // Open runs brought up to now (AccrueUsage), and written (TouchUsage: the retrier's interval).
  void AccrueUsage() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void TouchUsage() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void EndUsage(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Writes the ledger's changed records; false when some are left for the retrier.
  bool FlushUsage() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The runs that reached `since` (store rows with the ledger's newer records over them).
  std::vector<UsageRecord> UsageSince(int64_t since_unix_ms, std::optional<uint32_t> uid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Each user's decayed GPU-seconds now: the cached store-only runs, decayed since the cache was
  // made, plus the ledger's runs.
  std::map<uint32_t, double> DecayedUsageNow() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Each request's order_score from its user's fair-share factor and its wait (accounting.h);
  // `created_ms` by job id. Sets share_factors.
  void ScoreRequests(std::vector<JobRequest>& requests,
                     const std::map<std::string, int64_t>& created_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // ---- scheduling (job_scheduling.cc)
  // One scheduling round: the queued jobs' requests (re-planned after a restart, scored for fair
  // share), the scheduler's decisions, preemptions asked, jobs started (RUNNING in the store
  // first), the queue's reasons.
  void Reschedule() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void JoinFinishedSupervisors() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The queued jobs' requests, in the records' order (a job that cannot be planned fails).
  std::vector<JobRequest> QueuedRequests(const std::vector<JobRecord>& queued_jobs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  jobs::Quotas CurrentQuotas();
  void Preempt(const std::vector<PreemptDecision>& preempt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Starts what the round decided; a start the store refuses waits at the head of the queue.
  void StartJobs(const std::vector<StartDecision>& start, const std::vector<JobRequest>& requests,
                 const std::vector<JobRecord>& queued_jobs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // A started job's run (job_supervisor.cc): its user's identity and state directory, the dataset
  // tokenized, the plan and run config (SetUpRun), recorded in the store.
  struct PreparedRun {
    std::optional<Identity> identity;
    RunSetup setup;
  };
  absl::StatusOr<PreparedRun> PrepareRun(const std::string& id, const JobRecord& job,
                                         const std::vector<int>& gpus);
  // The run's cgroup (job_cgroup.h; null without cgroups) and its launch options.
  absl::StatusOr<std::unique_ptr<launch::JobCgroup>> MakeJobCgroup(const std::string& id,
                                                                   const RunSetup& setup);
  runtime::LaunchOptions LaunchOptionsOf(const JobRecord& job, const PreparedRun& prepared);
  // Starts the workers, lets a cancel, shutdown or preemption that came meanwhile reach them,
  // and waits for the end.
  absl::StatusOr<runtime::LaunchResult> RunLauncher(const std::string& id,
                                                    const runtime::LaunchOptions& lo);
  void Supervise(std::string id, std::vector<int> gpus);
  void Finish(const std::string& id, const absl::Status& status, int64_t steps);
};

}  // namespace mobius::jobs

#endif  // MOBIUS_SERVER_JOBS_SERVICE_JOB_MANAGER_STATE_H_
