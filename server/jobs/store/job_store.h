// The daemon's durable job store: jobs, their state transitions, step reports, logs, per-user
// quotas and the audit log, in one SQLite file in the state directory (schema.h for the file
// format, WAL mode and what survives which crash).
//
// Every write call is one SQLite transaction: a job is either fully created (and visible to every
// other connection or process) or not at all, and a process killed at any point leaves a file that
// opens with every committed change. Ids are "j-000123", assigned from an AUTOINCREMENT counter and
// never reused.
//
// The store is the single source of truth for job state but makes no policy: who may cancel, when
// to restart, or what a spec means belong to the daemon. It enforces only the state machine
// (job_types.h) and idempotent creation. Errors use canonical codes with the job id or field in the
// message: NOT_FOUND (no such job/quota), INVALID_ARGUMENT (a malformed id, field or page token),
// FAILED_PRECONDITION (an illegal transition), ALREADY_EXISTS (a submission id reused with another
// spec), UNAVAILABLE (the file stayed locked by another process past the busy timeout), DATA_LOSS
// (a damaged file), PERMISSION_DENIED (the file or its directory is not writable).
//
// Ownership: JobStore owns its connection. Several JobStore objects (in one or several processes)
// may open the same file; writes serialise on SQLite's file lock.
// Thread-safety: every method may be called from any thread; calls on one JobStore are serialised
// by an internal mutex (one connection, prepared statements cached on it). Do not keep a JobStore
// across fork(): open a new one in the child.
#ifndef MOBIUS_SERVER_JOBS_STORE_JOB_STORE_H_
#define MOBIUS_SERVER_JOBS_STORE_JOB_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/jobs/store/job_types.h"

namespace mobius::jobs {

namespace sqlite {
class Database;
}

struct JobStoreOptions {
  // How long a call waits for another process's write lock before UNAVAILABLE.
  int busy_timeout_ms = 5000;
  // true: synchronous=FULL, every commit is fsynced (survives power loss). false: NORMAL, commits
  // survive process crashes and SIGKILL but the last ones may be lost on power loss (schema.h).
  bool fsync_every_commit = true;
};

inline constexpr int kDefaultPageSize = 100;
inline constexpr int kMaxPageSize = 1000;
inline constexpr int kMaxReadLimit = 10000;  // StepReports, ReadLogs, ListAudit
inline constexpr size_t kMaxSubmissionIdBytes = 256;

class JobStore {
 public:
  // Creates or opens the store at `path` (its directory must exist). Errors name the file: a file
  // that is not a SQLite database or is damaged -> DATA_LOSS; another application's database or a
  // store written by a newer build -> FAILED_PRECONDITION; unreadable -> PERMISSION_DENIED etc.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const std::string& path,
                                                        const JobStoreOptions& options = {});
  ~JobStore();

  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  const std::string& path() const { return path_; }

  // --- Jobs
  // ---------------------------------------------------------------------------------------

  struct CreateResult {
    JobRecord job;
    bool existed = false;  // an earlier submit with the same (uid, submission_id) and spec
  };
  // Creates a QUEUED job from `record`'s submission_id, uid, user, name, priority, spec_json,
  // state_reason, created_unix_ms and total_steps; every other field starts at its default and
  // `id` is assigned. With a non-empty submission_id the call is idempotent per uid: the same spec
  // again returns the existing job (existed = true), another spec is ALREADY_EXISTS naming the
  // existing job. Atomic across threads, connections and processes (a UNIQUE index decides).
  // `max_queued_jobs` > 0: a new job (not an existing submission) of a user who already has that
  // many QUEUED jobs is RESOURCE_EXHAUSTED naming the limit, counted in the same transaction.
  absl::StatusOr<CreateResult> CreateJob(const JobRecord& record, int32_t max_queued_jobs = 0);

  absl::StatusOr<JobRecord> GetJob(absl::string_view id);

  // A page of jobs in creation order. page_size 0 = kDefaultPageSize, larger than kMaxPageSize is
  // clamped, negative is INVALID_ARGUMENT. page_token is "" or the previous page's
  // next_page_token with the same filter (a keyset cursor: paging never skips or repeats a job,
  // even while jobs are being created).
  absl::StatusOr<ListJobsPage> ListJobs(const ListJobsFilter& filter, int page_size = 0,
                                        absl::string_view page_token = "");

  // Every job in one of `states`, in creation order (daemon start-up: {kQueued, kRunning}).
  absl::StatusOr<std::vector<JobRecord>> JobsInStates(JobStateSet states);

