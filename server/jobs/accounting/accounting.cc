#include "server/jobs/accounting/accounting.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

namespace mobius::jobs {
namespace {

struct Accumulator {
  UsageTotals totals;
  std::set<std::string> jobs;
};

void Add(Accumulator& a, const UsageRecord& r, double seconds) {
  a.totals.runs += 1;
  a.jobs.insert(r.job_id);
  a.totals.gpu_seconds += r.gpus * seconds;
  a.totals.host_gib_seconds += static_cast<double>(r.host_bytes) / (1 << 30) * seconds;
  // The measured integral scaled to the part of the run in the window.
  const double whole = r.seconds();
  if (whole > 0) {
    a.totals.measured_host_gib_seconds +=
        r.measured_host_byte_seconds / (1 << 30) * (seconds / whole);
  }
  a.totals.tokens += r.tokens;
  a.totals.steps += r.steps;
  if (!r.ended) a.totals.running += 1;
}

std::vector<UsageTotals> Finish(std::map<int64_t, Accumulator>& by_key) {
  std::vector<UsageTotals> out;
  for (auto& [key, a] : by_key) {
    a.totals.jobs = static_cast<int>(a.jobs.size());
    out.push_back(a.totals);
  }
  return out;
}

}  // namespace

UsageReport Rollup(const std::vector<UsageRecord>& runs, int64_t since, int64_t now) {
  UsageReport report;
  report.since_unix_ms = since;
  report.until_unix_ms = now;
  std::map<int64_t, Accumulator> users, groups;
  for (const UsageRecord& r : runs) {
    const int64_t from = std::max(r.started_unix_ms, since);
    const int64_t to = std::min(r.last_unix_ms, now);
    if (r.last_unix_ms < since || r.started_unix_ms > now) continue;
    const double seconds = to > from ? static_cast<double>(to - from) / 1e3 : 0.0;
    Accumulator& u = users[r.uid];
    u.totals.uid = r.uid;
    if (!r.user.empty()) u.totals.user = r.user;
    u.totals.gid = r.gid;
    if (!r.group.empty()) u.totals.group = r.group;
    Add(u, r, seconds);
    Accumulator& g = groups[r.gid];
    g.totals.gid = r.gid;
    if (!r.group.empty()) g.totals.group = r.group;
    Add(g, r, seconds);
  }
  report.users = Finish(users);
  report.groups = Finish(groups);
  return report;
}

std::vector<UsageRecord> MergeUsage(std::vector<UsageRecord> older,
                                    const std::vector<UsageRecord>& newer) {
  std::map<std::pair<std::string, int64_t>, UsageRecord> merged;
  for (UsageRecord& r : older) merged[{r.job_id, r.started_unix_ms}] = std::move(r);
  for (const UsageRecord& r : newer) merged[{r.job_id, r.started_unix_ms}] = r;
  std::vector<UsageRecord> out;
  out.reserve(merged.size());
  for (auto& [k, r] : merged) out.push_back(std::move(r));
  std::stable_sort(out.begin(), out.end(), [&](const UsageRecord& a, const UsageRecord& b) {
    return std::tie(a.started_unix_ms, a.job_id) < std::tie(b.started_unix_ms, b.job_id);
  });
  return out;
}

std::map<uint32_t, double> DecayedGpuSeconds(const std::vector<UsageRecord>& runs,
                                             int64_t now_unix_ms, absl::Duration half_life) {
  std::map<uint32_t, double> out;
  const double h = absl::ToDoubleSeconds(half_life);
  for (const UsageRecord& r : runs) {
    // Ages (seconds before now) of the run's end and start; a run in the future counts nothing.
    const double a = std::max(0.0, static_cast<double>(now_unix_ms - r.last_unix_ms) / 1e3);
    const double b = std::max(0.0, static_cast<double>(now_unix_ms - r.started_unix_ms) / 1e3);
    if (b <= a) continue;
    const double seconds =
        h > 0 ? h / std::log(2.0) * (std::exp2(-a / h) - std::exp2(-b / h)) : b - a;
    out[r.uid] += r.gpus * seconds;
  }
  return out;
}

std::map<uint32_t, double> FairShareFactors(const std::map<uint32_t, double>& decayed,
                                            const std::set<uint32_t>& users) {
  std::set<uint32_t> counted = users;
  double total = 0;
  for (const auto& [uid, used] : decayed) {
    if (used > 0) {
      counted.insert(uid);
      total += used;
    }
  }
  std::map<uint32_t, double> out;
  const double n = static_cast<double>(std::max<size_t>(counted.size(), 1));
  for (uint32_t uid : users) {
    auto it = decayed.find(uid);
    const double used = it == decayed.end() ? 0.0 : it->second;
    out[uid] = total > 0 ? std::exp2(-(used / total) * n) : 1.0;
  }
  return out;
}

double OrderScore(const FairShareOptions& o, double factor, absl::Duration waited) {
  const double max = absl::ToDoubleSeconds(o.age_max);
  const double age =
      max > 0 ? std::clamp(absl::ToDoubleSeconds(waited) / max, 0.0, 1.0) : 1.0;
  return o.weight * factor + o.age_weight * age;
}

}  // namespace mobius::jobs
