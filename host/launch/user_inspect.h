// The daemon's checks of a job's files with the job's identity: InspectAsUser starts
// `mobius-inspect fd:3` (host/launch/inspect_main.cc) as `identity` (common/subprocess.h: groups,
// gid, uid, no_new_privs) with the request in a sealed memory file, and returns the child's
// InspectResult (common/inspect/inspection.h). The daemon itself opens no path of a spec: what the
// user cannot read is the user's PERMISSION_DENIED, naming the path.
//
// Errors (the call's, not the checks'): INTERNAL when the child cannot start or prints no result,
// DEADLINE_EXCEEDED when it runs past `timeout` (a hung network file system: the child is killed).
// Thread-safety: may be called from any thread.
#ifndef MOBIUS_HOST_LAUNCH_USER_INSPECT_H_
#define MOBIUS_HOST_LAUNCH_USER_INSPECT_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/inspect/inspection.h"
#include "common/os/identity.h"

namespace mobius::launch {

struct UserInspectOptions {
  std::string binary;                // mobius-inspect
  std::optional<Identity> identity;  // unset: this process's own
  absl::Duration timeout = absl::Seconds(120);
};

absl::StatusOr<inspect::InspectResult> InspectAsUser(const inspect::InspectRequest& request,
                                                     const UserInspectOptions& options);

}  // namespace mobius::launch

#endif  // MOBIUS_HOST_LAUNCH_USER_INSPECT_H_
