#include "server/jobs/store/sqlite_db.h"

#include <sqlite3.h>

#include <cstring>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mobius::jobs::sqlite {
namespace {

// The repository-relative file name (server/jobs/store/x.cc), as common/errors.cc prints it.
std::string Where(const std::source_location& loc) {
  absl::string_view path(loc.file_name());
  for (absl::string_view root : {"/server/", "/common/", "/test/", "/bench/"}) {
    const size_t pos = path.rfind(root);
    if (pos != absl::string_view::npos) {
      return absl::StrCat(path.substr(pos + 1), ":", loc.line());
    }
  }
  const size_t slash = path.rfind('/');
  return absl::StrCat(slash == absl::string_view::npos ? path : path.substr(slash + 1), ":",
                      loc.line());
}

std::string StrError(int error_number) {
  char buf[256];
  return std::string(strerror_r(error_number, buf, sizeof(buf)));  // GNU variant
}

}  // namespace

absl::string_view SqliteCodeName(int rc) {
  // Indexed by the primary result code (sqlite3.h numbers them 0..26 in this order).
  static constexpr const char* kNames[] = {
      "SQLITE_OK",       "SQLITE_ERROR",     "SQLITE_INTERNAL", "SQLITE_PERM",
      "SQLITE_ABORT",    "SQLITE_BUSY",      "SQLITE_LOCKED",   "SQLITE_NOMEM",
      "SQLITE_READONLY", "SQLITE_INTERRUPT", "SQLITE_IOERR",    "SQLITE_CORRUPT",
      "SQLITE_NOTFOUND", "SQLITE_FULL",      "SQLITE_CANTOPEN", "SQLITE_PROTOCOL",
      "SQLITE_EMPTY",    "SQLITE_SCHEMA",    "SQLITE_TOOBIG",   "SQLITE_CONSTRAINT",
      "SQLITE_MISMATCH", "SQLITE_MISUSE",    "SQLITE_NOLFS",    "SQLITE_AUTH",
      "SQLITE_FORMAT",   "SQLITE_RANGE",     "SQLITE_NOTADB"};
  static_assert(SQLITE_NOTADB == 26 && SQLITE_CONSTRAINT == 19 && SQLITE_BUSY == 5);
  const int primary = rc & 0xff;
  if (primary == SQLITE_ROW) return "SQLITE_ROW";
  if (primary == SQLITE_DONE) return "SQLITE_DONE";
  return primary < static_cast<int>(std::size(kNames)) ? kNames[primary] : "SQLITE_?";
}

absl::StatusCode SqliteCodeToStatusCode(int rc, int system_errno) {
  switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
      return absl::StatusCode::kOk;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_PROTOCOL:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    case SQLITE_CONSTRAINT:
      return rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY
                 ? absl::StatusCode::kAlreadyExists
                 : absl::StatusCode::kFailedPrecondition;
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
      return system_errno != 0 ? absl::ErrnoToStatusCode(system_errno)
                               : absl::StatusCode::kUnavailable;
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return absl::StatusCode::kPermissionDenied;
    case SQLITE_TOOBIG:
      return absl::StatusCode::kInvalidArgument;
    case SQLITE_ABORT:
    case SQLITE_INTERRUPT:
    case SQLITE_SCHEMA:
      return absl::StatusCode::kAborted;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path,
                                                         std::source_location loc) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  // Even a failed open returns a handle (for the message) that must be closed.
  std::unique_ptr<Database> out(new Database(path, db));
  if (db == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("sqlite ", path, ": cannot allocate a connection [", Where(loc), "]"));
  }
  if (rc != SQLITE_OK) return out->Error(rc, "open", loc);
  sqlite3_extended_result_codes(db, 1);
  // SQLite silently falls back to read-only when the file is not writable; every write would
  // then fail later, far from the cause.
  if (sqlite3_db_readonly(db, "main") == 1) {
    return absl::PermissionDeniedError(
        absl::StrCat("sqlite ", path, ": opened read-only (no write permission on the file) [",
                     Where(loc), "]"));
  }
  return out;
}

