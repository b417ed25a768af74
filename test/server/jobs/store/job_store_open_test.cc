// Opening the store: a fresh file gets the schema in WAL mode; garbage, damaged, foreign, newer
// and unreachable files give clear errors naming the file and never crash; a lock held by another
// process past the busy timeout is UNAVAILABLE.
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jobs/store/job_store.h"
#include "server/jobs/store/schema.h"
#include "server/jobs/store/sqlite_db.h"
#include "test/server/jobs/store/store_test_util.h"

namespace mobius::jobs {
namespace {

using ::testing::HasSubstr;
using testing::NewJob;
using testing::TempDir;

// A plain connection for looking at (and tampering with) the file behind the store's back.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
  }
  ~RawDb() { sqlite3_close(db_); }
  void Exec(const std::string& sql) {
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << sql << ": " << (error ? error : "");
    sqlite3_free(error);
  }
  std::string Text(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
    std::string out;
    if (sqlite3_step(stmt) == SQLITE_ROW) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

TEST(JobStoreOpenTest, FreshFileGetsSchemaWalAndSettings) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  auto store = JobStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->CreateJob(NewJob(1, "a")).ok());

  RawDb raw(path);
  EXPECT_EQ(raw.Text("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.Text("PRAGMA application_id"), std::to_string(kApplicationId));
  EXPECT_EQ(raw.Text("SELECT MAX(version) FROM schema_migrations"), std::to_string(kSchemaVersion));
  EXPECT_EQ(raw.Text("SELECT state FROM jobs"), "QUEUED");
  EXPECT_EQ(raw.Text("PRAGMA integrity_check"), "ok");
  EXPECT_TRUE(std::filesystem::exists(path + "-wal"));
}

TEST(JobStoreOpenTest, ReopeningIsANoOpMigration) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  for (int i = 0; i < 3; ++i) {
    auto store = JobStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->CreateJob(NewJob(1, "s" + std::to_string(i))).ok());
  }
  RawDb raw(path);
  EXPECT_EQ(raw.Text("SELECT count(*) FROM schema_migrations"), std::to_string(kSchemaVersion));
  EXPECT_EQ(raw.Text("SELECT count(*) FROM jobs"), "3");
}

TEST(JobStoreOpenTest, GarbageFileIsDataLossNamingTheFileAndLeftUntouched) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  for (size_t size : {100u, 4096u, 65536u}) {
    const std::string garbage = RandomBytes(size, static_cast<uint32_t>(size));
    WriteFile(path, garbage);
    auto store = JobStore::Open(path);
    ASSERT_FALSE(store.ok()) << size;
    EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
    EXPECT_THAT(store.status().message(), HasSubstr(path));
    EXPECT_THAT(store.status().message(), HasSubstr("not a database"));
    EXPECT_THAT(store.status().message(), HasSubstr("move"));
    EXPECT_EQ(ReadFile(path), garbage);
  }
}

TEST(JobStoreOpenTest, DamagedPagesGiveErrorsNotCrashes) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  {
    JobStoreOptions options;
    options.fsync_every_commit = false;
    auto store = JobStore::Open(path, options);
    ASSERT_TRUE(store.ok());
    for (int i = 0; i < 400; ++i) {
      JobRecord job = NewJob(1, "s" + std::to_string(i), std::string(500, 'x') + std::to_string(i));
      ASSERT_TRUE((*store)->CreateJob(job).ok());
    }
  }  // the last connection checkpoints the WAL into the main file
  std::string bytes = ReadFile(path);
  ASSERT_GT(bytes.size(), 40u * 4096);
  const std::string noise = RandomBytes(bytes.size() - 8 * 4096, 7);
  bytes.replace(8 * 4096, noise.size(), noise);  // keep the header and the schema pages
  WriteFile(path, bytes);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");

  auto store = JobStore::Open(path);
  absl::Status first_error = store.status();
  if (store.ok()) {
    for (int i = 1; i <= 400 && first_error.ok(); ++i) {
      first_error = (*store)->GetJob(FormatJobId(i)).status();
    }
    std::string token;
    while (first_error.ok()) {
      auto page = (*store)->ListJobs({}, 100, token);
      first_error = page.status();
      if (!page.ok() || page->next_page_token.empty()) break;
      token = page->next_page_token;
    }
  }
  ASSERT_FALSE(first_error.ok()) << "damage went unnoticed";
  EXPECT_EQ(first_error.code(), absl::StatusCode::kDataLoss) << first_error;
  EXPECT_THAT(first_error.message(), HasSubstr(path));
}

