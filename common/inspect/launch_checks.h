// The checks a run config passes before anything of it is started (Launcher::Start runs them in
// its own process for `mobius run`; the daemon runs them as the job's user in its check child,
// inspection.h): the model directory's config.json against the plan (the store layout can be
// made), the token file (it exists, its header is sound, it holds at least one batch), and for a
// resume a complete checkpoint. Errors name the field and the path, never a file's contents:
// INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED (the system error of the file).
#ifndef MOBIUS_COMMON_INSPECT_LAUNCH_CHECKS_H_
#define MOBIUS_COMMON_INSPECT_LAUNCH_CHECKS_H_

#include "absl/status/status.h"
#include "common/run/run_config.h"

namespace mobius::runtime {

absl::Status ValidateLaunch(const RunConfig& run);

}  // namespace mobius::runtime

#endif  // MOBIUS_COMMON_INSPECT_LAUNCH_CHECKS_H_
