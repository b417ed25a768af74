// Jobs and their transitions. Step reports, logs, quotas and the audit log are in
// job_store_records.cc; row conversion in job_rows.cc.
#include "server/jobs/store/job_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "server/jobs/store/job_rows.h"
#include "server/jobs/store/page_token.h"
#include "server/jobs/store/schema.h"
#include "server/jobs/store/sqlite_db.h"

namespace mobius::jobs {
namespace {

using internal::JobNotFound;
using internal::kJobColumns;
using internal::LoadJob;
using internal::ReadJobRow;
using internal::RequireJob;
using internal::RunJobUpdate;

absl::StatusOr<std::unique_ptr<sqlite::Database>> OpenDatabase(const std::string& path,
                                                               const JobStoreOptions& options) {
  MOBIUS_ASSIGN_OR_RETURN(auto db, sqlite::Database::Open(path));
  ConnectionSettings settings;
  settings.busy_timeout_ms = options.busy_timeout_ms;
  settings.synchronous_full = options.fsync_every_commit;
  MOBIUS_RETURN_IF_ERROR(ConfigureConnection(*db, settings));
  MOBIUS_RETURN_IF_ERROR(MigrateSchema(*db, absl::ToUnixMillis(absl::Now())));
  return db;
}

absl::Status ValidateNewJob(const JobRecord& r) {
  if (r.spec_json.empty()) return absl::InvalidArgumentError("spec_json: empty");
  if (r.submission_id.size() > kMaxSubmissionIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("submission_id: ", r.submission_id.size(),
                                                   " bytes, at most ", kMaxSubmissionIdBytes));
  }
  if (r.total_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("total_steps: ", r.total_steps, " < 0"));
  }
  if (r.created_unix_ms < 0) {
    return absl::InvalidArgumentError(absl::StrCat("created_unix_ms: ", r.created_unix_ms, " < 0"));
  }
  return absl::OkStatus();
}

// The page query. Keyset: "seq > ?1 ORDER BY seq LIMIT ?3", with "uid = ?2" when filtered by user
// (index jobs_by_uid). A state filter is spelled out as "state IN ('QUEUED', ...)" (our own enum
// names, never user text) so SQLite can use jobs_by_state; with several states that index yields
// rows out of seq order, so the seqs are chosen first from the covering index and only the page's
// rows are read (sorting 9,000 full rows with their specs instead took ~10 ms at 10,000 jobs).
// User and states together use jobs_by_uid_state, named because without ANALYZE statistics SQLite
// picks jobs_by_uid and reads every row of the user's history to test its state.
// Each distinct filter shape is prepared once and cached by its text.
std::string ListSql(const ListJobsFilter& filter) {
  std::string where = "seq > ?1";
  if (filter.uid.has_value()) absl::StrAppend(&where, " AND uid = ?2");
  if (filter.states.empty() || filter.states == JobStateSet::All()) {
    return absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE ", where,
                        " ORDER BY seq LIMIT ?3");
  }
  std::vector<std::string> names;
  for (JobState s : filter.states.states())
    names.push_back(absl::StrCat("'", JobStateName(s), "'"));
  absl::StrAppend(&where, " AND state IN (", absl::StrJoin(names, ", "), ")");
  return absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE seq IN (SELECT seq FROM jobs ",
                      filter.uid.has_value() ? "INDEXED BY jobs_by_uid_state " : "", "WHERE ",
                      where, " ORDER BY seq LIMIT ?3) ORDER BY seq");
}

