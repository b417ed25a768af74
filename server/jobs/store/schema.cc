#include "server/jobs/store/schema.h"

#include <sqlite3.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"

namespace mobius::jobs {
namespace {

struct Migration {
  int version;
  const char* sql;
};

// Append-only: a released migration is never edited; changes are new entries. Times are Unix ms;
// job states are stored by name (JobStateName) so the file reads well in the sqlite3 shell.
const std::vector<Migration>& Migrations() {
  static const auto* migrations = new std::vector<Migration>{
      {1, R"sql(
CREATE TABLE jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- AUTOINCREMENT: ids are never reused
  submission_id TEXT NOT NULL,
  uid INTEGER NOT NULL CHECK (uid >= 0),
  user TEXT NOT NULL,
  name TEXT NOT NULL,
  priority INTEGER NOT NULL,
  spec_json TEXT NOT NULL,
  state TEXT NOT NULL
    CHECK (state IN ('QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
  state_reason TEXT NOT NULL,
  created_unix_ms INTEGER NOT NULL,
  started_unix_ms INTEGER NOT NULL DEFAULT 0,
  finished_unix_ms INTEGER NOT NULL DEFAULT 0,
  restarts INTEGER NOT NULL DEFAULT 0,
  gpus TEXT NOT NULL DEFAULT '',  -- "0,1,4"
  plan_json TEXT NOT NULL DEFAULT '',
  checkpoint TEXT NOT NULL DEFAULT '',
  checkpoint_step INTEGER NOT NULL DEFAULT 0,
  steps_done INTEGER NOT NULL DEFAULT 0,
  total_steps INTEGER NOT NULL DEFAULT 0,
  cancel_requested INTEGER NOT NULL DEFAULT 0
);
-- Idempotent submits: one job per (uid, submission id), enforced by SQLite, not by a lookup.
CREATE UNIQUE INDEX jobs_by_submission ON jobs (uid, submission_id) WHERE submission_id <> '';
CREATE INDEX jobs_by_uid ON jobs (uid, seq);
CREATE INDEX jobs_by_state ON jobs (state, seq);
CREATE INDEX jobs_by_uid_state ON jobs (uid, state, seq);  -- "my queued/running jobs"

CREATE TABLE transitions (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  job_seq INTEGER NOT NULL REFERENCES jobs (seq),
  from_state TEXT NOT NULL,
  to_state TEXT NOT NULL,
  reason TEXT NOT NULL,
  unix_ms INTEGER NOT NULL
);
CREATE INDEX transitions_by_job ON transitions (job_seq, seq);

CREATE TABLE step_reports (
  job_seq INTEGER NOT NULL REFERENCES jobs (seq),
  step INTEGER NOT NULL,
  total_steps INTEGER NOT NULL,
  loss REAL NOT NULL,
  lr REAL NOT NULL,
  grad_norm REAL NOT NULL,
  tokens INTEGER NOT NULL,
  tokens_per_second REAL NOT NULL,
  step_seconds REAL NOT NULL,
  compute_seconds REAL NOT NULL,
  h2d_bytes INTEGER NOT NULL,
  d2h_bytes INTEGER NOT NULL,
  stall_seconds REAL NOT NULL,
  optimizer_seconds REAL NOT NULL,
  unix_ms INTEGER NOT NULL,
  UNIQUE (job_seq, step)
);

CREATE TABLE logs (
  job_seq INTEGER NOT NULL REFERENCES jobs (seq),
  seq INTEGER NOT NULL,  -- per job, from 1
  unix_ms INTEGER NOT NULL,
  source TEXT NOT NULL,
  text TEXT NOT NULL,
  UNIQUE (job_seq, seq)
);

CREATE TABLE quotas (
  uid INTEGER PRIMARY KEY,
  max_gpus INTEGER NOT NULL CHECK (max_gpus >= 0),
  max_running_jobs INTEGER NOT NULL CHECK (max_running_jobs >= 0)
);

CREATE TABLE audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  unix_ms INTEGER NOT NULL,
  uid INTEGER NOT NULL,
  method TEXT NOT NULL,
  target TEXT NOT NULL,
  detail TEXT NOT NULL,
  result_code INTEGER NOT NULL,  -- absl::StatusCode (= gRPC code)
  result TEXT NOT NULL           -- its name, for people reading the file
);
)sql"},
      // 2: the held-out loss of eval steps (NULL on the others).
      {2, R"sql(
ALTER TABLE step_reports ADD COLUMN eval_loss REAL;
)sql"},
      // 3: fp16 jobs' dynamic loss scale and skipped (overflowed) steps (0 with bf16).
      {3, R"sql(
ALTER TABLE step_reports ADD COLUMN loss_scale REAL NOT NULL DEFAULT 0;
ALTER TABLE step_reports ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0;
)sql"},
      // 4: accounting, one row per run (job_types.h UsageRecord).
      {4, R"sql(
CREATE TABLE usage (
  job_seq INTEGER NOT NULL REFERENCES jobs (seq),
  started_unix_ms INTEGER NOT NULL,
  uid INTEGER NOT NULL CHECK (uid >= 0),
  user TEXT NOT NULL,
  gid INTEGER NOT NULL,
  group_name TEXT NOT NULL,
  gpus INTEGER NOT NULL CHECK (gpus >= 0),
  host_bytes INTEGER NOT NULL CHECK (host_bytes >= 0),
  last_unix_ms INTEGER NOT NULL CHECK (last_unix_ms >= started_unix_ms),
  ended INTEGER NOT NULL,
  tokens INTEGER NOT NULL,
  steps INTEGER NOT NULL,
  measured_host_byte_seconds REAL NOT NULL,
  PRIMARY KEY (job_seq, started_unix_ms)
);
CREATE INDEX usage_by_last ON usage (last_unix_ms);
CREATE INDEX usage_by_uid ON usage (uid, last_unix_ms);
)sql"},
      // 5: per-user limits on queued jobs and on the host memory of running jobs.
      {5, R"sql(
ALTER TABLE quotas ADD COLUMN max_queued_jobs INTEGER NOT NULL DEFAULT 0
  CHECK (max_queued_jobs >= 0);
ALTER TABLE quotas ADD COLUMN max_host_bytes INTEGER NOT NULL DEFAULT 0 CHECK (max_host_bytes >= 0);
)sql"},
  };
  return *migrations;
}

absl::StatusOr<int64_t> CountTables(sqlite::Database& db) {
  return db.QueryInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table'");
}

// A non-empty file must carry our application_id; an empty one (no tables) is ours to initialise.
absl::Status CheckOwnership(sqlite::Database& db) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t app_id, db.QueryInt("PRAGMA application_id"));
  if (app_id == kApplicationId) return absl::OkStatus();
  if (app_id != 0) {
    return absl::FailedPreconditionError(absl::StrCat("sqlite ", db.path(),
                                                      ": not a Mobius job store (application_id ",
                                                      app_id, ", expected ", kApplicationId, ")"));
  }
  MOBIUS_ASSIGN_OR_RETURN(const int64_t tables, CountTables(db));
  if (tables != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("sqlite ", db.path(), ": not a Mobius job store (a SQLite database with ",
                     tables, " tables of another application)"));
  }
  return absl::OkStatus();
}

