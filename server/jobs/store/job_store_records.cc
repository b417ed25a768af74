// Step reports, logs, quotas and the audit log. Jobs and transitions are in job_store.cc.
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/jobs/store/job_rows.h"
#include "server/jobs/store/job_store.h"
#include "server/jobs/store/sqlite_db.h"

namespace mobius::jobs {
namespace {

using internal::CheckLimit;
using internal::RequireJob;
using internal::RunJobUpdate;

constexpr char kStepColumns[] =
    "step, total_steps, loss, lr, grad_norm, tokens, tokens_per_second, step_seconds, "
    "compute_seconds, h2d_bytes, d2h_bytes, stall_seconds, optimizer_seconds, unix_ms, eval_loss, "
    "loss_scale, skipped";

StepReportRow ReadStepRow(const sqlite::Statement& s) {
  StepReportRow r;
  r.step = s.ColumnInt(0);
  r.total_steps = s.ColumnInt(1);
  r.loss = s.ColumnDouble(2);
  r.lr = s.ColumnDouble(3);
  r.grad_norm = s.ColumnDouble(4);
  r.tokens = s.ColumnInt(5);
  r.tokens_per_second = s.ColumnDouble(6);
  r.step_seconds = s.ColumnDouble(7);
  r.compute_seconds = s.ColumnDouble(8);
  r.h2d_bytes = s.ColumnInt(9);
  r.d2h_bytes = s.ColumnInt(10);
  r.stall_seconds = s.ColumnDouble(11);
  r.optimizer_seconds = s.ColumnDouble(12);
  r.unix_ms = s.ColumnInt(13);
  if (!s.ColumnIsNull(14)) r.eval_loss = s.ColumnDouble(14);
  r.loss_scale = s.ColumnDouble(15);
  r.skipped = s.ColumnInt(16) != 0;
  return r;
}

absl::Status ValidateQuota(const Quota& q) {
  for (const auto& [field, value] :
       {std::pair<const char*, int64_t>{"max_gpus", q.max_gpus},
        {"max_running_jobs", q.max_running_jobs},
        {"max_queued_jobs", q.max_queued_jobs},
        {"max_host_bytes", q.max_host_bytes}}) {
    if (value < 0) return absl::InvalidArgumentError(absl::StrCat(field, ": ", value, " < 0"));
  }
  return absl::OkStatus();
}

constexpr char kQuotaColumns[] = "uid, max_gpus, max_running_jobs, max_queued_jobs, max_host_bytes";

Quota ReadQuotaRow(const sqlite::Statement& s) {
  return Quota{static_cast<uint32_t>(s.ColumnInt(0)), static_cast<int32_t>(s.ColumnInt(1)),
               static_cast<int32_t>(s.ColumnInt(2)), static_cast<int32_t>(s.ColumnInt(3)),
               s.ColumnInt(4)};
}

}  // namespace

absl::Status JobStore::AppendStepReport(absl::string_view id, const StepReportRow& report) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t seq, ParseJobId(id));
  if (report.step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("step: ", report.step, " < 0"));
  }
  absl::MutexLock lock(&mu_);
  sqlite::Database& db = *db_;
  MOBIUS_ASSIGN_OR_RETURN(auto tx, sqlite::WriteTransaction::Begin(&db));
  MOBIUS_ASSIGN_OR_RETURN(
      auto update, db.Prepare("UPDATE jobs SET steps_done = ?2, total_steps = CASE WHEN ?3 > 0 "
                              "THEN ?3 ELSE total_steps END WHERE seq = ?1"));
  update.Bind(1, seq).Bind(2, report.step).Bind(3, report.total_steps);
  MOBIUS_RETURN_IF_ERROR(RunJobUpdate(db, update, seq));
  MOBIUS_ASSIGN_OR_RETURN(
      auto insert,
      db.Prepare(absl::StrCat("INSERT OR REPLACE INTO step_reports (job_seq, ", kStepColumns,
                              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
                              "?14, ?15, ?16, ?17, ?18)")));
  insert.Bind(1, seq)
      .Bind(2, report.step)
      .Bind(3, report.total_steps)
      .Bind(4, report.loss)
      .Bind(5, report.lr)
      .Bind(6, report.grad_norm)
      .Bind(7, report.tokens)
      .Bind(8, report.tokens_per_second)
      .Bind(9, report.step_seconds)
      .Bind(10, report.compute_seconds)
      .Bind(11, report.h2d_bytes)
      .Bind(12, report.d2h_bytes)
      .Bind(13, report.stall_seconds)
      .Bind(14, report.optimizer_seconds)
      .Bind(15, report.unix_ms);
  if (report.eval_loss) {
    insert.Bind(16, *report.eval_loss);
  } else {
    insert.BindNull(16);
  }
  insert.Bind(17, report.loss_scale).Bind(18, static_cast<int64_t>(report.skipped ? 1 : 0));
  MOBIUS_RETURN_IF_ERROR(insert.Run());
  return tx.Commit();
}

