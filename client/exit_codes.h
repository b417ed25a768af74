// Exit codes of the `mobius` CLI (documented in `mobius --help` and docs/architecture.md).
#ifndef MOBIUS_CLIENT_EXIT_CODES_H_
#define MOBIUS_CLIENT_EXIT_CODES_H_

#include "absl/status/status.h"

namespace mobius::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitJobFailed = 1;     // a job the command waited for did not succeed
inline constexpr int kExitUsage = 2;         // bad usage, invalid input (file, spec, flag)
inline constexpr int kExitUnreachable = 3;   // the daemon could not be reached in time
inline constexpr int kExitServerError = 4;   // the daemon answered with an error

// Maps a failed status to an exit code: INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED,
// ALREADY_EXISTS, FAILED_PRECONDITION (the request cannot succeed as given) -> 2; UNAVAILABLE / DEADLINE_EXCEEDED -> 3; anything else -> 4.
int ExitCodeFor(const absl::Status& status);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_EXIT_CODES_H_
