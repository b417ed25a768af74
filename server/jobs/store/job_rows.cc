#include "server/jobs/store/job_rows.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "server/jobs/store/job_store.h"

namespace mobius::jobs::internal {

const char kJobColumns[] =
    "seq, submission_id, uid, user, name, priority, spec_json, state, state_reason, "
    "created_unix_ms, started_unix_ms, finished_unix_ms, restarts, gpus, plan_json, checkpoint, "
    "checkpoint_step, steps_done, total_steps, cancel_requested";

absl::StatusOr<JobRecord> ReadJobRow(const sqlite::Statement& stmt) {
  JobRecord job;
  const int64_t seq = stmt.ColumnInt(0);
  job.id = FormatJobId(seq);
  job.submission_id = stmt.ColumnText(1);
  job.uid = static_cast<uint32_t>(stmt.ColumnInt(2));
  job.user = stmt.ColumnText(3);
  job.name = stmt.ColumnText(4);
  job.priority = static_cast<int32_t>(stmt.ColumnInt(5));
  job.spec_json = stmt.ColumnText(6);
  auto state = ParseJobState(stmt.ColumnText(7));
  if (!state.ok()) {
    return absl::DataLossError(
        absl::StrCat("job ", job.id, ": column state: ", state.status().message()));
  }
  job.state = *state;
  job.state_reason = stmt.ColumnText(8);
  job.created_unix_ms = stmt.ColumnInt(9);
  job.started_unix_ms = stmt.ColumnInt(10);
  job.finished_unix_ms = stmt.ColumnInt(11);
  job.restarts = static_cast<int32_t>(stmt.ColumnInt(12));
  auto gpus = GpusFromText(stmt.ColumnText(13));
  if (!gpus.ok()) {
    return absl::DataLossError(
        absl::StrCat("job ", job.id, ": column gpus: ", gpus.status().message()));
  }
  job.gpus = *std::move(gpus);
  job.plan_json = stmt.ColumnText(14);
  job.checkpoint = stmt.ColumnText(15);
  job.checkpoint_step = stmt.ColumnInt(16);
  job.steps_done = stmt.ColumnInt(17);
  job.total_steps = stmt.ColumnInt(18);
  job.cancel_requested = stmt.ColumnInt(19) != 0;
  return job;
}

std::string GpusToText(const std::vector<int>& gpus) { return absl::StrJoin(gpus, ","); }

absl::StatusOr<std::vector<int>> GpusFromText(absl::string_view text) {
  std::vector<int> gpus;
  if (text.empty()) return gpus;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int gpu = 0;
    if (!absl::SimpleAtoi(part, &gpu) || gpu < 0) {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a list of GPU indices"));
    }
    gpus.push_back(gpu);
  }
  return gpus;
}

absl::Status JobNotFound(int64_t seq) {
  return absl::NotFoundError(absl::StrCat("job ", FormatJobId(seq), " not found"));
}

absl::StatusOr<JobRecord> LoadJob(sqlite::Database& db, int64_t seq) {
  MOBIUS_ASSIGN_OR_RETURN(
      auto select, db.Prepare(absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE seq = ?1")));
  select.Bind(1, seq);
  MOBIUS_ASSIGN_OR_RETURN(const bool found, select.Step());
  if (!found) return JobNotFound(seq);
  return ReadJobRow(select);
}

absl::Status RequireJob(sqlite::Database& db, int64_t seq) {
  MOBIUS_ASSIGN_OR_RETURN(auto select, db.Prepare("SELECT 1 FROM jobs WHERE seq = ?1"));
  select.Bind(1, seq);
  MOBIUS_ASSIGN_OR_RETURN(const bool found, select.Step());
  return found ? absl::OkStatus() : JobNotFound(seq);
}

absl::Status RunJobUpdate(sqlite::Database& db, sqlite::Statement& update, int64_t seq) {
  MOBIUS_RETURN_IF_ERROR(update.Run());
  return db.changes() == 0 ? JobNotFound(seq) : absl::OkStatus();
}

absl::Status CheckLimit(absl::string_view field, int limit) {
  if (limit >= 1 && limit <= kMaxReadLimit) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", limit, " is outside 1..", kMaxReadLimit));
}

}  // namespace mobius::jobs::internal
