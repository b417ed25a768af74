// JobManager: mobiusd's job service, as plain C++ (the gRPC adapter is server/rpc/job_service.h).
//
// It ties together the durable store (server/jobs/store), the admission scheduler
// (host/scheduler), the planner and the runtime's launcher (host/launch/launcher.h):
//   Submit   validate the spec (server rules: absolute paths, files exist: checked as the
//            submitting user by a child process, job_identity.h), plan it on the node to
//            learn what it needs, refuse what can never fit (FAILED_PRECONDITION with the numbers),
//            store it QUEUED (idempotent per user and submission id), schedule;
//   schedule whenever something changes: the scheduler decides which queued jobs start on which
//            GPUs; each started job gets a supervisor thread that plans it on its GPUs, builds the
//            run config (with link emulation on the CPU backend), runs the launcher and records
//            every step report, log line and checkpoint in the store;
//   ends     SUCCEEDED / FAILED (with the launcher's reason) / CANCELLED; a failure is retried up to
//            max_restarts from the last complete checkpoint, except errors that would repeat
//            (invalid input, a device cap too small for the plan);
//   preempt  with options.preemption, the scheduler may name lower-priority running jobs for a
//            waiting one: they checkpoint and stop (Launcher::RequestCheckpointAndStop) and are
//            requeued, not counted as restarts;
//   restart  at construction, jobs the store still has RUNNING (the daemon died under them, or
//            could not record their end) are looked at: one whose checkpoint directory
//            (JobCheckpointDir, job_dirs.h) holds a completion record for that job id with at
//            least its total steps (read through options.read_completion) is SUCCEEDED
//            ("completed before the daemon stopped: <record>"); the others are requeued to resume
//            from their checkpoint, counted as a restart (FAILED once the restarts are used up);
//   shutdown running jobs finish their step, write a checkpoint and stop (cancelled after
//            checkpoint_grace), and are requeued to resume from it when the daemon comes back.
//   account  each run's usage (GPU-seconds, host-memory GiB-seconds, tokens, steps) from the start
//            of its GPUs to their release, in the store's usage table (usage_ledger.h: open runs
//            updated in memory at each step, written every usage_interval; a run still open at a
//            restart was cut by the daemon's death and is closed at its last write); the scheduler
//            orders equal
//            priorities by fair share over it (accounting.h);
// Access: a caller sees and cancels its own jobs; admins (configured uids, or root) all of them.
// Every state-changing call is written to the store's audit log.
//
// State: the store is the truth for jobs; the in-memory state (running launchers, the last
// scheduling decisions, state changes not yet written) is guarded by one mutex, and every change
// goes through it.
//
// State the store cannot write (its disk full, an I/O error): a job's state change that the store
// refuses with an error a retry may cure (pending_transitions.h, StoreWriteMayRecover) is kept in
// memory, logged once per failure streak per job (LOG(ERROR) with the job, the change and the
// error), and written, in order, by a background retrier (from store_retry_initial, doubling up to
// store_retry_max) as soon as the store takes it. Meanwhile the daemon serves the state it knows:
// Get, List, Watch, StreamLogs, Cancel and the scheduler see the store's records with the pending
// changes applied (state, reason, times, restarts). So a job that ends while the disk is full is
// SUCCEEDED/FAILED/CANCELLED for every caller at once, gives back its GPUs and is never started
// again; a cancel still stops the workers and the job ends CANCELLED in memory. A job is only
// started once RUNNING is written (QUEUED -> RUNNING is never kept pending): otherwise it stays
// queued ("the job store cannot be written: ...") and the retrier tries again. Step reports, log
// lines and checkpoint records that cannot be written are dropped and logged (store_write_log.h:
// the first of a streak, then one line a minute). Shutdown tries a last write of what is pending
// and logs each change it could not write; after a restart those jobs are found RUNNING (or as
// they were before) and handled as above, so a run that completed is still SUCCEEDED, while a
// cancel or failure that was never written is not remembered (the job is requeued).
// Thread-safety: all public methods may be called from any thread (gRPC handler threads).
#ifndef MOBIUS_SERVER_JOBS_SERVICE_JOB_MANAGER_H_
#define MOBIUS_SERVER_JOBS_SERVICE_JOB_MANAGER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/jobspec/spec.h"
#include "common/run/completion_record.h"
#include "server/jobs/accounting/accounting.h"
#include "host/scheduler/resources.h"
#include "server/jobs/service/job_observer.h"
#include "host/run/job_planning.h"
#include "server/jobs/store/job_store.h"
#include "host/topology/analysis.h"
#include "host/topology/topology.h"

namespace mobius::launch {
class JobCgroupRoot;
}