absl::StatusOr<std::vector<JobRecord>> QueryJobs(sqlite::Database& db, const ListJobsFilter& filter,
                                                 int64_t after_seq, int64_t limit) {
  MOBIUS_ASSIGN_OR_RETURN(auto select, db.Prepare(ListSql(filter)));
  select.Bind(1, after_seq).Bind(3, limit);
  if (filter.uid.has_value()) select.Bind(2, static_cast<int64_t>(*filter.uid));
  std::vector<JobRecord> jobs;
  while (true) {
    MOBIUS_ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    MOBIUS_ASSIGN_OR_RETURN(JobRecord job, ReadJobRow(select));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

}  // namespace

JobStore::JobStore(std::string path, std::unique_ptr<sqlite::Database> db)
    : path_(std::move(path)), db_(std::move(db)) {}

JobStore::~JobStore() = default;

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path,
                                                         const JobStoreOptions& options) {
  auto db = OpenDatabase(path, options);
  if (!db.ok()) {
    absl::Status status = Annotate(db.status(), "cannot open the job store");
    if (status.code() == absl::StatusCode::kDataLoss) {
      status = absl::DataLossError(
          absl::StrCat(status.message(), "; the file is damaged or not a SQLite database: move ",
                       path, " aside to start with an empty job store"));
    } else if (status.code() == absl::StatusCode::kPermissionDenied) {
      status = absl::PermissionDeniedError(
          absl::StrCat(status.message(), "; the daemon needs write access to ", path,
                       " and to its directory (SQLite creates the -wal and -shm files there)"));
    }
    return status;
  }
  return std::unique_ptr<JobStore>(new JobStore(path, *std::move(db)));
}

absl::StatusOr<JobStore::CreateResult> JobStore::CreateJob(const JobRecord& record,
                                                           int32_t max_queued_jobs) {
  MOBIUS_RETURN_IF_ERROR(ValidateNewJob(record));
  absl::MutexLock lock(&mu_);
  sqlite::Database& db = *db_;
  MOBIUS_ASSIGN_OR_RETURN(auto tx, sqlite::WriteTransaction::Begin(&db));
  MOBIUS_ASSIGN_OR_RETURN(
      auto insert,
      db.Prepare("INSERT INTO jobs (submission_id, uid, user, name, priority, spec_json, state, "
                 "state_reason, created_unix_ms, total_steps) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'QUEUED', ?7, ?8, ?9) "
                 "ON CONFLICT (uid, submission_id) WHERE submission_id <> '' DO NOTHING"));
  insert.Bind(1, record.submission_id)
      .Bind(2, static_cast<int64_t>(record.uid))
      .Bind(3, record.user)
      .Bind(4, record.name)
      .Bind(5, static_cast<int64_t>(record.priority))
      .Bind(6, record.spec_json)
      .Bind(7, record.state_reason)
      .Bind(8, record.created_unix_ms)
      .Bind(9, record.total_steps);
  MOBIUS_RETURN_IF_ERROR(insert.Run());

  CreateResult result;
  if (db.changes() == 1) {
    const int64_t seq = db.last_insert_rowid();
    if (max_queued_jobs > 0) {  // counted in the transaction: concurrent submits cannot pass it
      MOBIUS_ASSIGN_OR_RETURN(
          auto count, db.Prepare("SELECT count(*) FROM jobs WHERE uid = ?1 AND state = 'QUEUED'"));
      count.Bind(1, static_cast<int64_t>(record.uid));
      MOBIUS_ASSIGN_OR_RETURN(const bool row, count.Step());
      const int64_t queued = row ? count.ColumnInt(0) : 0;
      if (queued > max_queued_jobs) {  // the new job included; the transaction rolls back
        return absl::ResourceExhaustedError(absl::StrCat(
            "user quota max_queued_jobs=", max_queued_jobs, ": ", queued - 1,
            " jobs of yours are queued; wait for one to start, or cancel one"));
      }
    }
    MOBIUS_ASSIGN_OR_RETURN(result.job, LoadJob(db, seq));
    MOBIUS_RETURN_IF_ERROR(tx.Commit());
    return result;
  }
  // The UNIQUE index refused the row: an earlier submit with this (uid, submission_id) exists.
  MOBIUS_ASSIGN_OR_RETURN(
      auto select, db.Prepare(absl::StrCat("SELECT ", kJobColumns,
                                           " FROM jobs WHERE uid = ?1 AND submission_id = ?2")));
  select.Bind(1, static_cast<int64_t>(record.uid)).Bind(2, record.submission_id);
  MOBIUS_ASSIGN_OR_RETURN(const bool found, select.Step());
  if (!found) {
    return absl::InternalError(absl::StrCat("submission_id '", record.submission_id,
                                            "': insert ignored but no existing job found"));
  }
  MOBIUS_ASSIGN_OR_RETURN(result.job, ReadJobRow(select));
  if (result.job.spec_json != record.spec_json) {
    return absl::AlreadyExistsError(absl::StrCat(
        "submission_id '", record.submission_id, "' was already used for job ", result.job.id,
        " with a different spec (use a new submission id for a new job)"));
  }
  result.existed = true;
  return result;  // nothing was written; the transaction rolls back
}

