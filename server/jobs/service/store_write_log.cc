#include "server/jobs/service/store_write_log.h"

#include "absl/time/clock.h"
#include "glog/logging.h"

namespace mobius::jobs {

void StoreWriteLog::Record(const std::string& subject, const std::string& what,
                           const absl::Status& result) {
  const std::pair<std::string, std::string> key(subject, what);
  absl::MutexLock lock(&mu_);
  auto it = streaks_.find(key);
  if (result.ok()) {
    if (it == streaks_.end()) return;
    LOG(WARNING) << subject << ": the job store takes " << what << " again; " << it->second.failed
                 << " of them were not written and are missing";
    streaks_.erase(it);
    return;
  }
  const absl::Time now = absl::Now();
  if (it == streaks_.end()) {
    LOG(ERROR) << subject << ": " << what << " not written to the job store: " << result
               << " (dropped; further failures are counted, one line per "
               << absl::FormatDuration(every_) << ")";
    streaks_[key] = {.failed = 1, .unreported = 0, .last_line = now};
    return;
  }
  Streak& s = it->second;
  ++s.failed;
  ++s.unreported;
  if (now - s.last_line >= every_) {
    LOG(ERROR) << subject << ": " << s.unreported << " more " << what
               << " not written to the job store (" << s.failed << " in all): " << result;
    s.unreported = 0;
    s.last_line = now;
  }
}

int64_t StoreWriteLog::failing(const std::string& subject, const std::string& what) {
  absl::MutexLock lock(&mu_);
  auto it = streaks_.find({subject, what});
  return it == streaks_.end() ? 0 : it->second.failed;
}

}  // namespace mobius::jobs