namespace mobius::jobs {

struct Caller {
  uid_t uid = 0;
  std::string user;   // name for display ("uid 1001" when unknown)
  bool admin = false;
};

struct JobManagerOptions {
  std::string state_dir;            // jobs.db and jobs/<id>/ (runs, default checkpoints)
  std::string worker_binary;        // mobius-worker
  std::string inspect_binary;       // mobius-inspect (job_identity.h); empty: next to the worker
  topology::Topology topology;
  topology::TopologyFacts facts;
  NodeResources node;               // GPUs, allow-list, host and pinned budgets
  UserQuota default_quota;          // 0 = no limit
  bool emulate_links = true;        // CPU backend: emulate the PCIe links of the topology
  // The workers run on the CPU backend (no CUDA device, or links emulated), so the GPUs' memory is
  // host memory: admission counts it (job_planning.h).
  bool devices_in_host_memory = true;
  double link_scale = 1.0;          // emulated link bandwidth factor
  absl::Duration kill_grace = absl::Seconds(5);
  // The launcher's watchdog (host/launch/launcher.h): frozen workers, hung jobs; zero: off.
  absl::Duration heartbeat_timeout = absl::Seconds(60);
  absl::Duration step_timeout = absl::Seconds(1800);
  // Shutdown: how long a running job may take to finish its step and checkpoint before it is
  // cancelled (SIGTERM, then SIGKILL after kill_grace).
  absl::Duration checkpoint_grace = absl::Seconds(60);
  // Preemption: how long a preempted job may take to finish its step and checkpoint before it is
  // stopped the same way.
  absl::Duration preemption_grace = absl::Seconds(60);
  // Jobs' stores are anonymous memory files (host_store.h); named store files that earlier
  // versions left here are removed at start-up (CleanOrphanStores).
  std::string shm_dir = "/dev/shm";
  // Threads of the tokenizer that prepares a text dataset (state_dir/datasets); 0: half the cores
  // (running jobs' optimizers share them).
  int tokenize_threads = 0;
  // A higher-priority job that cannot start may preempt lower-priority running jobs: they
  // checkpoint, stop and are requeued (scheduler.h, rule 7).
  bool preemption = false;
  JobObserver* observer = nullptr;  // not owned; metrics (job_observer.h); may be null
  // The daemon runs unprivileged: every job runs as its user, and only that user and the admins
  // may submit (job_identity.h). Otherwise (root) each job runs as its submitter.
  bool single_user = false;
  // Per-job cgroup v2 isolation (host/launch/job_cgroup.h): each run's workers in a cgroup of
  // their own with memory.max from the plan's host estimate; null: none. Not owned.
  launch::JobCgroupRoot* cgroups = nullptr;
  // State changes the store cannot write are retried after store_retry_initial, then after twice
  // as long each time, at most store_retry_max apart (see "State the store cannot write" above).
  absl::Duration store_retry_initial = absl::Milliseconds(500);
  absl::Duration store_retry_max = absl::Seconds(30);
  // Start-up: reads the completion record of a job the store still has RUNNING from its
  // checkpoint directory (JobCheckpointDir). Empty: runtime::ReadCompletionRecord(checkpoint_dir),
  // with the daemon's identity. A seam: the read may go through a process running as the job's
  // user instead. Any error (NOT_FOUND: none) means "not completed".
  std::function<absl::StatusOr<runtime::CompletionRecord>(const JobRecord& job,
                                                          const std::string& checkpoint_dir)>
      read_completion;
  // Fair share among queued jobs of equal priority (accounting.h; docs/scheduler.md).
  FairShareOptions fair_share;
  // Accounting: open runs are brought up to date and written this often (a daemon killed mid-run
  // loses at most this much of a run's usage; step reports update it too).
  absl::Duration usage_interval = absl::Seconds(15);
};

// How the manager plans its jobs: emulated GPUs live in host memory; the node's host budget is
// what jobs may use.
inline PlanJobOptions PlanOptionsOf(const JobManagerOptions& o) {
  PlanJobOptions p;
  p.devices_in_host_memory = o.devices_in_host_memory;
  p.host_memory_bytes = o.node.host_bytes;
  return p;
}

// A job as callers see it: the stored record plus what only the running daemon knows.
struct JobView {
  JobRecord record;
  int queue_position = 0;          // QUEUED only, 1-based
  std::string pending_reason;      // QUEUED only
  std::optional<StepReportRow> last_step;  // the highest step's report
  std::optional<StepReportRow> last_eval;  // the highest step's report that has an eval_loss
  double predicted_step_seconds = 0;  // from the plan of the current or last run
  double fair_share = 0;           // QUEUED only: its user's fair-share factor (1: no usage)
};

// Accounting (issue 36): what `mobius usage` asks.
struct UsageQuery {
  std::optional<uint32_t> uid;  // one user; unset: the caller (admins: everyone)
  int64_t since_unix_ms = 0;    // the window's start; its end is now
  bool runs = false;            // also each run's record
};

struct UsageView {
  UsageReport report;             // per user; per group too when an admin asks about everyone
  // With UsageQuery::runs: the runs in the window, by start; the newest kMaxReadLimit of them
  // (a response stays well under gRPC's message limit), `runs_omitted` the older ones left out.
  std::vector<UsageRecord> runs;
  int64_t runs_omitted = 0;
  std::map<uint32_t, double> fair_share;  // each listed user's fair-share factor now
};

// What WatchJob streams.
struct JobEvent {
  enum class Kind { kState, kStep, kQueue };
  Kind kind = Kind::kState;
  JobState state = JobState::kQueued;  // kState
  std::string reason;                  // kState: the transition's reason; kQueue: pending reason
  int64_t unix_ms = 0;
  StepReportRow step;                  // kStep
  int queue_position = 0;              // kQueue
};

struct NodeStatus {
  struct Gpu {
    int index = 0;
    std::string name;
    int64_t memory_bytes = 0;
    bool allowed = true;
    std::string job_id;  // running job holding it, empty when free
  };
  std::vector<Gpu> gpus;
  int64_t host_bytes = 0, host_used_bytes = 0;
  int64_t pinned_bytes = 0, pinned_used_bytes = 0;
  bool draining = false;
  int queued = 0, running = 0;
};

class JobManager {
 public:
  // Opens (or creates) the store in state_dir, cleans orphaned host stores, requeues jobs that were
  // RUNNING, and schedules. Errors: the store's (DATA_LOSS, FAILED_PRECONDITION, ...).
  static absl::StatusOr<std::unique_ptr<JobManager>> Create(JobManagerOptions options);
  ~JobManager();  // Shutdown()

