// Internal to the job store: the jobs table's column list and row <-> JobRecord conversion, shared
// by the job_store*.cc files.
//
// Thread-safety: functions use the connection or statement they are given; callers hold the
// store's mutex.
#ifndef MOBIUS_SERVER_JOBS_STORE_JOB_ROWS_H_
#define MOBIUS_SERVER_JOBS_STORE_JOB_ROWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/jobs/store/job_types.h"
#include "server/jobs/store/sqlite_db.h"

namespace mobius::jobs::internal {

// "seq, submission_id, ..." in the order ReadJobRow expects, for SELECT lists.
extern const char kJobColumns[];

// The JobRecord of the current row of a statement selecting kJobColumns; DATA_LOSS naming the job
// and column when a stored value is malformed.
absl::StatusOr<JobRecord> ReadJobRow(const sqlite::Statement& stmt);

// "0,1,4" and back.
std::string GpusToText(const std::vector<int>& gpus);
absl::StatusOr<std::vector<int>> GpusFromText(absl::string_view text);

// "job j-000123 not found" (NOT_FOUND).
absl::Status JobNotFound(int64_t seq);

// The job's row, or NOT_FOUND.
absl::StatusOr<JobRecord> LoadJob(sqlite::Database& db, int64_t seq);
// OK when the job exists, NOT_FOUND otherwise.
absl::Status RequireJob(sqlite::Database& db, int64_t seq);
// Runs a prepared UPDATE of one job row and turns "no row changed" into NOT_FOUND.
absl::Status RunJobUpdate(sqlite::Database& db, sqlite::Statement& update, int64_t seq);

// 1..kMaxReadLimit, else INVALID_ARGUMENT naming `field`.
absl::Status CheckLimit(absl::string_view field, int limit);

}  // namespace mobius::jobs::internal

#endif  // MOBIUS_SERVER_JOBS_STORE_JOB_ROWS_H_