absl::StatusOr<JobRecord> JobStore::GetJob(absl::string_view id) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t seq, ParseJobId(id));
  absl::MutexLock lock(&mu_);
  return LoadJob(*db_, seq);
}

absl::StatusOr<ListJobsPage> JobStore::ListJobs(const ListJobsFilter& filter, int page_size,
                                                absl::string_view page_token) {
  if (page_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("page_size: ", page_size, " < 0"));
  }
  if (page_size == 0) page_size = kDefaultPageSize;
  if (page_size > kMaxPageSize) page_size = kMaxPageSize;
  MOBIUS_ASSIGN_OR_RETURN(const int64_t after_seq, DecodePageToken(page_token, filter));

  ListJobsPage page;
  {
    absl::MutexLock lock(&mu_);
    // One row more than asked tells whether another page exists without a second query.
    MOBIUS_ASSIGN_OR_RETURN(page.jobs, QueryJobs(*db_, filter, after_seq, page_size + 1));
  }
  if (static_cast<int>(page.jobs.size()) > page_size) {
    page.jobs.resize(page_size);
    MOBIUS_ASSIGN_OR_RETURN(const int64_t last_seq, ParseJobId(page.jobs.back().id));
    page.next_page_token = EncodePageToken(last_seq, filter);
  }
  return page;
}

absl::StatusOr<std::vector<JobRecord>> JobStore::JobsInStates(JobStateSet states) {
  if (states.empty()) return std::vector<JobRecord>();
  ListJobsFilter filter;
  filter.states = states;
  absl::MutexLock lock(&mu_);
  return QueryJobs(*db_, filter, /*after_seq=*/0, /*limit=*/-1);  // -1: no limit in SQLite
}

absl::StatusOr<JobRecord> JobStore::Transition(absl::string_view id, JobState to,
                                               absl::string_view reason, int64_t now_unix_ms) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t seq, ParseJobId(id));
  absl::MutexLock lock(&mu_);
  sqlite::Database& db = *db_;
  MOBIUS_ASSIGN_OR_RETURN(auto tx, sqlite::WriteTransaction::Begin(&db));
  MOBIUS_ASSIGN_OR_RETURN(JobRecord job, LoadJob(db, seq));
  MOBIUS_RETURN_IF_ERROR(CheckTransition(job.id, job.state, to));
  const JobState from = job.state;
  job.state = to;
  job.state_reason = std::string(reason);
  if (to == JobState::kRunning) job.started_unix_ms = now_unix_ms;
  if (IsTerminal(to)) job.finished_unix_ms = now_unix_ms;

  MOBIUS_ASSIGN_OR_RETURN(auto update,
                          db.Prepare("UPDATE jobs SET state = ?2, state_reason = ?3, "
                                     "started_unix_ms = ?4, finished_unix_ms = ?5 WHERE seq = ?1"));
  update.Bind(1, seq)
      .Bind(2, JobStateName(to))
      .Bind(3, reason)
      .Bind(4, job.started_unix_ms)
      .Bind(5, job.finished_unix_ms);
  MOBIUS_RETURN_IF_ERROR(RunJobUpdate(db, update, seq));
  MOBIUS_ASSIGN_OR_RETURN(
      auto insert, db.Prepare("INSERT INTO transitions (job_seq, from_state, to_state, reason, "
                              "unix_ms) VALUES (?1, ?2, ?3, ?4, ?5)"));
  insert.Bind(1, seq)
      .Bind(2, JobStateName(from))
      .Bind(3, JobStateName(to))
      .Bind(4, reason)
      .Bind(5, now_unix_ms);
  MOBIUS_RETURN_IF_ERROR(insert.Run());
  MOBIUS_RETURN_IF_ERROR(tx.Commit());
  return job;
}

