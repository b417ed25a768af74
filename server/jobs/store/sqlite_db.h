// A thin RAII layer over one SQLite connection, for the job store's use only: opening, cached
// prepared statements, transactions, and SQLite errors as absl::Status.
//
// Every error reads "sqlite DB_PATH: WHAT: <sqlite3_errmsg> (SQLITE_CODE/extended) [file:line]",
// where file:line is the caller's (std::source_location), so a failure printed by the daemon still
// says which statement failed where. Codes are canonical:
//   BUSY/LOCKED -> UNAVAILABLE          CORRUPT/NOTADB -> DATA_LOSS
//   CONSTRAINT_UNIQUE/PRIMARYKEY -> ALREADY_EXISTS, other constraints -> FAILED_PRECONDITION
//   CANTOPEN/IOERR -> from the OS errno (ENOENT -> NOT_FOUND, EACCES -> PERMISSION_DENIED, ...)
//   FULL/NOMEM -> RESOURCE_EXHAUSTED    READONLY/PERM/AUTH -> PERMISSION_DENIED
//   TOOBIG -> INVALID_ARGUMENT          anything else (SQL errors, misuse) -> INTERNAL
//
// Ownership: Database owns the sqlite3 handle and its cached statements; a Statement borrows one
// cached statement and resets it when it goes out of scope.
// Thread-safety: none. The connection is opened in multi-thread mode (SQLITE_OPEN_NOMUTEX); the
// owner (JobStore) serialises all use with its own mutex. Never use a Database across fork().
#ifndef MOBIUS_SERVER_JOBS_STORE_SQLITE_DB_H_
#define MOBIUS_SERVER_JOBS_STORE_SQLITE_DB_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <source_location>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;
struct sqlite3_stmt;

namespace mobius::jobs::sqlite {

// The canonical code for an (extended) SQLite result code; `system_errno` is
// sqlite3_system_errno() for CANTOPEN/IOERR (0 if unknown).
absl::StatusCode SqliteCodeToStatusCode(int rc, int system_errno);
// "SQLITE_BUSY" etc. for the primary code of `rc`.
absl::string_view SqliteCodeName(int rc);

class Statement;

class Database {
 public:
  // Opens (creating if missing) the file read-write. Reads nothing yet: a garbage file is only
  // detected by the first statement.
  static absl::StatusOr<std::unique_ptr<Database>> Open(
      const std::string& path, std::source_location loc = std::source_location::current());
  ~Database();

  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one or more statements that return no rows the caller needs (pragmas, DDL, BEGIN).
  absl::Status Exec(const std::string& sql,
                    std::source_location loc = std::source_location::current());
  // Runs one statement and returns the first column of its first row as text (nullopt: no row).
  absl::StatusOr<std::optional<std::string>> QueryText(
      const std::string& sql, std::source_location loc = std::source_location::current());
  absl::StatusOr<int64_t> QueryInt(const std::string& sql,
                                   std::source_location loc = std::source_location::current());

  // A prepared statement for `sql`, compiled once per connection and cached by its text.
  absl::StatusOr<Statement> Prepare(const std::string& sql,
                                    std::source_location loc = std::source_location::current());

  // The error for result code `rc` just returned by this connection.
  absl::Status Error(int rc, absl::string_view what, std::source_location loc) const;

  int64_t changes() const;
  int64_t last_insert_rowid() const;
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }

 private:
  Database(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}

  std::string path_;
  sqlite3* db_ = nullptr;
  std::map<std::string, sqlite3_stmt*, std::less<>> cache_;
};

// A borrowed cached statement: bind, step, read columns. Reset (and bindings cleared) on
// destruction, so the cached statement is ready for the next user. Indices: binds are 1-based,
// columns 0-based, as in SQLite.
class Statement {
 public:
  Statement(Statement&& other) noexcept
      : db_(other.db_), stmt_(other.stmt_), bind_rc_(other.bind_rc_) {
    other.stmt_ = nullptr;
  }
  Statement& operator=(Statement&&) = delete;
  ~Statement();

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, double value);
  Statement& Bind(int index, absl::string_view value);  // copied by SQLite (SQLITE_TRANSIENT)
  Statement& BindNull(int index);

  // Makes the statement ready to bind and run again (e.g. one INSERT per element of a batch).
  void Reset();

  // Steps once: true = a row is available, false = done.
  absl::StatusOr<bool> Step(std::source_location loc = std::source_location::current());
  // Steps to completion, ignoring rows (INSERT/UPDATE/DELETE).
  absl::Status Run(std::source_location loc = std::source_location::current());

  int64_t ColumnInt(int index) const;
  double ColumnDouble(int index) const;
  std::string ColumnText(int index) const;
  bool ColumnIsNull(int index) const;

 private:
  friend class Database;
  Statement(const Database* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}

  const Database* db_;
  sqlite3_stmt* stmt_;
  int bind_rc_ = 0;  // first failed bind, reported by Step
};

// BEGIN IMMEDIATE (the write lock is taken up front, waiting up to the busy timeout, so two
// writers never deadlock on a read-to-write upgrade); rolled back on destruction unless committed.
class WriteTransaction {
 public:
  static absl::StatusOr<WriteTransaction> Begin(
      Database* db, std::source_location loc = std::source_location::current());
  WriteTransaction(WriteTransaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  WriteTransaction& operator=(WriteTransaction&&) = delete;
  ~WriteTransaction();

  absl::Status Commit(std::source_location loc = std::source_location::current());

 private:
  explicit WriteTransaction(Database* db) : db_(db) {}
  Database* db_;
};

}  // namespace mobius::jobs::sqlite

#endif  // MOBIUS_SERVER_JOBS_STORE_SQLITE_DB_H_
