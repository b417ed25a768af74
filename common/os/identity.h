// Who a process acts as: a uid, its primary gid and its supplementary groups, as Slurm's slurmd
// gives each job step its submitter's identity. The daemon looks the submitter up here (the
// passwd and group databases, through NSS) and its children switch to that identity before exec
// (common/subprocess.h, SpawnOptions::identity).
//
// Thread-safety: the functions are thread-safe (getpwuid_r, getgrouplist).
#ifndef MOBIUS_COMMON_OS_IDENTITY_H_
#define MOBIUS_COMMON_OS_IDENTITY_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mobius {

struct Identity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups, the primary one included
  std::string name;           // user name ("uid N" without a passwd entry)
  std::string home;           // home directory ("/" without one)

  bool operator==(const Identity&) const = default;
};

// `uid`'s identity from the user databases, with initgroups' group list. NOT_FOUND when the uid
// has no passwd entry: a job cannot run as an unknown user (there is no primary group or group
// list to give it).
absl::StatusOr<Identity> LookUpIdentity(uid_t uid);

// This process's identity (real uid and gid, its current supplementary groups).
Identity ProcessIdentity();

// Whether this process may switch its children to another uid (effective uid 0).
bool CanSwitchIdentity();

// OK when a child of this process can run as `who`: `who` is this process's uid, or this process
// can switch identities. PERMISSION_DENIED naming both uids otherwise.
absl::Status CheckCanActAs(const Identity& who);

// Whether `who` may read (R_OK), write (W_OK) or search (X_OK) a file with this owner, group and
// mode, by the permission bits alone (no ACLs, no root override): the rule the children apply.
bool ModeAllows(const Identity& who, uid_t owner, gid_t group, mode_t mode, int access_mask);

}  // namespace mobius

#endif  // MOBIUS_COMMON_OS_IDENTITY_H_
