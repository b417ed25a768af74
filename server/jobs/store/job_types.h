// Job records and the job state machine: the plain data the durable job store (job_store.h) keeps
// and the scheduler, supervisor and daemon pass around. No SQLite, proto or gRPC types: the daemon
// converts to and from the wire (server/rpc/).
//
// State machine (anything else is FAILED_PRECONDITION):
//   QUEUED  -> RUNNING | CANCELLED | FAILED
//   RUNNING -> QUEUED (requeued: restart, preemption, daemon restart) | SUCCEEDED | FAILED |
//   CANCELLED
// SUCCEEDED, FAILED and CANCELLED are terminal.
//
// Thread-safety: plain values and pure functions.
#ifndef MOBIUS_SERVER_JOBS_STORE_JOB_TYPES_H_
#define MOBIUS_SERVER_JOBS_STORE_JOB_TYPES_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mobius::jobs {

enum class JobState : int {
  kQueued = 0,
  kRunning = 1,
  kSucceeded = 2,
  kFailed = 3,
  kCancelled = 4
};
inline constexpr int kNumJobStates = 5;

// "QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED" (also the text stored in the database).
absl::string_view JobStateName(JobState state);
// Inverse of JobStateName (exact, upper case); INVALID_ARGUMENT naming the text otherwise.
absl::StatusOr<JobState> ParseJobState(absl::string_view name);

bool IsTerminal(JobState state);
bool IsLegalTransition(JobState from, JobState to);
// OK, or FAILED_PRECONDITION "job J: illegal transition RUNNING -> RUNNING".
absl::Status CheckTransition(absl::string_view job_id, JobState from, JobState to);

// A set of states as a bit mask (bit i = JobState i); value type, cheap to copy.
class JobStateSet {
 public:
  JobStateSet() = default;
  JobStateSet(std::initializer_list<JobState> states) {
    for (JobState s : states) Add(s);
  }
  static JobStateSet All() { return FromMask((1u << kNumJobStates) - 1); }
  static JobStateSet FromMask(uint32_t mask) {
    JobStateSet set;
    set.mask_ = mask & ((1u << kNumJobStates) - 1);
    return set;
  }

  void Add(JobState s) { mask_ |= 1u << static_cast<int>(s); }
  bool Contains(JobState s) const { return (mask_ >> static_cast<int>(s)) & 1u; }
  bool empty() const { return mask_ == 0; }
  uint32_t mask() const { return mask_; }
  std::vector<JobState> states() const;  // in enum order

  friend bool operator==(JobStateSet a, JobStateSet b) { return a.mask_ == b.mask_; }

 private:
  uint32_t mask_ = 0;
};

// One job as stored. Times are Unix milliseconds, 0 = not yet.
struct JobRecord {
  std::string id;             // "j-000123"; assigned by the store, never reused
  std::string submission_id;  // client-chosen idempotency key; empty = none
  uint32_t uid = 0;           // the submitter's uid (from the socket peer credentials)
  std::string user;           // the submitter's user name, for display
  std::string name;           // from the spec
  int32_t priority = 0;       // higher runs first
  std::string spec_json;      // the canonical JSON of the job spec (opaque to the store)
  JobState state = JobState::kQueued;
  std::string state_reason;  // human-readable why (pending reason, failure, cancel by whom)
  int64_t created_unix_ms = 0;
  int64_t started_unix_ms = 0;   // the latest QUEUED -> RUNNING
  int64_t finished_unix_ms = 0;  // entering a terminal state
  int32_t restarts = 0;
  std::vector<int> gpus;        // device indices of the current or last run
  std::string plan_json;        // the planner's output for the current or last run
  std::string checkpoint;       // last complete checkpoint directory; empty = none
  int64_t checkpoint_step = 0;  // the optimizer step that checkpoint holds
  int64_t steps_done = 0;       // the latest reported step (falls back after a resume)
  int64_t total_steps = 0;
  bool cancel_requested = false;

  friend bool operator==(const JobRecord&, const JobRecord&) = default;
};

// One row of the transitions table.
struct TransitionRecord {
  int64_t seq = 0;  // global insertion order
  std::string job_id;
  JobState from = JobState::kQueued;
  JobState to = JobState::kQueued;
  std::string reason;
  int64_t unix_ms = 0;

  friend bool operator==(const TransitionRecord&, const TransitionRecord&) = default;
};

