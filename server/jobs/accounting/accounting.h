// Accounting and fair share over the job store's usage records (job_types.h UsageRecord): pure
// functions, no I/O, no clock (callers pass "now").
//
// Rollup: each run's GPU-seconds (GPUs x wall time) and host-memory GiB-seconds (the plan's
// estimate x wall time; measured from the job cgroup where it exists) counted for the part of the
// run inside [since, now]; tokens and steps of a run that reaches into the window counted whole
// (the step reports are not kept per run). Totals per user and per group (the user's primary group
// at the run's start).
//
// Fair share (docs/scheduler.md "Fair share"), after Slurm's classic factor: each user's usage is
// their GPU-seconds with every second weighted 2^-(age / half_life); U = the user's share of
// everybody's decayed usage, S = 1/N with N the users that count (those with queued or running jobs
// or with usage), and the factor F = 2^(-U/S): 1 for a user with no usage, 0.5 for one with exactly
// their share, towards 0 for one who used everything. Within one priority the scheduler orders
// jobs by weight x F + age_weight x min(1, waited / age_max), higher first, then FIFO.
//
// Thread-safety: none needed (value types, pure functions).
#ifndef MOBIUS_SERVER_JOBS_ACCOUNTING_ACCOUNTING_H_
#define MOBIUS_SERVER_JOBS_ACCOUNTING_ACCOUNTING_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/jobs/store/job_types.h"

namespace mobius::jobs {

// One user's or group's totals over a window.
struct UsageTotals {
  uint32_t uid = 0;      // users (groups: 0)
  std::string user;
  int64_t gid = -1;      // groups (users: their latest run's primary group)
  std::string group;
  int runs = 0;
  int jobs = 0;          // distinct jobs among the runs
  double gpu_seconds = 0;
  double host_gib_seconds = 0;           // the plans' estimates x wall time
  double measured_host_gib_seconds = 0;  // from job cgroups (0 for runs without one)
  int64_t tokens = 0;
  int64_t steps = 0;
  int running = 0;       // runs still open
};

struct UsageReport {
  int64_t since_unix_ms = 0;
  int64_t until_unix_ms = 0;
  std::vector<UsageTotals> users;   // by uid
  std::vector<UsageTotals> groups;  // by gid
};

// The runs' totals inside [since, now]; runs that end before `since` or start after `now` count
// nothing. An open run counts up to its last_unix_ms.
UsageReport Rollup(const std::vector<UsageRecord>& runs, int64_t since_unix_ms, int64_t now_unix_ms);

// `newer` replaces the records of `older` with the same (job_id, started_unix_ms); the result is by
// start time. The daemon merges what it holds in memory (open runs, writes the store refused) over
// the store's rows.
std::vector<UsageRecord> MergeUsage(std::vector<UsageRecord> older,
                                    const std::vector<UsageRecord>& newer);

struct FairShareOptions {
  absl::Duration half_life = absl::Hours(24 * 7);  // <= 0: no decay
  double weight = 1.0;       // 0: fair share off (FIFO within a priority, unless age_weight)
  double age_weight = 0.1;   // waiting time's share of the order
  absl::Duration age_max = absl::Hours(24 * 7);  // waiting this long earns the whole age_weight
};

// Each user's decayed GPU-seconds at `now` (the integral of gpus x 2^-(age/half_life) over the run).
std::map<uint32_t, double> DecayedGpuSeconds(const std::vector<UsageRecord>& runs,
                                             int64_t now_unix_ms, absl::Duration half_life);

// F for each of `users` (see the header comment); every factor is 1 when nobody has usage.
std::map<uint32_t, double> FairShareFactors(const std::map<uint32_t, double>& decayed,
                                            const std::set<uint32_t>& users);

// The order within one priority: weight x factor + age_weight x min(1, waited / age_max).
double OrderScore(const FairShareOptions& options, double factor, absl::Duration waited);

}  // namespace mobius::jobs

#endif  // MOBIUS_SERVER_JOBS_ACCOUNTING_ACCOUNTING_H_
