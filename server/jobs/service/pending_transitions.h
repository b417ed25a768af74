// PendingTransitions: the job state changes the daemon has decided but the job store could not
// write yet (its disk full, an I/O error, the file locked), kept in order per job until the
// manager's retrier writes them (job_manager.h, "State the store cannot write").
//
// Callers see jobs through the overlay: the store's record with the job's pending transitions
// applied in order (state, reason, start and end time, and a restart counted by a requeue), so
// Get/List/Watch/Cancel and the scheduler act on the state the daemon knows, not on the one the
// store still has. The head of a job's queue is written first; once written it is popped, so the
// store's record plus the rest of the queue is always the daemon's state.
//
// Also the bookkeeping that logs a failure once per streak: a job's first failed write is logged
// with its error, later ones of the same streak are only counted (failures()).
//
// Thread-safety: none; the job manager guards it with its mutex.
#ifndef MOBIUS_SERVER_JOBS_SERVICE_PENDING_TRANSITIONS_H_
#define MOBIUS_SERVER_JOBS_SERVICE_PENDING_TRANSITIONS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/jobs/store/job_types.h"

namespace mobius::jobs {

struct PendingTransition {
  JobState from = JobState::kQueued;  // the state it leaves (the overlay's, when decided)
  JobState to = JobState::kQueued;
  std::string reason;
  int64_t unix_ms = 0;         // when the daemon decided it (the store records this time)
  bool count_restart = false;  // also increment the job's restart count (a retried failure)
};

class PendingTransitions {
 public:
  bool empty() const { return jobs_.empty(); }
  bool Has(const std::string& id) const { return jobs_.count(id) > 0; }
  // Job ids with pending transitions, in id (creation) order.
  std::vector<std::string> Jobs() const;
  // The job's pending transitions, oldest first; nullptr when there are none.
  const std::deque<PendingTransition>* Of(const std::string& id) const;

  // Appends a transition. The first one of a streak returns true: the caller logs it with the
  // error; later ones return false.
  bool Add(const std::string& id, PendingTransition t);
  // The head was written: pops it; the job's streak ends with its last transition.
  void PopFront(const std::string& id);
  // The head's restart was counted in the store (its transition is not written yet).
  void RestartCounted(const std::string& id);
  // One more failed attempt to write the job's head, and the error of the latest.
  void Failed(const std::string& id, const absl::Status& error);
  int failures(const std::string& id) const;
  absl::Status last_error(const std::string& id) const;

  // The state the job reaches once its pending transitions are applied; nullopt when none.
  std::optional<JobState> LastState(const std::string& id) const;
  // Applies the job's pending transitions to `record` (a record of the store): state,
  // state_reason, started/finished times, restarts.
  void Apply(JobRecord& record) const;

 private:
  struct Job {
    std::deque<PendingTransition> queue;
    int failures = 0;
    absl::Status last_error;
  };
  std::map<std::string, Job> jobs_;
};

// Whether a failed store write may succeed later (a full disk, an I/O error, a lock held by another
// process): everything except the errors of the request itself (an illegal transition, an unknown
// job, a malformed argument), which a retry would only repeat.
bool StoreWriteMayRecover(const absl::Status& status);

}  // namespace mobius::jobs

#endif  // MOBIUS_SERVER_JOBS_SERVICE_PENDING_TRANSITIONS_H_
