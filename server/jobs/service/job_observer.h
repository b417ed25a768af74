// JobObserver: the seam through which the job manager reports what happens to jobs, for metrics
// (server/metrics/daemon_metrics.h implements it with Prometheus) and tests. No metrics library
// types here: the job manager stays free of them.
//
// Calls come from the job manager's threads (gRPC handlers, supervisors), possibly concurrently;
// implementations must be thread-safe and quick (no blocking I/O).
#ifndef MOBIUS_SERVER_JOBS_SERVICE_JOB_OBSERVER_H_
#define MOBIUS_SERVER_JOBS_SERVICE_JOB_OBSERVER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "server/jobs/store/job_types.h"
#include "common/run/run_config.h"
#include "common/run/step_report.h"

namespace mobius::jobs {

struct JobRunInfo {
  std::string job_id;
  const runtime::RunConfig* run = nullptr;   // ranks -> GPUs, emulated links
  double predicted_step_seconds = 0;          // the plan's (simulator) step time
  std::vector<int64_t> gpu_memory_bytes;      // the plan's estimate, per rank
  int64_t host_store_bytes = 0;               // the shared host model store
  int64_t pinned_bytes = 0;                   // the plan's pinned-memory estimate
  double flops_per_token = 0;                 // training FLOPs per token (forward + backward)
  double peak_flops_per_second = 0;           // all the job's GPUs together (device spec)
};

// What one accounting update added to a user's usage (usage_ledger.h).
struct UsageDelta {
  uint32_t uid = 0;
  std::string user;
  double gpu_seconds = 0;
  double host_gib_seconds = 0;
  int64_t tokens = 0;
};

class JobObserver {
 public:
  virtual ~JobObserver() = default;
  virtual void JobStarted(const JobRunInfo& info, double queue_wait_seconds) = 0;
  virtual void StepCompleted(const JobRunInfo& info, const runtime::StepReport& step) = 0;
  virtual void JobStopped(const JobRunInfo& info) = 0;   // its per-job series go away
  virtual void JobCounts(const std::map<JobState, int>& counts) = 0;
  virtual void SubmitRejected(const std::string& reason) = 0;  // "invalid_spec", "never_fits", ...
  virtual void WorkerRestart() = 0;
  // Accounting: usage accrued to a user (the per-user counters); fair-share factors of the users
  // with queued or running jobs, after each scheduling round.
  virtual void UsageAccrued(const UsageDelta& delta) { (void)delta; }
  virtual void FairShare(const std::map<uint32_t, double>& factors) { (void)factors; }
};

}  // namespace mobius::jobs

#endif  // MOBIUS_SERVER_JOBS_SERVICE_JOB_OBSERVER_H_