TEST(JobStoreOpenTest, VersionOneFileIsMigratedKeepingItsRows) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  std::string id;
  {
    auto store = JobStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    auto created = (*store)->CreateJob(NewJob(7, "old"));
    ASSERT_TRUE(created.ok()) << created.status();
    id = created->job.id;
    StepReportRow r;
    r.step = 1;
    r.loss = 2.5;
    ASSERT_TRUE((*store)->AppendStepReport(id, r).ok());
  }
  {
    // What a version-1 daemon left: no eval_loss, loss_scale or skipped column, no usage table,
    // no quota limits beyond GPUs and running jobs, no migration 2 to 5.
    RawDb raw(path);
    raw.Exec("DROP TABLE usage");
    raw.Exec("ALTER TABLE quotas DROP COLUMN max_queued_jobs");
    raw.Exec("ALTER TABLE quotas DROP COLUMN max_host_bytes");
    raw.Exec("ALTER TABLE step_reports DROP COLUMN skipped");
    raw.Exec("ALTER TABLE step_reports DROP COLUMN loss_scale");
    raw.Exec("ALTER TABLE step_reports DROP COLUMN eval_loss");
    raw.Exec("DELETE FROM schema_migrations WHERE version >= 2");
  }
  auto store = JobStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto old = (*store)->StepReports(id, 0, 10);
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_EQ(old->size(), 1u);
  EXPECT_EQ((*old)[0].loss, 2.5);
  EXPECT_FALSE((*old)[0].eval_loss.has_value());
  EXPECT_EQ((*old)[0].loss_scale, 0.0);  // migration 3's default: a bf16 step
  EXPECT_FALSE((*old)[0].skipped);
  StepReportRow r;
  r.step = 2;
  r.eval_loss = 2.75;
  r.loss_scale = 32768;
  r.skipped = true;
  ASSERT_TRUE((*store)->AppendStepReport(id, r).ok());
  EXPECT_EQ((*store)->StepReports(id, 1, 10)->at(0).eval_loss, 2.75);
  EXPECT_EQ((*store)->StepReports(id, 1, 10)->at(0).loss_scale, 32768.0);
  EXPECT_TRUE((*store)->StepReports(id, 1, 10)->at(0).skipped);
  UsageRecord u;  // migration 4's table
  u.job_id = id;
  u.started_unix_ms = 1000;
  u.last_unix_ms = 2000;
  u.gpus = 2;
  ASSERT_TRUE((*store)->PutUsage(u).ok());
  EXPECT_EQ((*store)->ListUsage(0)->size(), 1u);
  const Quota q{.uid = 7, .max_gpus = 1, .max_queued_jobs = 2, .max_host_bytes = 1 << 30};
  ASSERT_TRUE((*store)->SetQuota(q).ok());  // migration 5's columns
  EXPECT_EQ(*(*store)->GetQuota(7), q);
  RawDb raw(path);
  EXPECT_EQ(raw.Text("SELECT MAX(version) FROM schema_migrations"), std::to_string(kSchemaVersion));
}

TEST(JobStoreOpenTest, NewerSchemaIsFailedPrecondition) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  ASSERT_TRUE(JobStore::Open(path).ok());
  {
    RawDb raw(path);
    raw.Exec("INSERT INTO schema_migrations (version, applied_unix_ms) VALUES (" +
             std::to_string(kSchemaVersion + 1) + ", 0)");
  }
  auto store = JobStore::Open(path);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << store.status();
  EXPECT_THAT(store.status().message(),
              HasSubstr("schema version " + std::to_string(kSchemaVersion + 1)));
  EXPECT_THAT(store.status().message(), HasSubstr("newer"));
  EXPECT_THAT(store.status().message(), HasSubstr(path));
}

TEST(JobStoreOpenTest, ForeignDatabaseIsRefusedAndNotModified) {
  TempDir dir;
  const std::string path = dir.File("other.db");
  {
    RawDb raw(path);
    raw.Exec(
        "CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT); "
        "INSERT INTO photos (name) VALUES ('cat')");
  }
  const std::string before = ReadFile(path);
  auto store = JobStore::Open(path);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr("not a Mobius job store"));
  EXPECT_EQ(ReadFile(path), before);
  RawDb raw(path);
  EXPECT_EQ(raw.Text("PRAGMA journal_mode"), "delete");

  const std::string other_app = dir.File("app.db");
  { RawDb(other_app).Exec("PRAGMA application_id = 1234"); }
  EXPECT_THAT(JobStore::Open(other_app).status().message(), HasSubstr("application_id 1234"));
}

