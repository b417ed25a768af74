// Who owns a checkpoint directory: ROOT/OWNER.json records the job and the uid whose checkpoints
// it holds, written by the job's rank 0 before its first checkpoint (O_CREAT|O_EXCL, no symlink
// followed). The rule (docs/operations.md, "Security model"):
//   - a job writes checkpoints only into a directory it owns: one without a record (new, empty or
//     made before records existed) is claimed; one recorded for another job is refused
//     (FAILED_PRECONDITION naming the directory, the job and the uid);
//   - a job resumes only from its own directory; reading another job's checkpoints (to fine-tune
//     from them) needs the file permissions of the job's user, nothing more: the daemon's checks
//     and the workers run as that user.
// The record is not a lock against the owner's own processes: it keeps jobs from mixing their
// checkpoints, the file modes keep users apart.
//
// Thread-safety: functions of the file system; concurrent claims of one directory: one wins.
#ifndef MOBIUS_COMMON_RUN_CHECKPOINT_OWNER_H_
#define MOBIUS_COMMON_RUN_CHECKPOINT_OWNER_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mobius::checkpoint {

inline constexpr char kOwnerFile[] = "OWNER.json";

struct CheckpointOwner {
  std::string job_id;
  uid_t uid = 0;
};

// The record of `root`; nullopt when there is none (or no directory). Errors: a record that
// cannot be read or parsed (INVALID_ARGUMENT / the errno's code, naming the file, never quoting
// it).
absl::StatusOr<std::optional<CheckpointOwner>> ReadCheckpointOwner(const std::string& root);

// OK when `job_id` may write into `root` (no record, or the record is the job's own);
// FAILED_PRECONDITION otherwise, naming the directory, its job and uid.
absl::Status CheckCheckpointOwner(const std::string& root, const std::string& job_id);

// Creates `root` (and its parents) when missing, then records `job_id` and this process's uid
// as its owner unless it has a record already: the job's own is fine, another job's is
// CheckCheckpointOwner's error. With `group` (a group name or gid this process is in), `root`
// becomes that group's with the setgid bit (mode 02750), so what is written inside is the
// group's too and, with umask 027, readable by it; PERMISSION_DENIED / NOT_FOUND naming the group
// otherwise.
absl::Status ClaimCheckpointDir(const std::string& root, const std::string& job_id,
                                const std::string& group = "");

// The gid of `group` (a name or a number); NOT_FOUND naming it when there is no such group.
absl::StatusOr<gid_t> ResolveGroup(const std::string& group);

}  // namespace mobius::checkpoint

#endif  // MOBIUS_COMMON_RUN_CHECKPOINT_OWNER_H_