  // Moves the job to `to` if the state machine allows it (FAILED_PRECONDITION otherwise), records
  // the transition with `reason` and `now_unix_ms`, and sets state_reason; entering RUNNING sets
  // started_unix_ms, entering a terminal state sets finished_unix_ms. Returns the updated job.
  absl::StatusOr<JobRecord> Transition(absl::string_view id, JobState to, absl::string_view reason,
                                       int64_t now_unix_ms);
  // The job's transitions, oldest first.
  absl::StatusOr<std::vector<TransitionRecord>> Transitions(absl::string_view id);

  // The GPUs and plan of the current run.
  absl::Status UpdateRunInfo(absl::string_view id, const std::vector<int>& gpus,
                             absl::string_view plan_json);
  // The job's step count once it is known (epochs over a dataset tokenized at start).
  absl::Status SetTotalSteps(absl::string_view id, int64_t total_steps);
  // Records the last complete checkpoint (its directory and step); steps_done becomes at least
  // `step`.
  absl::Status SetCheckpoint(absl::string_view id, absl::string_view dir, int64_t step);
  // Returns the new restart count.
  absl::StatusOr<int32_t> IncrementRestarts(absl::string_view id);
  absl::Status SetCancelRequested(absl::string_view id);

  // --- Step reports and logs
  // ----------------------------------------------------------------------

  // Stores the report and sets the job's steps_done to report.step (and total_steps when the
  // report's is > 0). A step reported again (after a resume from an earlier checkpoint) replaces
  // the older report of that step.
  absl::Status AppendStepReport(absl::string_view id, const StepReportRow& report);
  // Reports with step > after_step, by step, at most `limit` (1..kMaxReadLimit).
  absl::StatusOr<std::vector<StepReportRow>> StepReports(absl::string_view id, int64_t after_step,
                                                         int limit);
  // The report of the job's highest step <= `max_step` (with `eval_only`, of the highest such
  // step that carries an eval_loss); nullopt when there is none. Pass the job's steps_done as
  // `max_step`: after a resume from an earlier checkpoint, older reports of later steps remain.
  absl::StatusOr<std::optional<StepReportRow>> LatestStepReport(absl::string_view id,
                                                                int64_t max_step,
                                                                bool eval_only = false);

  // Appends the lines (their seq is ignored) with consecutive per-job sequence numbers from 1, in
  // one transaction; returns the job's last sequence number (unchanged for an empty vector).
  absl::StatusOr<int64_t> AppendLogs(absl::string_view id, const std::vector<LogLine>& lines);
  // Lines with seq >= from_seq, in order, at most `limit` (1..kMaxReadLimit).
  absl::StatusOr<std::vector<LogLine>> ReadLogs(absl::string_view id, int64_t from_seq, int limit);

  // --- Accounting
  // ---------------------------------------------------------------------------------

  // Creates or replaces the run's record (keyed by job and start time): writes are absolute values,
  // so writing a record again after a failed or repeated write never counts anything twice.
  // NOT_FOUND for an unknown job; INVALID_ARGUMENT for negative counts or an end before the start.
  absl::Status PutUsage(const UsageRecord& record);
  // Records whose run reached `since_unix_ms` or later (last_unix_ms >= since), of one user when
  // `uid` is set, by start time.
  absl::StatusOr<std::vector<UsageRecord>> ListUsage(int64_t since_unix_ms,
                                                     std::optional<uint32_t> uid = std::nullopt);
  // Start-up: every record still open belongs to a run that died with the previous daemon; each is
  // closed at the last time it was seen (its last_unix_ms). Returns how many were closed.
  absl::StatusOr<int> CloseOpenUsage();

  // --- Quotas and audit
  // ---------------------------------------------------------------------------

  // Creates or replaces the user's quota (every limit >= 0, INVALID_ARGUMENT naming it otherwise).
  absl::Status SetQuota(const Quota& quota);
  // NOT_FOUND when the user has none (the caller applies the defaults).
  absl::StatusOr<Quota> GetQuota(uint32_t uid);
  absl::StatusOr<std::vector<Quota>> ListQuotas();  // by uid
  absl::Status DeleteQuota(uint32_t uid);           // NOT_FOUND when there is none

  // Appends an entry (its seq is ignored) and returns the assigned seq.
  absl::StatusOr<int64_t> AppendAudit(const AuditEntry& entry);
  // The newest `limit` entries (1..kMaxReadLimit), newest first.
  absl::StatusOr<std::vector<AuditEntry>> ListAudit(int limit);

 private:
  JobStore(std::string path, std::unique_ptr<sqlite::Database> db);

  const std::string path_;
  absl::Mutex mu_;
  std::unique_ptr<sqlite::Database> db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mobius::jobs

#endif  // MOBIUS_SERVER_JOBS_STORE_JOB_STORE_H_