// What a worker reports after each optimizer step.
struct StepReportRow {
  int64_t step = 0;  // 1-based optimizer step just completed
  int64_t total_steps = 0;
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  int64_t tokens = 0;  // tokens in this step
  double tokens_per_second = 0;
  double step_seconds = 0;
  double compute_seconds = 0;
  int64_t h2d_bytes = 0;
  int64_t d2h_bytes = 0;
  double stall_seconds = 0;
  double optimizer_seconds = 0;
  int64_t unix_ms = 0;
  std::optional<double> eval_loss;  // eval steps only
  double loss_scale = 0;            // fp16: the step's dynamic loss scale (0: bf16)
  bool skipped = false;             // fp16: the step overflowed and updated nothing

  friend bool operator==(const StepReportRow&, const StepReportRow&) = default;
};

struct LogLine {
  int64_t seq = 0;  // per-job, 1-based, assigned by the store (ignored on append)
  int64_t unix_ms = 0;
  std::string source;  // e.g. "worker-0", "daemon"
  std::string text;    // one line, without the newline

  friend bool operator==(const LogLine&, const LogLine&) = default;
};

// A user's limits; 0 = no limit (scheduler/resources.h UserQuota says what each means).
struct Quota {
  uint32_t uid = 0;
  int32_t max_gpus = 0;
  int32_t max_running_jobs = 0;
  int32_t max_queued_jobs = 0;
  int64_t max_host_bytes = 0;

  friend bool operator==(const Quota&, const Quota&) = default;
};

// One run's use of the node (accounting): from the moment the scheduler grants its GPUs to the
// moment they are free again (its workers gone). A job has one record per run (a restart or a
// requeue after preemption starts a new one); (job_id, started_unix_ms) is the key.
struct UsageRecord {
  std::string job_id;
  int64_t started_unix_ms = 0;
  uint32_t uid = 0;
  std::string user;     // the submitter's name when it resolved
  int64_t gid = -1;     // the submitter's primary group at the start; -1: unknown
  std::string group;    // its name when it resolved
  int32_t gpus = 0;     // GPUs held
  int64_t host_bytes = 0;  // the plan's host-memory estimate for the run
  // Ended: the run's end. Open: the last time the daemon saw it holding its GPUs (a daemon killed
  // mid-run leaves it there; the next start closes the record at that time).
  int64_t last_unix_ms = 0;
  bool ended = false;
  int64_t tokens = 0;   // tokens trained in this run (its step reports)
  int64_t steps = 0;    // optimizer steps done in this run
  // The integral of the job cgroup's memory.current over the run, in byte-seconds; 0 without a
  // cgroup (the estimate above is then the only host-memory figure).
  double measured_host_byte_seconds = 0;

  double seconds() const { return static_cast<double>(last_unix_ms - started_unix_ms) / 1e3; }
  double gpu_seconds() const { return gpus * seconds(); }
  // The plan's estimate times the run's wall time.
  double host_gib_seconds() const {
    return static_cast<double>(host_bytes) / (1 << 30) * seconds();
  }

  friend bool operator==(const UsageRecord&, const UsageRecord&) = default;
};

// One state-changing call, as the daemon saw it.
struct AuditEntry {
  int64_t seq = 0;  // assigned by the store (ignored on append)
  int64_t unix_ms = 0;
  uint32_t uid = 0;
  std::string method;  // e.g. "JobService.CancelJob"
  std::string target;  // e.g. a job id; may be empty
  std::string detail;
  absl::StatusCode result = absl::StatusCode::kOk;

  friend bool operator==(const AuditEntry&, const AuditEntry&) = default;
};

struct ListJobsFilter {
  std::optional<uint32_t> uid;  // only this user's jobs
  JobStateSet states;           // empty = every state
};

struct ListJobsPage {
  std::vector<JobRecord> jobs;  // in creation order
  std::string next_page_token;  // empty = no more
};

// "j-000123" for 123 (at least six digits), and back. ParseJobId accepts only the canonical form
// (INVALID_ARGUMENT otherwise), so one job has exactly one id.
std::string FormatJobId(int64_t seq);
absl::StatusOr<int64_t> ParseJobId(absl::string_view id);

}  // namespace mobius::jobs

#endif  // MOBIUS_SERVER_JOBS_STORE_JOB_TYPES_H_
