// StoreWriteLog: how the job manager reports job store writes it gives up on (step reports, log
// lines, checkpoint records, run info: informational rows that a later write supersedes or that
// are simply missing afterwards) without flooding the daemon's log while the disk stays full.
//
// Per (subject, what): the first failure of a streak is logged (LOG(ERROR)) with its error; later
// failures are counted and summarised at most once per `every` ("job j-000004: 37 more step
// reports not written ..."); the first success after a streak logs how many were lost.
//
// Thread-safety: every method may be called from any thread (an internal mutex).
#ifndef MOBIUS_SERVER_JOBS_SERVICE_STORE_WRITE_LOG_H_
#define MOBIUS_SERVER_JOBS_SERVICE_STORE_WRITE_LOG_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace mobius::jobs {

class StoreWriteLog {
 public:
  explicit StoreWriteLog(absl::Duration every = absl::Minutes(1)) : every_(every) {}

  // `subject` names whose rows ("job j-000004", "audit log"), `what` the rows in plural ("step
  // reports", "log lines"). An OK `result` is a success.
  void Record(const std::string& subject, const std::string& what, const absl::Status& result);

  // Failures of the current streak (0: none).
  int64_t failing(const std::string& subject, const std::string& what);

 private:
  struct Streak {
    int64_t failed = 0;      // in this streak
    int64_t unreported = 0;  // since the last line
    absl::Time last_line;
  };
  const absl::Duration every_;
  absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>, Streak> streaks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mobius::jobs

#endif  // MOBIUS_SERVER_JOBS_SERVICE_STORE_WRITE_LOG_H_
