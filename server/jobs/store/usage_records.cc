// Accounting rows (JobStore::PutUsage, ListUsage, CloseOpenUsage); one row per run.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/jobs/store/job_rows.h"
#include "server/jobs/store/job_store.h"
#include "server/jobs/store/sqlite_db.h"

namespace mobius::jobs {
namespace {

constexpr char kUsageColumns[] =
    "job_seq, started_unix_ms, uid, user, gid, group_name, gpus, host_bytes, last_unix_ms, ended, "
    "tokens, steps, measured_host_byte_seconds";

absl::Status ValidateUsage(const UsageRecord& r) {
  auto negative = [&](const char* field, double v) -> absl::Status {
    if (v < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("usage of ", r.job_id, ": ", field, " ", v, " < 0"));
    }
    return absl::OkStatus();
  };
  MOBIUS_RETURN_IF_ERROR(negative("gpus", r.gpus));
  MOBIUS_RETURN_IF_ERROR(negative("host_bytes", static_cast<double>(r.host_bytes)));
  MOBIUS_RETURN_IF_ERROR(negative("tokens", static_cast<double>(r.tokens)));
  MOBIUS_RETURN_IF_ERROR(negative("steps", static_cast<double>(r.steps)));
  MOBIUS_RETURN_IF_ERROR(negative("measured_host_byte_seconds", r.measured_host_byte_seconds));
  if (r.last_unix_ms < r.started_unix_ms) {
    return absl::InvalidArgumentError(absl::StrCat("usage of ", r.job_id, ": last_unix_ms ",
                                                   r.last_unix_ms, " before started_unix_ms ",
                                                   r.started_unix_ms));
  }
  return absl::OkStatus();
}

UsageRecord ReadUsageRow(const sqlite::Statement& s) {
  UsageRecord r;
  r.job_id = FormatJobId(s.ColumnInt(0));
  r.started_unix_ms = s.ColumnInt(1);
  r.uid = static_cast<uint32_t>(s.ColumnInt(2));
  r.user = s.ColumnText(3);
  r.gid = s.ColumnInt(4);
  r.group = s.ColumnText(5);
  r.gpus = static_cast<int32_t>(s.ColumnInt(6));
  r.host_bytes = s.ColumnInt(7);
  r.last_unix_ms = s.ColumnInt(8);
  r.ended = s.ColumnInt(9) != 0;
  r.tokens = s.ColumnInt(10);
  r.steps = s.ColumnInt(11);
  r.measured_host_byte_seconds = s.ColumnDouble(12);
  return r;
}

}  // namespace

absl::Status JobStore::PutUsage(const UsageRecord& r) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t seq, ParseJobId(r.job_id));
  MOBIUS_RETURN_IF_ERROR(ValidateUsage(r));
  absl::MutexLock lock(&mu_);
  sqlite::Database& db = *db_;
  MOBIUS_ASSIGN_OR_RETURN(auto tx, sqlite::WriteTransaction::Begin(&db));
  MOBIUS_RETURN_IF_ERROR(internal::RequireJob(db, seq));
  MOBIUS_ASSIGN_OR_RETURN(
      auto upsert,
      db.Prepare(absl::StrCat("INSERT OR REPLACE INTO usage (", kUsageColumns,
                              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)")));
  upsert.Bind(1, seq)
      .Bind(2, r.started_unix_ms)
      .Bind(3, static_cast<int64_t>(r.uid))
      .Bind(4, r.user)
      .Bind(5, r.gid)
      .Bind(6, r.group)
      .Bind(7, static_cast<int64_t>(r.gpus))
      .Bind(8, r.host_bytes)
      .Bind(9, r.last_unix_ms)
      .Bind(10, static_cast<int64_t>(r.ended ? 1 : 0))
      .Bind(11, r.tokens)
      .Bind(12, r.steps)
      .Bind(13, r.measured_host_byte_seconds);
  MOBIUS_RETURN_IF_ERROR(upsert.Run());
  return tx.Commit();
}

absl::StatusOr<std::vector<UsageRecord>> JobStore::ListUsage(int64_t since_unix_ms,
                                                            std::optional<uint32_t> uid) {
  absl::MutexLock lock(&mu_);
  MOBIUS_ASSIGN_OR_RETURN(
      auto select,
      db_->Prepare(absl::StrCat("SELECT ", kUsageColumns,
                                " FROM usage WHERE last_unix_ms >= ?1 AND (?2 < 0 OR uid = ?2) "
                                "ORDER BY started_unix_ms, job_seq")));
  select.Bind(1, since_unix_ms).Bind(2, uid ? static_cast<int64_t>(*uid) : int64_t{-1});
  std::vector<UsageRecord> out;
  while (true) {
    MOBIUS_ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    out.push_back(ReadUsageRow(select));
  }
  return out;
}

absl::StatusOr<int> JobStore::CloseOpenUsage() {
  absl::MutexLock lock(&mu_);
  MOBIUS_ASSIGN_OR_RETURN(auto update, db_->Prepare("UPDATE usage SET ended = 1 WHERE ended = 0"));
  MOBIUS_RETURN_IF_ERROR(update.Run());
  return static_cast<int>(db_->changes());
}

}  // namespace mobius::jobs