// Both reads of CheckOwnership in one snapshot: another process may commit the schema in between.
absl::Status CheckOwnershipInReadTransaction(sqlite::Database& db) {
  MOBIUS_RETURN_IF_ERROR(db.Exec("BEGIN DEFERRED"));
  absl::Status status = CheckOwnership(db);
  absl::Status end = db.Exec(status.ok() ? "COMMIT" : "ROLLBACK");
  return status.ok() ? end : status;
}

// Switching to WAL needs an exclusive lock and SQLite reports SQLITE_BUSY at once, without the
// busy handler, while another process opens or switches the same file; retry until the timeout.
absl::StatusOr<std::optional<std::string>> EnableWal(sqlite::Database& db, int timeout_ms) {
  const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
  while (true) {
    auto mode = db.QueryText("PRAGMA journal_mode = WAL");
    if (mode.ok() || mode.status().code() != absl::StatusCode::kUnavailable ||
        absl::Now() > deadline) {
      return mode;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
}

}  // namespace

absl::Status ConfigureConnection(sqlite::Database& db, const ConnectionSettings& settings) {
  sqlite3_busy_timeout(db.handle(), settings.busy_timeout_ms);
  // Read-only checks first: a foreign database must not even be switched to WAL.
  MOBIUS_RETURN_IF_ERROR(CheckOwnershipInReadTransaction(db));
  MOBIUS_ASSIGN_OR_RETURN(auto mode, EnableWal(db, settings.busy_timeout_ms));
  if (!mode.has_value() || *mode != "wal") {
    return absl::FailedPreconditionError(absl::StrCat(
        "sqlite ", db.path(), ": cannot use WAL mode (journal_mode is ", mode.value_or("unknown"),
        "); the state directory must be on a local file system"));
  }
  MOBIUS_RETURN_IF_ERROR(db.Exec(settings.synchronous_full ? "PRAGMA synchronous = FULL"
                                                           : "PRAGMA synchronous = NORMAL"));
  MOBIUS_RETURN_IF_ERROR(db.Exec("PRAGMA foreign_keys = ON"));
  MOBIUS_ASSIGN_OR_RETURN(const int64_t fk, db.QueryInt("PRAGMA foreign_keys"));
  if (fk != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("sqlite ", db.path(), ": this SQLite build cannot enforce foreign keys"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> SchemaVersion(sqlite::Database& db) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t has_table,
                          db.QueryInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND "
                                      "name = 'schema_migrations'"));
  if (has_table == 0) return 0;
  MOBIUS_ASSIGN_OR_RETURN(const int64_t version,
                          db.QueryInt("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
  return static_cast<int>(version);
}

absl::Status MigrateSchema(sqlite::Database& db, int64_t now_unix_ms) {
  MOBIUS_ASSIGN_OR_RETURN(auto tx, sqlite::WriteTransaction::Begin(&db));
  // Again inside the write lock: another process may have initialised the file meanwhile.
  MOBIUS_RETURN_IF_ERROR(CheckOwnership(db));
  MOBIUS_ASSIGN_OR_RETURN(const int64_t app_id, db.QueryInt("PRAGMA application_id"));
  if (app_id == 0) {
    MOBIUS_RETURN_IF_ERROR(
        db.Exec(absl::StrCat("PRAGMA application_id = ", kApplicationId,
                             "; CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
                             "applied_unix_ms INTEGER NOT NULL)")));
  }
  MOBIUS_ASSIGN_OR_RETURN(const int current, SchemaVersion(db));
  if (current > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("sqlite ", db.path(), ": the job store has schema version ", current,
                     ", written by a newer mobiusd; this build understands versions up to ",
                     kSchemaVersion, " (run the newer mobiusd, or move the file aside)"));
  }
  for (const Migration& m : Migrations()) {
    if (m.version <= current) continue;
    MOBIUS_RETURN_IF_ERROR(db.Exec(m.sql));
    MOBIUS_ASSIGN_OR_RETURN(
        auto insert,
        db.Prepare("INSERT INTO schema_migrations (version, applied_unix_ms) VALUES (?1, ?2)"));
    MOBIUS_RETURN_IF_ERROR(
        insert.Bind(1, static_cast<int64_t>(m.version)).Bind(2, now_unix_ms).Run());
  }
  return tx.Commit();
}

}  // namespace mobius::jobs
