// The daemon's state directory and who may read what in it (docs/operations.md, "Security
// model"):
//   STATE/                 root (the daemon's user), 0711: others may pass, not list
//   STATE/jobs.db*         0600: jobs, specs, logs and the audit are read through the RPCs only
//   STATE/jobs/<id>/run-N/ 0700: the daemon's record of each run's config
//   STATE/users/           0711
//   STATE/users/<uid>/     the user's, 0700: everything the user's jobs write by default
//       jobs/<id>/checkpoints/   a job's default checkpoint directory (written by its workers)
//       datasets/                the user's token-file cache (written by the user's tokenizer)
// The daemon creates users/<uid>/ and its datasets/ while they are still its own and hands them
// over (chown) before anyone else can reach them; it creates nothing inside them afterwards: the
// job's processes, running as the user, do.
//
// Thread-safety: functions of the file system; concurrent EnsureUserDir calls for one uid are
// fine (mkdir's EEXIST is taken as done).
#ifndef MOBIUS_SERVER_JOBS_SERVICE_STATE_DIRS_H_
#define MOBIUS_SERVER_JOBS_SERVICE_STATE_DIRS_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "common/os/identity.h"

namespace mobius::jobs {

// Creates the layout above (what is missing) and sets the modes of what exists (an older daemon's
// state directory is tightened). FAILED_PRECONDITION naming the path when it cannot.
absl::Status PrepareStateDir(const std::string& state_dir);

// Sets jobs.db and its -wal / -shm files to 0600 (after the store opened them).
void RestrictDatabaseFiles(const std::string& state_dir);

std::string UserStateDir(const std::string& state_dir, uid_t uid);
std::string DefaultCheckpointDir(const std::string& state_dir, uid_t uid,
                                 const std::string& job_id);
std::string UserDatasetCacheDir(const std::string& state_dir, uid_t uid);

// users/<uid>/ and users/<uid>/datasets/, made by this process and handed to `owner` (0700) when
// users/<uid> is new. An existing users/<uid> must be a directory of `owner`'s (not a symlink),
// else FAILED_PRECONDITION; nothing inside it is touched (the job's processes create what is
// missing, as the user).
absl::Status EnsureUserStateDir(const std::string& state_dir, uid_t uid, const Identity& owner);

}  // namespace mobius::jobs

#endif  // MOBIUS_SERVER_JOBS_SERVICE_STATE_DIRS_H_
