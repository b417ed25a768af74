// `mobius usage [--user U] [--since WHEN] [--runs] [--json]`: the accounting of mobiusd's runs
// (JobService.GetUsage): per user (and, for an admin asking about everyone, per group) the runs,
// jobs, GPU-hours, host-memory GiB-hours (the plans' estimates; measured from the job cgroups
// where they exist), tokens and steps inside the window, and each user's fair-share factor now.
// A user sees their own usage; another user's is refused by the daemon (exit 4, PERMISSION_DENIED).
//
// --since: a date (2026-12-01: local midnight), an RFC 3339 time, or a duration back from now
// (30d, 12h, 90m, 45s); empty: everything recorded. Anything else, or a time in the future, is a
// usage error (exit 2) naming the flag.
//
// Not thread-safe; called from main().
#ifndef MOBIUS_CLIENT_USAGE_COMMAND_H_
#define MOBIUS_CLIENT_USAGE_COMMAND_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/job_commands.h"

namespace mobius::cli {

struct Connection;

// --since as Unix milliseconds (0 for empty), relative to `now`.
absl::StatusOr<int64_t> ParseSince(const std::string& since, absl::Time now);

// Runs the verb; returns the exit code.
int RunUsage(Connection& c, const JobCommandOptions& options, std::ostream& out,
             std::ostream& err);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_USAGE_COMMAND_H_
