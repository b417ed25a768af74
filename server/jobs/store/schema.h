// The job store's schema and its migrations, and the per-connection settings.
//
// The schema is a list of numbered migrations (schema.cc); `schema_migrations` records which ones
// were applied. A file is recognised as a Mobius job store by its SQLite application_id ("MOBJ");
// an empty file becomes one. Opening a file written by a newer build (a higher version than
// kSchemaVersion) is FAILED_PRECONDITION: this build does not know what the new columns mean.
//
// Durability: the connection runs in WAL mode. With synchronous=FULL (JobStoreOptions default) a
// commit is fsynced before it returns, so an acknowledged submit survives power loss. With NORMAL
// the WAL is fsynced only at checkpoints: a commit survives a crash or SIGKILL of any process (it
// is in the OS page cache) and the file is never corrupted, but the last commits can roll back
// after a power loss or kernel crash.
//
// Thread-safety: functions take the connection they are given; callers serialise its use.
#ifndef MOBIUS_SERVER_JOBS_STORE_SCHEMA_H_
#define MOBIUS_SERVER_JOBS_STORE_SCHEMA_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/jobs/store/sqlite_db.h"

namespace mobius::jobs {

inline constexpr int kSchemaVersion = 5;
// PRAGMA application_id of a job store: "MOBJ" as a big-endian 32-bit integer.
inline constexpr int32_t kApplicationId = 0x4D4F424A;

struct ConnectionSettings {
  int busy_timeout_ms = 5000;
  bool synchronous_full = true;
};

// Checks the file is empty or a Mobius job store (without writing to it), then sets WAL mode,
// foreign keys, synchronous and the busy timeout on the connection. Errors name the file.
absl::Status ConfigureConnection(sqlite::Database& db, const ConnectionSettings& settings);

// Creates the schema or brings it up to kSchemaVersion in one write transaction (safe when several
// processes open the same file at once: the second finds the work done).
absl::Status MigrateSchema(sqlite::Database& db, int64_t now_unix_ms);

// The highest applied migration; 0 for a file without the schema.
absl::StatusOr<int> SchemaVersion(sqlite::Database& db);

}  // namespace mobius::jobs

#endif  // MOBIUS_SERVER_JOBS_STORE_SCHEMA_H_
