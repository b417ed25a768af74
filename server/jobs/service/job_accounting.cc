// The job manager's accounting (job_manager.h "account"): runs' usage records, fair-share scores
// for the scheduler, and the Usage call.
#include <grp.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/os/identity.h"
#include "glog/logging.h"
#include "server/jobs/service/job_manager_state.h"

namespace mobius::jobs {

using internal::NowMs;

namespace {

std::string GroupName(gid_t gid) {
  std::vector<char> buf(16384);
  struct group gr {};
  struct group* out = nullptr;
  if (getgrgid_r(gid, &gr, buf.data(), buf.size(), &out) == 0 && out != nullptr) {
    return out->gr_name;
  }
  return absl::StrCat("gid ", gid);
}

}  // namespace

void JobManager::State::StartUsage(const JobRecord& job, const std::vector<int>& gpus,
                                   int64_t host_bytes) {
  UsageRecord r;
  r.job_id = job.id;
  r.started_unix_ms = NowMs();
  r.uid = job.uid;
  r.user = job.user;  // the group: UsageGroupOf, from the supervisor (no NSS lookup under the lock)
  r.gpus = static_cast<int32_t>(gpus.size());
  r.host_bytes = std::max<int64_t>(host_bytes, 0);
  usage.Start(std::move(r));
  FlushUsage();
}

void JobManager::State::UsageGroupOf(const std::string& id, uid_t uid,
                                     const std::optional<Identity>& identity) {
  std::optional<Identity> who = identity;
  if (!who.has_value()) {  // the daemon's own user runs the job (unprivileged): look it up
    if (absl::StatusOr<Identity> found = LookUpIdentity(uid); found.ok()) who = *found;
  }
  if (!who.has_value()) return;
  const std::string group = GroupName(who->gid);
  absl::MutexLock lock(&mu);
  usage.SetGroup(id, who->gid, group);
}

void JobManager::State::StepUsage(const std::string& id, int64_t tokens, int64_t memory_bytes) {
  // In memory only: the retrier writes open runs every usage_interval (no store commit per step
  // under the manager's lock).
  const UsageDelta d = usage.Step(id, tokens, NowMs(), memory_bytes);
  if (options.observer != nullptr) options.observer->UsageAccrued(d);
}

void JobManager::State::AccrueUsage() {
  for (const UsageDelta& d : usage.Touch(NowMs())) {
    if (options.observer != nullptr) options.observer->UsageAccrued(d);
  }
}

void JobManager::State::TouchUsage() {
  AccrueUsage();
  FlushUsage();
}

void JobManager::State::EndUsage(const std::string& id) {
  const UsageDelta d = usage.End(id, NowMs());
  if (options.observer != nullptr) options.observer->UsageAccrued(d);
  FlushUsage();
}

bool JobManager::State::FlushUsage() {
  const absl::Status st = usage.Flush([this](const UsageRecord& r) {
    absl::Status put = store->PutUsage(r);
    if (!put.ok() && !StoreWriteMayRecover(put)) {
      // A retry would only repeat it (the job is unknown to the store): say so once, drop it.
      LOG(ERROR) << "accounting: the usage of " << r.job_id << " (run started " << r.started_unix_ms
                 << ") is not recorded: " << put;
      return absl::OkStatus();
    }
    return put;
  });
  write_log.Record("accounting", "usage records", st);
  if (!st.ok()) retry_wake.SignalAll();
  return st.ok();
}

std::vector<UsageRecord> JobManager::State::UsageSince(int64_t since, std::optional<uint32_t> uid) {
  std::vector<UsageRecord> stored;
  if (absl::StatusOr<std::vector<UsageRecord>> rows = store->ListUsage(since, uid); rows.ok()) {
    stored = *std::move(rows);
  } else {
    write_log.Record("accounting", "usage reads", rows.status());
  }
  std::vector<UsageRecord> held;
  for (UsageRecord& r : usage.Records()) {
    if (r.last_unix_ms >= since && (!uid || r.uid == *uid)) held.push_back(std::move(r));
  }
  return MergeUsage(std::move(stored), held);
}

std::map<uint32_t, double> JobManager::State::DecayedUsageNow() {
  const absl::Duration half_life = options.fair_share.half_life;
  const double h = absl::ToDoubleSeconds(half_life);
  const int64_t now = NowMs();
  const std::vector<UsageRecord> held = usage.Records();
  if (share_cache.at_ms < 0 || share_cache.generation != usage.ended_written()) {
    // Usage older than ten half-lives weighs under 0.1%: not read.
    const int64_t since = h > 0 ? now - static_cast<int64_t>(h * 10 * 1e3) : 0;
    std::set<std::pair<std::string, int64_t>> in_ledger;
    for (const UsageRecord& r : held) in_ledger.insert({r.job_id, r.started_unix_ms});
    std::vector<UsageRecord> stored;
    if (absl::StatusOr<std::vector<UsageRecord>> rows = store->ListUsage(since); rows.ok()) {
      for (UsageRecord& r : *rows) {
        if (!in_ledger.count({r.job_id, r.started_unix_ms})) stored.push_back(std::move(r));
      }
    } else {
      write_log.Record("accounting", "usage reads", rows.status());
    }
    share_cache.decayed = DecayedGpuSeconds(stored, now, half_life);
    share_cache.at_ms = now;
    share_cache.generation = usage.ended_written();
  }
  const double fade =
      h > 0 ? std::exp2(-static_cast<double>(now - share_cache.at_ms) / 1e3 / h) : 1.0;
  std::map<uint32_t, double> out;
  for (const auto& [uid, used] : share_cache.decayed) out[uid] = used * fade;
  for (const auto& [uid, used] : DecayedGpuSeconds(held, now, half_life)) out[uid] += used;
  return out;
}

void JobManager::State::ScoreRequests(std::vector<JobRequest>& requests,
                                      const std::map<std::string, int64_t>& created_ms) {
  const FairShareOptions& fs = options.fair_share;
  const int64_t now = NowMs();
  std::set<uint32_t> users;
  for (const JobRequest& r : requests) users.insert(r.uid);
  for (const auto& [id, r] : running) users.insert(r.uid);
  share_factors = FairShareFactors(DecayedUsageNow(), users);
  for (JobRequest& r : requests) {
    auto c = created_ms.find(r.job_id);
    const absl::Duration waited =
        c == created_ms.end() ? absl::ZeroDuration() : absl::Milliseconds(now - c->second);
    r.order_score = OrderScore(fs, share_factors[r.uid], waited);
  }
  if (options.observer != nullptr) options.observer->FairShare(share_factors);
}

absl::StatusOr<UsageView> JobManager::Usage(const Caller& caller, const UsageQuery& query) {
  std::optional<uint32_t> uid = query.uid;
  if (!caller.admin) {
    if (uid.has_value() && *uid != caller.uid) {
      return absl::PermissionDeniedError(
          absl::StrCat("usage of uid ", *uid, ": only admins see other users' usage"));
    }
    uid = caller.uid;
  }
  if (query.since_unix_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("since_unix_ms: ", query.since_unix_ms, " is negative"));
  }
  UsageView view;
  absl::MutexLock lock(&s_->mu);
  s_->AccrueUsage();  // the runs in progress up to now (written by the retrier, not by a read)
  std::vector<UsageRecord> runs = s_->UsageSince(query.since_unix_ms, uid);
  view.report = Rollup(runs, query.since_unix_ms, NowMs());
  if (uid.has_value()) view.report.groups.clear();  // a group's total is more than one user's
  for (const UsageTotals& u : view.report.users) {
    auto it = s_->share_factors.find(u.uid);
    if (it != s_->share_factors.end()) view.fair_share[u.uid] = it->second;
  }
  if (query.runs) {
    if (runs.size() > static_cast<size_t>(kMaxReadLimit)) {
      view.runs_omitted = static_cast<int64_t>(runs.size()) - kMaxReadLimit;
      runs.erase(runs.begin(), runs.begin() + view.runs_omitted);
    }
    view.runs = std::move(runs);
  }
  return view;
}

}  // namespace mobius::jobs