Database::~Database() {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

absl::Status Database::Error(int rc, absl::string_view what, std::source_location loc) const {
  const int sys = db_ != nullptr ? sqlite3_system_errno(db_) : 0;
  const bool os_level = (rc & 0xff) == SQLITE_CANTOPEN || (rc & 0xff) == SQLITE_IOERR;
  std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  if (os_level && sys != 0) absl::StrAppend(&message, ": ", StrError(sys));
  return absl::Status(
      SqliteCodeToStatusCode(rc, os_level ? sys : 0),
      absl::StrCat("sqlite ", path_, ": ", what, ": ", message, " (", SqliteCodeName(rc),
                   rc > 0xff ? absl::StrCat("/", rc) : std::string(), ") [", Where(loc), "]"));
}

absl::Status Database::Exec(const std::string& sql, std::source_location loc) {
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return Error(rc, sql, loc);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> Database::QueryText(const std::string& sql,
                                                               std::source_location loc) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(rc, sql, loc);
  std::optional<std::string> out;
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(stmt, 0);
    out = text != nullptr ? std::string(reinterpret_cast<const char*>(text)) : std::string();
    rc = SQLITE_OK;
  } else if (rc == SQLITE_DONE) {
    rc = SQLITE_OK;
  }
  absl::Status status = rc == SQLITE_OK ? absl::OkStatus() : Error(rc, sql, loc);
  sqlite3_finalize(stmt);
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<int64_t> Database::QueryInt(const std::string& sql, std::source_location loc) {
  auto text = QueryText(sql, loc);
  if (!text.ok()) return text.status();
  if (!text->has_value()) {
    return absl::InternalError(
        absl::StrCat("sqlite ", path_, ": ", sql, ": returned no row [", Where(loc), "]"));
  }
  return static_cast<int64_t>(std::strtoll((*text)->c_str(), nullptr, 10));
}

absl::StatusOr<Statement> Database::Prepare(const std::string& sql, std::source_location loc) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    sqlite3_stmt* stmt = nullptr;
    const int rc =
        sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return Error(rc, absl::StrCat("prepare ", sql), loc);
    it = cache_.emplace(sql, stmt).first;
  }
  return Statement(this, it->second);
}

int64_t Database::changes() const { return sqlite3_changes64(db_); }
int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

Statement::~Statement() {
  if (stmt_ == nullptr) return;
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  bind_rc_ = SQLITE_OK;
}

Statement& Statement::Bind(int index, int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Statement& Statement::Bind(int index, double value) {
  const int rc = sqlite3_bind_double(stmt_, index, value);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Statement& Statement::Bind(int index, absl::string_view value) {
  // A non-null pointer even for "" so the value is '' and not NULL.
  const int rc = sqlite3_bind_text64(stmt_, index, value.empty() ? "" : value.data(), value.size(),
                                     SQLITE_TRANSIENT, SQLITE_UTF8);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Statement& Statement::BindNull(int index) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

absl::StatusOr<bool> Statement::Step(std::source_location loc) {
  if (bind_rc_ != SQLITE_OK) {
    return db_->Error(bind_rc_, absl::StrCat("bind ", sqlite3_sql(stmt_)), loc);
  }
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->Error(rc, sqlite3_sql(stmt_), loc);
}

absl::Status Statement::Run(std::source_location loc) {
  while (true) {
    auto row = Step(loc);
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

int64_t Statement::ColumnInt(int index) const { return sqlite3_column_int64(stmt_, index); }
double Statement::ColumnDouble(int index) const { return sqlite3_column_double(stmt_, index); }
bool Statement::ColumnIsNull(int index) const {
  return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

std::string Statement::ColumnText(int index) const {
  // Pointer first, then the byte count (SQLite's documented order); text may hold NUL bytes.
  const auto* text = static_cast<const char*>(sqlite3_column_blob(stmt_, index));
  const int bytes = sqlite3_column_bytes(stmt_, index);
  return text != nullptr ? std::string(text, bytes) : std::string();
}

absl::StatusOr<WriteTransaction> WriteTransaction::Begin(Database* db, std::source_location loc) {
  absl::Status status = db->Exec("BEGIN IMMEDIATE", loc);
  if (!status.ok()) return status;
  return WriteTransaction(db);
}

WriteTransaction::~WriteTransaction() {
  if (db_ != nullptr && !sqlite3_get_autocommit(db_->handle())) {
    // Nothing useful to do with a failed rollback: SQLite rolls back on close anyway.
    sqlite3_exec(db_->handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

absl::Status WriteTransaction::Commit(std::source_location loc) {
  absl::Status status = db_->Exec("COMMIT", loc);
  if (status.ok()) db_ = nullptr;
  return status;
}

}  // namespace mobius::jobs::sqlite