absl::StatusOr<std::vector<StepReportRow>> JobStore::StepReports(absl::string_view id,
                                                                 int64_t after_step, int limit) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t seq, ParseJobId(id));
  MOBIUS_RETURN_IF_ERROR(CheckLimit("limit", limit));
  absl::MutexLock lock(&mu_);
  MOBIUS_RETURN_IF_ERROR(RequireJob(*db_, seq));
  MOBIUS_ASSIGN_OR_RETURN(
      auto select, db_->Prepare(absl::StrCat("SELECT ", kStepColumns,
                                             " FROM step_reports WHERE "
                                             "job_seq = ?1 AND step > ?2 ORDER BY step LIMIT ?3")));
  select.Bind(1, seq).Bind(2, after_step).Bind(3, static_cast<int64_t>(limit));
  std::vector<StepReportRow> out;
  while (true) {
    MOBIUS_ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    out.push_back(ReadStepRow(select));
  }
  return out;
}

absl::StatusOr<std::optional<StepReportRow>> JobStore::LatestStepReport(absl::string_view id,
                                                                        int64_t max_step,
                                                                        bool eval_only) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t seq, ParseJobId(id));
  absl::MutexLock lock(&mu_);
  MOBIUS_RETURN_IF_ERROR(RequireJob(*db_, seq));
  MOBIUS_ASSIGN_OR_RETURN(
      auto select,
      db_->Prepare(absl::StrCat("SELECT ", kStepColumns,
                                " FROM step_reports WHERE job_seq = ?1 AND step <= ?2",
                                eval_only ? " AND eval_loss IS NOT NULL" : "",
                                " ORDER BY step DESC LIMIT 1")));
  select.Bind(1, seq).Bind(2, max_step);
  MOBIUS_ASSIGN_OR_RETURN(const bool row, select.Step());
  if (!row) return std::optional<StepReportRow>();
  return std::optional<StepReportRow>(ReadStepRow(select));
}

absl::StatusOr<int64_t> JobStore::AppendLogs(absl::string_view id,
                                             const std::vector<LogLine>& lines) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t seq, ParseJobId(id));
  absl::MutexLock lock(&mu_);
  sqlite::Database& db = *db_;
  MOBIUS_ASSIGN_OR_RETURN(auto tx, sqlite::WriteTransaction::Begin(&db));
  MOBIUS_RETURN_IF_ERROR(RequireJob(db, seq));
  int64_t last = 0;
  {
    MOBIUS_ASSIGN_OR_RETURN(
        auto select, db.Prepare("SELECT COALESCE(MAX(seq), 0) FROM logs WHERE job_seq = ?1"));
    select.Bind(1, seq);
    MOBIUS_ASSIGN_OR_RETURN(const bool row, select.Step());
    if (row) last = select.ColumnInt(0);
  }
  if (lines.empty()) return last;
  MOBIUS_ASSIGN_OR_RETURN(auto insert,
                          db.Prepare("INSERT INTO logs (job_seq, seq, unix_ms, source, text) "
                                     "VALUES (?1, ?2, ?3, ?4, ?5)"));
  for (const LogLine& line : lines) {
    insert.Bind(1, seq).Bind(2, ++last).Bind(3, line.unix_ms).Bind(4, line.source);
    insert.Bind(5, line.text);
    MOBIUS_RETURN_IF_ERROR(insert.Run());
    insert.Reset();
  }
  MOBIUS_RETURN_IF_ERROR(tx.Commit());
  return last;
}

absl::StatusOr<std::vector<LogLine>> JobStore::ReadLogs(absl::string_view id, int64_t from_seq,
                                                        int limit) {
  MOBIUS_ASSIGN_OR_RETURN(const int64_t seq, ParseJobId(id));
  MOBIUS_RETURN_IF_ERROR(CheckLimit("limit", limit));
  absl::MutexLock lock(&mu_);
  MOBIUS_RETURN_IF_ERROR(RequireJob(*db_, seq));
  MOBIUS_ASSIGN_OR_RETURN(
      auto select, db_->Prepare("SELECT seq, unix_ms, source, text FROM logs WHERE job_seq = ?1 "
                                "AND seq >= ?2 ORDER BY seq LIMIT ?3"));
  select.Bind(1, seq).Bind(2, from_seq).Bind(3, static_cast<int64_t>(limit));
  std::vector<LogLine> out;
  while (true) {
    MOBIUS_ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    out.push_back(LogLine{select.ColumnInt(0), select.ColumnInt(1), select.ColumnText(2),
                          select.ColumnText(3)});
  }
  return out;
}

