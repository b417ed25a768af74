// UsageLedger: the accounting records of the runs the daemon holds in memory (open runs, and ended
// runs the job store has not taken yet), and what each update accrued, for the Prometheus
// counters (job_observer.h).
//
// Life of a record: Start when the scheduler's start is in the store (the run holds its GPUs from
// then), Step on every step report (tokens, steps, the job cgroup's memory), Touch every
// JobManagerOptions::usage_interval (the run still holds its GPUs: a daemon killed mid-run loses at
// most that much), End when the run's GPUs are free. Flush writes every record changed since its
// last write with JobStore::PutUsage (absolute values: a write repeated after a failure never
// counts twice); an ended record leaves the ledger once written, so one the store refuses (its disk
// full) is kept and written by the manager's retrier.
//
// Thread-safety: none; the job manager guards it with its mutex.
#ifndef MOBIUS_SERVER_JOBS_SERVICE_USAGE_LEDGER_H_
#define MOBIUS_SERVER_JOBS_SERVICE_USAGE_LEDGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/jobs/service/job_observer.h"
#include "server/jobs/store/job_types.h"

namespace mobius::jobs {

class UsageLedger {
 public:
  // A run starts: `record` with its job, start, user, group, GPUs and host estimate; an open run
  // of the same job (a start without an end) is ended at the new start first.
  void Start(UsageRecord record);
  // A step of job `id`'s run finished at `now`: its tokens, and the job cgroup's memory.current
  // (< 0: no cgroup). Nothing when the job has no open run.
  UsageDelta Step(const std::string& id, int64_t tokens, int64_t now_unix_ms,
                  int64_t memory_bytes);
  // Every open run still holds its GPUs at `now`.
  std::vector<UsageDelta> Touch(int64_t now_unix_ms);
  // Job `id`'s run ended (its GPUs are free) at `now`.
  UsageDelta End(const std::string& id, int64_t now_unix_ms);
  // The user's primary group, once the run's supervisor has looked it up (outside the manager's
  // lock); nothing when the job has no open run.
  void SetGroup(const std::string& id, int64_t gid, const std::string& group);

  // Writes the changed records with `put`, in start order; returns the first error (the rest are
  // still tried) and OK when everything changed was written.
  absl::Status Flush(const std::function<absl::Status(const UsageRecord&)>& put);
  // Records changed since their last write.
  bool dirty() const;
  // How many ended records have left the ledger (written) so far: a cache of the store's finished
  // runs (the fair-share sums) is stale once this changes.
  int64_t ended_written() const { return ended_written_; }
  // Open runs and ended ones not written yet.
  std::vector<UsageRecord> Records() const;

 private:
  struct Entry {
    UsageRecord record;
    bool dirty = true;
    int64_t memory_bytes = -1;  // the last cgroup sample, for the integral
  };
  UsageDelta Advance(Entry& e, int64_t now_unix_ms);

  std::map<std::string, Entry> open_;  // by job id
  std::vector<Entry> ended_;           // not written yet
  int64_t ended_written_ = 0;
};

}  // namespace mobius::jobs

#endif  // MOBIUS_SERVER_JOBS_SERVICE_USAGE_LEDGER_H_