absl::StatusOr<std::vector<TransitionRecord>> JobStore::Transitions(absl::string_view id) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t seq, ParseJobId(id));
  absl::MutexLock lock(&mu_);
  MOBIUS_RETURN_IF_ERROR(RequireJob(*db_, seq));
  MOBIUS_ASSIGN_OR_RETURN(auto select,
                          db_->Prepare("SELECT seq, from_state, to_state, reason, unix_ms FROM "
                                       "transitions WHERE job_seq = ?1 ORDER BY seq"));
  select.Bind(1, seq);
  std::vector<TransitionRecord> out;
  while (true) {
    MOBIUS_ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    TransitionRecord t;
    t.seq = select.ColumnInt(0);
    t.job_id = FormatJobId(seq);
    auto from = ParseJobState(select.ColumnText(1));
    auto to = ParseJobState(select.ColumnText(2));
    if (!from.ok() || !to.ok()) {
      return absl::DataLossError(absl::StrCat("job ", t.job_id, ": transition ", t.seq, ": ",
                                              (!from.ok() ? from : to).status().message()));
    }
    t.from = *from;
    t.to = *to;
    t.reason = select.ColumnText(3);
    t.unix_ms = select.ColumnInt(4);
    out.push_back(std::move(t));
  }
  return out;
}

absl::Status JobStore::UpdateRunInfo(absl::string_view id, const std::vector<int>& gpus,
                                     absl::string_view plan_json) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t seq, ParseJobId(id));
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("gpus[", i, "]: ", gpus[i], " is not a GPU index"));
    }
  }
  absl::MutexLock lock(&mu_);
  MOBIUS_ASSIGN_OR_RETURN(auto update,
                          db_->Prepare("UPDATE jobs SET gpus = ?2, plan_json = ?3 WHERE seq = ?1"));
  update.Bind(1, seq).Bind(2, internal::GpusToText(gpus)).Bind(3, plan_json);
  return RunJobUpdate(*db_, update, seq);
}

absl::Status JobStore::SetTotalSteps(absl::string_view id, int64_t total_steps) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t seq, ParseJobId(id));
  if (total_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("total steps: ", total_steps, " < 0"));
  }
  absl::MutexLock lock(&mu_);
  MOBIUS_ASSIGN_OR_RETURN(auto update,
                          db_->Prepare("UPDATE jobs SET total_steps = ?2 WHERE seq = ?1"));
  update.Bind(1, seq).Bind(2, total_steps);
  return RunJobUpdate(*db_, update, seq);
}

absl::Status JobStore::SetCheckpoint(absl::string_view id, absl::string_view dir, int64_t step) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t seq, ParseJobId(id));
  if (dir.empty()) return absl::InvalidArgumentError("checkpoint: empty directory");
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat("checkpoint step: ", step, " < 0"));
  absl::MutexLock lock(&mu_);
  MOBIUS_ASSIGN_OR_RETURN(auto update,
                          db_->Prepare("UPDATE jobs SET checkpoint = ?2, checkpoint_step = ?3, "
                                       "steps_done = MAX(steps_done, ?3) WHERE seq = ?1"));
  update.Bind(1, seq).Bind(2, dir).Bind(3, step);
  return RunJobUpdate(*db_, update, seq);
}

absl::StatusOr<int32_t> JobStore::IncrementRestarts(absl::string_view id) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t seq, ParseJobId(id));
  absl::MutexLock lock(&mu_);
  MOBIUS_ASSIGN_OR_RETURN(
      auto update,
      db_->Prepare("UPDATE jobs SET restarts = restarts + 1 WHERE seq = ?1 RETURNING restarts"));
  update.Bind(1, seq);
  MOBIUS_ASSIGN_OR_RETURN(const bool row, update.Step());
  if (!row) return JobNotFound(seq);
  const auto restarts = static_cast<int32_t>(update.ColumnInt(0));
  MOBIUS_RETURN_IF_ERROR(update.Run());  // finish the statement so the change commits now
  return restarts;
}

absl::Status JobStore::SetCancelRequested(absl::string_view id) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t seq, ParseJobId(id));
  absl::MutexLock lock(&mu_);
  MOBIUS_ASSIGN_OR_RETURN(auto update,
                          db_->Prepare("UPDATE jobs SET cancel_requested = 1 WHERE seq = ?1"));
  update.Bind(1, seq);
  return RunJobUpdate(*db_, update, seq);
}

}  // namespace mobius::jobs