  absl::StatusOr<JobView> Submit(const Caller& caller, const std::string& submission_id,
                                 jobspec::JobSpec spec);
  // NOT_FOUND, or PERMISSION_DENIED for another user's job (unless admin).
  absl::StatusOr<JobView> Get(const Caller& caller, const std::string& id);
  // Non-admins see only their own jobs (an explicit uid filter for another user: PERMISSION_DENIED).
  absl::StatusOr<std::pair<std::vector<JobView>, std::string>> List(const Caller& caller,
                                                                    ListJobsFilter filter,
                                                                    int page_size,
                                                                    const std::string& page_token);
  // QUEUED: cancelled now. RUNNING: workers are stopped (SIGTERM, SIGKILL after the grace period)
  // and the job ends CANCELLED. Terminal: FAILED_PRECONDITION.
  absl::StatusOr<JobView> Cancel(const Caller& caller, const std::string& id);

  // Streams the job's state changes (those not yet written to the store included), queue updates
  // and step reports, ending after the terminal state (or when `emit` or `idle` returns false, or
  // at shutdown: UNAVAILABLE). `idle`, when set, is called each time the stream has looked for
  // news (about once a second) and found none: the gRPC adapter sends its heartbeats from there.
  absl::Status Watch(const Caller& caller, const std::string& id,
                     const std::function<bool(const JobEvent&)>& emit,
                     const std::function<bool()>& idle = {});
  // Log lines from `from_seq`; with `follow`, keeps streaming until the job is terminal (as the
  // daemon knows it) and every line was sent. `idle` as for Watch.
  absl::Status StreamLogs(const Caller& caller, const std::string& id, int64_t from_seq,
                          bool follow, const std::function<bool(const LogLine&)>& emit,
                          const std::function<bool()>& idle = {});

  // Dry run: the spec validated as for Submit and planned on this node's GPUs (nothing is stored).
  // Returns {plan JSON, a readable summary}.
  absl::StatusOr<std::pair<std::string, std::string>> Plan(const Caller& caller,
                                                           jobspec::JobSpec spec);

  // Admin only (PERMISSION_DENIED otherwise).
  absl::Status SetDraining(const Caller& caller, bool draining);
  absl::Status SetQuota(const Caller& caller, const Quota& quota);
  absl::StatusOr<std::vector<Quota>> Quotas(const Caller& caller);

  // Usage per user (and group) over a window, from the store and the runs in progress. A user
  // sees their own: another uid is PERMISSION_DENIED unless the caller is an admin.
  absl::StatusOr<UsageView> Usage(const Caller& caller, const UsageQuery& query);

  NodeStatus Status();

  // Stops scheduling, stops running jobs and requeues them (they resume from their checkpoint at
  // the next start), stops the retrier, tries a last write of the pending state changes and logs
  // each one it could not write; idempotent.
  void Shutdown();

  struct State;

 private:
  explicit JobManager(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace mobius::jobs

#endif  // MOBIUS_SERVER_JOBS_SERVICE_JOB_MANAGER_H_