TEST(JobStoreOpenTest, UnreachablePathsNameTheFile) {
  TempDir dir;
  const std::string missing_dir = dir.File("no/such/dir/jobs.db");
  auto store = JobStore::Open(missing_dir);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr(missing_dir));

  auto directory = JobStore::Open(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_THAT(directory.status().message(), HasSubstr(dir.path()));

  if (geteuid() != 0) {  // root reads anything
    const std::string locked = dir.File("locked.db");
    ASSERT_TRUE(JobStore::Open(locked).ok());
    std::filesystem::permissions(locked, std::filesystem::perms::none);
    auto denied = JobStore::Open(locked);
    EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied) << denied.status();
    EXPECT_THAT(denied.status().message(), HasSubstr(locked));
    // SQLite would quietly open a read-only file read-only; the store refuses at once.
    std::filesystem::permissions(locked, std::filesystem::perms::owner_read);
    auto read_only = JobStore::Open(locked);
    EXPECT_EQ(read_only.status().code(), absl::StatusCode::kPermissionDenied) << read_only.status();
    EXPECT_THAT(read_only.status().message(), HasSubstr("write access"));
  }
}

TEST(JobStoreOpenTest, LockHeldPastTheBusyTimeoutIsUnavailable) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  JobStoreOptions options;
  options.busy_timeout_ms = 50;
  auto store = JobStore::Open(path, options);
  ASSERT_TRUE(store.ok());
  const std::string id = (*store)->CreateJob(NewJob(1, "a"))->job.id;

  RawDb other(path);
  other.Exec("BEGIN EXCLUSIVE");
  auto blocked = (*store)->CreateJob(NewJob(1, "b"));
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kUnavailable) << blocked.status();
  EXPECT_THAT(blocked.status().message(), HasSubstr("SQLITE_BUSY"));
  EXPECT_THAT(blocked.status().message(), HasSubstr("server/jobs/store/"));
  EXPECT_TRUE((*store)->GetJob(id).ok());  // WAL: readers are not blocked by the writer
  other.Exec("COMMIT");
  EXPECT_TRUE((*store)->CreateJob(NewJob(1, "b")).ok());
}

TEST(SqliteErrorsTest, CanonicalCodes) {
  using sqlite::SqliteCodeToStatusCode;
  EXPECT_EQ(SqliteCodeToStatusCode(SQLITE_BUSY, 0), absl::StatusCode::kUnavailable);
  EXPECT_EQ(SqliteCodeToStatusCode(SQLITE_CONSTRAINT_UNIQUE, 0), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(SqliteCodeToStatusCode(SQLITE_CONSTRAINT_FOREIGNKEY, 0),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(SqliteCodeToStatusCode(SQLITE_NOTADB, 0), absl::StatusCode::kDataLoss);
  EXPECT_EQ(SqliteCodeToStatusCode(SQLITE_CORRUPT, 0), absl::StatusCode::kDataLoss);
  EXPECT_EQ(SqliteCodeToStatusCode(SQLITE_CANTOPEN, ENOENT), absl::StatusCode::kNotFound);
  EXPECT_EQ(SqliteCodeToStatusCode(SQLITE_CANTOPEN, EACCES), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(SqliteCodeToStatusCode(SQLITE_IOERR_WRITE, ENOSPC),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(SqliteCodeToStatusCode(SQLITE_FULL, 0), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(SqliteCodeToStatusCode(SQLITE_READONLY, 0), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(SqliteCodeToStatusCode(SQLITE_ERROR, 0), absl::StatusCode::kInternal);
  EXPECT_EQ(sqlite::SqliteCodeName(SQLITE_CONSTRAINT_UNIQUE), "SQLITE_CONSTRAINT");
  EXPECT_EQ(sqlite::SqliteCodeName(SQLITE_NOTADB), "SQLITE_NOTADB");
  EXPECT_EQ(sqlite::SqliteCodeName(SQLITE_DONE), "SQLITE_DONE");
}

}  // namespace
}  // namespace mobius::jobs
