// The job manager's state changes and the store: writing them, keeping those the store refuses
// pending (pending_transitions.h), serving the overlay, and the retrier (job_manager.h, "State the
// store cannot write").
#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "server/jobs/service/job_manager_state.h"

namespace mobius::jobs {

using internal::NowMs;

namespace {

std::string Change(const PendingTransition& t) {
  return absl::StrCat(JobStateName(t.from), " -> ", JobStateName(t.to), " (", t.reason, ")");
}

int64_t SeqOf(const std::string& id) {
  absl::StatusOr<int64_t> seq = ParseJobId(id);
  return seq.ok() ? *seq : 0;
}

// One transition into the store: its restart first when it counts one (cleared in `t` once
// counted, so a retry does not count it twice), then the transition at its decided time.
absl::Status WriteOne(JobStore& store, const std::string& id, PendingTransition& t) {
  if (t.count_restart) {
    MOBIUS_RETURN_IF_ERROR(store.IncrementRestarts(id).status());
    t.count_restart = false;
  }
  return store.Transition(id, t.to, t.reason, t.unix_ms).status();
}

// Writes the job's pending transitions in order; true when none are left.
bool FlushJob(JobManager::State& s, const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  while (const std::deque<PendingTransition>* queue = s.pending.Of(id)) {
    PendingTransition t = queue->front();
    const bool counted_restart = t.count_restart;
    absl::Status st = WriteOne(*s.store, id, t);
    if (counted_restart && !t.count_restart) s.pending.RestartCounted(id);
    if (!st.ok() && StoreWriteMayRecover(st)) {
      s.pending.Failed(id, st);
      return false;
    }
    if (st.ok()) {
      const int failures = s.pending.failures(id);
      const double late = (NowMs() - t.unix_ms) / 1e3;
      LOG(WARNING) << "job " << id << ": the job store took " << Change(t) << " after " << failures
                   << " failed attempt(s), " << absl::StrFormat("%.1f", late) << " s late";
      s.DaemonLog(id, absl::StrCat(JobStateName(t.to), ": ", t.reason,
                                   absl::StrFormat(" (recorded %.1f s late: the job store could "
                                                   "not be written)",
                                                   late)));
    } else {
      // The store's record moved on without this daemon (another process?): it is the truth.
      LOG(ERROR) << "job " << id << ": dropping " << Change(t)
                 << ", kept in memory, which the job store now refuses: " << st;
    }
    s.pending.PopFront(id);
  }
  return true;
}

}  // namespace

absl::StatusOr<JobRecord> JobManager::State::GetJob(const std::string& id) {
  MOBIUS_ASSIGN_OR_RETURN(JobRecord r, store->GetJob(id));
  pending.Apply(r);
  return r;
}

absl::StatusOr<std::vector<JobRecord>> JobManager::State::JobsInStates(JobStateSet states) {
  ListJobsPage page;
  MOBIUS_ASSIGN_OR_RETURN(page.jobs, store->JobsInStates(states));
  ListJobsFilter filter;
  filter.states = states;
  MOBIUS_RETURN_IF_ERROR(OverlayPage(filter, /*after_seq=*/0, page));
  return std::move(page.jobs);
}

absl::Status JobManager::State::OverlayPage(const ListJobsFilter& filter, int64_t after_seq,
                                            ListJobsPage& page) {
  if (pending.empty()) return absl::OkStatus();
  const bool every_state = filter.states.empty() || filter.states == JobStateSet::All();
  // The page covers the seqs (after_seq, its last job's]; the last page everything after.
  const int64_t last_seq = page.next_page_token.empty() || page.jobs.empty()
                               ? std::numeric_limits<int64_t>::max()
                               : SeqOf(page.jobs.back().id);
  std::vector<JobRecord> out;
  for (JobRecord& r : page.jobs) {
    pending.Apply(r);
    if (every_state || filter.states.Contains(r.state)) out.push_back(std::move(r));
  }
  if (!every_state) {
    // Pending jobs the store's filter left out because their stored state is not in it.
    for (const std::string& id : pending.Jobs()) {
      const int64_t seq = SeqOf(id);
      if (seq <= after_seq || seq > last_seq) continue;
      MOBIUS_ASSIGN_OR_RETURN(JobRecord r, store->GetJob(id));
      if (filter.uid.has_value() && r.uid != *filter.uid) continue;
      if (filter.states.Contains(r.state)) continue;  // in the page already (or dropped above)
      pending.Apply(r);
      if (filter.states.Contains(r.state)) out.push_back(std::move(r));
    }
    std::sort(out.begin(), out.end(),
              [](const JobRecord& a, const JobRecord& b) { return SeqOf(a.id) < SeqOf(b.id); });
  }
  page.jobs = std::move(out);
  return absl::OkStatus();
}

absl::Status JobManager::State::Transition(const std::string& id, JobState to,
                                           const std::string& reason, bool count_restart) {
  PendingTransition t{
      .to = to, .reason = reason, .unix_ms = NowMs(), .count_restart = count_restart};
  // Behind changes not written yet this one waits its turn, unless the store takes them now.
  if (pending.Has(id) && !FlushJob(*this, id)) {
    t.from = *pending.LastState(id);
    MOBIUS_RETURN_IF_ERROR(CheckTransition(id, t.from, to));
    LOG(WARNING) << "job " << id << ": " << Change(t) << " kept in memory behind "
                 << pending.Of(id)->size() << " earlier change(s) the job store has not taken";
    pending.Add(id, std::move(t));
    Bump();
    return absl::OkStatus();
  }
  absl::StatusOr<JobRecord> before = store->GetJob(id);
  if (before.ok()) t.from = before->state;
  absl::Status st = WriteOne(*store, id, t);
  if (st.ok()) {
    DaemonLog(id, absl::StrCat(JobStateName(to), ": ", reason));
    return absl::OkStatus();
  }
  if (!StoreWriteMayRecover(st)) return st;
  if (before.ok()) MOBIUS_RETURN_IF_ERROR(CheckTransition(id, before->state, to));
  LOG(ERROR) << "job " << id << ": the job store did not take " << Change(t) << ": " << st
             << "; the daemon keeps the change in memory, serves it, and writes it when the "
             << "store takes it (retrying from every "
             << absl::FormatDuration(options.store_retry_initial) << " up to every "
             << absl::FormatDuration(options.store_retry_max) << ")";
  pending.Add(id, std::move(t));
  pending.Failed(id, st);
  retry_wake.SignalAll();
  Bump();
  return absl::OkStatus();
}

absl::Status JobManager::State::TransitionNow(const std::string& id, JobState to,
                                              const std::string& reason) {
  if (pending.Has(id) && !FlushJob(*this, id)) {
    return absl::UnavailableError(
        absl::StrCat("earlier state changes of ", id,
                     " are not written yet: ", pending.last_error(id).message()));
  }
  PendingTransition t{.to = to, .reason = reason, .unix_ms = NowMs()};
  MOBIUS_RETURN_IF_ERROR(WriteOne(*store, id, t));
  DaemonLog(id, absl::StrCat(JobStateName(to), ": ", reason));
  return absl::OkStatus();
}

bool JobManager::State::FlushPending() {
  for (const std::string& id : pending.Jobs()) FlushJob(*this, id);
  return pending.empty();
}

void JobManager::State::RetryLoop() {
  absl::MutexLock lock(&mu);
  absl::Duration delay = options.store_retry_initial;
  absl::Time touch = absl::Now() + options.usage_interval;
  while (!stopping) {
    if (absl::Now() >= touch) {  // accounting: the runs in progress, written every interval
      TouchUsage();
      touch = absl::Now() + options.usage_interval;
    }
    if (pending.empty() && start_refused.empty() && !usage.dirty()) {
      delay = options.store_retry_initial;
      retry_wake.WaitWithTimeout(&mu, std::max(touch - absl::Now(), absl::ZeroDuration()));
      continue;
    }
    // Signals meanwhile (more changes kept pending) do not shorten the backoff.
    const absl::Time until = absl::Now() + delay;
    while (!stopping && absl::Now() < until) retry_wake.WaitWithTimeout(&mu, until - absl::Now());
    if (stopping) break;
    if (FlushPending() && !start_refused.empty()) Reschedule();  // it retries those starts
    FlushUsage();
    Bump();
    const bool stuck = !pending.empty() || !start_refused.empty() || usage.dirty();
    delay = stuck ? std::min(delay * 2, options.store_retry_max) : options.store_retry_initial;
  }
}

void JobManager::State::FinalFlush() {
  if (!FlushUsage()) {
    for (const UsageRecord& r : usage.Records()) {
      LOG(ERROR) << "stopping: the usage of job " << r.job_id << "'s run (" << r.gpu_seconds()
                 << " GPU-seconds) is not in the job store: " << r.uid << " is not charged for it";
    }
  }
  if (FlushPending()) return;
  for (const std::string& id : pending.Jobs()) {
    absl::StatusOr<JobRecord> stored = store->GetJob(id);
    for (const PendingTransition& t : *pending.Of(id)) {
      LOG(ERROR) << "stopping: job " << id << ": " << Change(t)
                 << " is not in the job store: " << pending.last_error(id)
                 << "; the store still has the job "
                 << (stored.ok() ? std::string(JobStateName(stored->state)) : "(unreadable)")
                 << ", as the next start will find it (a RUNNING job whose run completed is "
                 << "SUCCEEDED by its completion record; others are requeued)";
    }
  }
}

}  // namespace mobius::jobs