absl::Status JobStore::SetQuota(const Quota& q) {
  MOBIUS_RETURN_IF_ERROR(ValidateQuota(q));
  absl::MutexLock lock(&mu_);
  MOBIUS_ASSIGN_OR_RETURN(
      auto upsert,
      db_->Prepare(absl::StrCat(
          "INSERT INTO quotas (", kQuotaColumns,
          ") VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (uid) DO UPDATE SET "
          "max_gpus = excluded.max_gpus, max_running_jobs = excluded.max_running_jobs, "
          "max_queued_jobs = excluded.max_queued_jobs, max_host_bytes = excluded.max_host_bytes")));
  upsert.Bind(1, static_cast<int64_t>(q.uid))
      .Bind(2, static_cast<int64_t>(q.max_gpus))
      .Bind(3, static_cast<int64_t>(q.max_running_jobs))
      .Bind(4, static_cast<int64_t>(q.max_queued_jobs))
      .Bind(5, q.max_host_bytes);
  return upsert.Run();
}

absl::StatusOr<Quota> JobStore::GetQuota(uint32_t uid) {
  absl::MutexLock lock(&mu_);
  MOBIUS_ASSIGN_OR_RETURN(
      auto select,
      db_->Prepare(absl::StrCat("SELECT ", kQuotaColumns, " FROM quotas WHERE uid = ?1")));
  select.Bind(1, static_cast<int64_t>(uid));
  MOBIUS_ASSIGN_OR_RETURN(const bool row, select.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("no quota for uid ", uid));
  return ReadQuotaRow(select);
}

absl::StatusOr<std::vector<Quota>> JobStore::ListQuotas() {
  absl::MutexLock lock(&mu_);
  MOBIUS_ASSIGN_OR_RETURN(
      auto select,
      db_->Prepare(absl::StrCat("SELECT ", kQuotaColumns, " FROM quotas ORDER BY uid")));
  std::vector<Quota> out;
  while (true) {
    MOBIUS_ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    out.push_back(ReadQuotaRow(select));
  }
  return out;
}

absl::Status JobStore::DeleteQuota(uint32_t uid) {
  absl::MutexLock lock(&mu_);
  MOBIUS_ASSIGN_OR_RETURN(auto del, db_->Prepare("DELETE FROM quotas WHERE uid = ?1"));
  del.Bind(1, static_cast<int64_t>(uid));
  MOBIUS_RETURN_IF_ERROR(del.Run());
  if (db_->changes() == 0) return absl::NotFoundError(absl::StrCat("no quota for uid ", uid));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> JobStore::AppendAudit(const AuditEntry& entry) {
  absl::MutexLock lock(&mu_);
  MOBIUS_ASSIGN_OR_RETURN(auto insert,
                          db_->Prepare("INSERT INTO audit (unix_ms, uid, method, target, detail, "
                                       "result_code, result) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
  insert.Bind(1, entry.unix_ms)
      .Bind(2, static_cast<int64_t>(entry.uid))
      .Bind(3, entry.method)
      .Bind(4, entry.target)
      .Bind(5, entry.detail)
      .Bind(6, static_cast<int64_t>(entry.result))
      .Bind(7, absl::StatusCodeToString(entry.result));
  MOBIUS_RETURN_IF_ERROR(insert.Run());
  return db_->last_insert_rowid();
}

absl::StatusOr<std::vector<AuditEntry>> JobStore::ListAudit(int limit) {
  MOBIUS_RETURN_IF_ERROR(CheckLimit("limit", limit));
  absl::MutexLock lock(&mu_);
  MOBIUS_ASSIGN_OR_RETURN(
      auto select, db_->Prepare("SELECT seq, unix_ms, uid, method, target, detail, result_code "
                                "FROM audit ORDER BY seq DESC LIMIT ?1"));
  select.Bind(1, static_cast<int64_t>(limit));
  std::vector<AuditEntry> out;
  while (true) {
    MOBIUS_ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    AuditEntry e;
    e.seq = select.ColumnInt(0);
    e.unix_ms = select.ColumnInt(1);
    e.uid = static_cast<uint32_t>(select.ColumnInt(2));
    e.method = select.ColumnText(3);
    e.target = select.ColumnText(4);
    e.detail = select.ColumnText(5);
    e.result = static_cast<absl::StatusCode>(select.ColumnInt(6));
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace mobius::jobs
