#include "client/usage_command.h"

#include <pwd.h>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/job_connection.h"

namespace mobius::cli {
namespace {

absl::StatusOr<uint32_t> ResolveUser(const std::string& user) {
  uint32_t uid = 0;
  if (absl::SimpleAtoi(user, &uid)) return uid;
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--user: no such user \"", user, "\""));
  }
  return found->pw_uid;
}

std::string When(int64_t unix_ms) {
  if (unix_ms <= 0) return "the first record";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S %Z", absl::FromUnixMillis(unix_ms),
                          absl::LocalTimeZone());
}

std::string Hours(double seconds) { return absl::StrFormat("%.3f", seconds / 3600); }

void PrintTotals(const v1::UsageTotals& t, bool user, std::ostream& out) {
  const std::string who = user ? (t.user().empty() ? absl::StrCat("uid ", t.uid()) : t.user())
                               : (t.group().empty() ? absl::StrCat("gid ", t.gid()) : t.group());
  out << absl::StrFormat("%-14s %5d %5d %10s %12s %12s %12d %7d %7d %s\n", who, t.runs(), t.jobs(),
                         Hours(t.gpu_seconds()), Hours(t.host_gib_seconds()),
                         t.measured_host_gib_seconds() > 0 ? Hours(t.measured_host_gib_seconds())
                                                           : std::string("-"),
                         t.tokens(), t.steps(), t.running(),
                         user && t.fair_share() > 0 ? absl::StrFormat("%.2f", t.fair_share())
                                                    : std::string("-"));
}

}  // namespace

absl::StatusOr<int64_t> ParseSince(const std::string& since, absl::Time now) {
  if (since.empty()) return 0;
  absl::Time t;
  std::string error;
  absl::Duration ago;
  const std::string lower = absl::AsciiStrToLower(since);
  double days = 0;
  if (lower.size() > 1 && lower.back() == 'd' &&
      absl::SimpleAtod(lower.substr(0, lower.size() - 1), &days) && days >= 0) {
    t = now - absl::Hours(24 * days);
  } else if (absl::ParseDuration(lower, &ago) && ago >= absl::ZeroDuration()) {
    t = now - ago;
  } else if (absl::ParseTime("%Y-%m-%d", since, absl::LocalTimeZone(), &t, &error) ||
             absl::ParseTime(absl::RFC3339_full, since, &t, &error)) {
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--since: cannot read \"", since,
        "\": give a date (2026-12-01), an RFC 3339 time (2026-12-01T08:00:00Z) or a duration "
        "back from now (30d, 12h, 90m)"));
  }
  if (t > now) {
    return absl::InvalidArgumentError(absl::StrCat("--since ", since, ": in the future"));
  }
  return std::max<int64_t>(absl::ToUnixMillis(t), 0);
}

int RunUsage(Connection& c, const JobCommandOptions& o, std::ostream& out, std::ostream& err) {
  v1::GetUsageRequest req;
  absl::StatusOr<int64_t> since = ParseSince(o.since, absl::Now());
  if (!since.ok()) return Fail(err, "usage", since.status());
  req.set_since_unix_ms(*since);
  if (!o.user.empty()) {
    absl::StatusOr<uint32_t> uid = ResolveUser(o.user);
    if (!uid.ok()) return Fail(err, "usage", uid.status());
    req.set_uid(*uid);
  }
  req.set_runs(o.runs);
  v1::GetUsageResponse r;
  grpc::ClientContext ctx;
  c.Deadline(&ctx);
  if (absl::Status s = c.Explain(c.jobs->GetUsage(&ctx, req, &r)); !s.ok()) {
    return Fail(err, "usage", s);
  }
  if (o.json) {
    out << ToJson(r) << "\n";
    return kExitOk;
  }
  out << "usage from " << When(r.since_unix_ms()) << " to " << When(r.until_unix_ms()) << "\n";
  const char* header = "%-14s %5s %5s %10s %12s %12s %12s %7s %7s %s\n";
  out << absl::StrFormat(header, "USER", "RUNS", "JOBS", "GPU-HOURS", "HOST-GIB-H", "MEASURED",
                         "TOKENS", "STEPS", "RUNNING", "SHARE");
  for (const v1::UsageTotals& t : r.users()) PrintTotals(t, true, out);
  if (r.users().empty()) out << "(no runs in this window)\n";
  if (!r.groups().empty()) {
    out << "\n"
        << absl::StrFormat(header, "GROUP", "RUNS", "JOBS", "GPU-HOURS", "HOST-GIB-H",
                           "MEASURED", "TOKENS", "STEPS", "RUNNING", "");
    for (const v1::UsageTotals& t : r.groups()) PrintTotals(t, false, out);
  }
  if (!r.runs().empty()) {
    out << "\n"
        << absl::StrFormat("%-10s %-14s %4s %-25s %10s %10s %12s %7s %s\n", "JOB", "USER", "GPUS",
                           "STARTED", "WALL-S", "GPU-HOURS", "TOKENS", "STEPS", "STATE");
    for (const v1::RunUsage& u : r.runs()) {
      out << absl::StrFormat("%-10s %-14s %4d %-25s %10.1f %10s %12d %7d %s\n", u.job_id(),
                             u.user().empty() ? absl::StrCat("uid ", u.uid()) : u.user(), u.gpus(),
                             When(u.started_unix_ms()),
                             (u.last_unix_ms() - u.started_unix_ms()) / 1e3,
                             Hours(u.gpu_seconds()), u.tokens(), u.steps(),
                             u.ended() ? "ended" : "running");
    }
    if (r.runs_omitted() > 0) {
      out << "(" << r.runs_omitted() << " older runs in this window not listed; narrow --since)\n";
    }
  }
  return kExitOk;
}

}  // namespace mobius::cli
