// The admission scheduler: which queued jobs start now, on which GPUs, and why the others wait.
//
// Schedule() is a pure function of its inputs (node resources, running jobs, queued jobs, quotas):
// the daemon calls it on its event loop whenever something changes (submit, job end, cancel,
// drain, quota change) and acts on the decisions. It never remembers anything between calls.
//
// Policy (docs/scheduler.md):
//  1. Order: priority (higher first), then order_score (higher first: the daemon's fair-share and
//     age score, server/jobs/accounting/accounting.h; all equal without it), then submit_seq (FIFO),
//     then job_id. Positions are 1-based in this order among the jobs left queued.
//  2. Draining: nothing starts and nothing is preempted; every queued job says "node is draining".
//  3. A job that can never fit the node (fits.h) is reported (PendingCause::kNeverFits) and holds
//     nothing; the daemon fails it.
//  4. Quotas (per uid, 0 = no limit): max_running_jobs, max_gpus and max_host_bytes (the plans'
//     host estimates) over the user's running jobs,
//     those started earlier in this round and those waiting ahead of it (rule 6 holds quota too).
//     A job over its quota waits, holds nothing and does not block jobs behind it (the limit is
//     its user's, not the node's).
//  5. A job starts when its GPUs (eligible: allowed, free, enough memory), host and pinned memory
//     are available outside what is held for jobs ahead of it. gpus = 0 takes every such GPU, up to
//     the user's remaining GPU quota.
//  6. No backfilling that could delay a job ahead: every job that cannot start holds, from what is
//     still unheld, what it would use: its k best GPUs when enough are free (all eligible free GPUs
//     otherwise; 1 for "all free"), min(need, unheld) host and pinned bytes, and its place in its
//     user's quota (one job, its GPUs). Jobs behind may use only what nobody ahead holds. Without
//     runtime estimates nothing else can be proved not to delay the head job, so a smaller job
//     passes only on resources the jobs ahead cannot use (GPUs too small for them, surplus beyond
//     their needs).
//  7. Preemption (SchedulerOptions::preemption): the first job in the order that waits for
//     resources (the head) may name running jobs of strictly lower priority whose GPUs, host and
//     pinned bytes would let it start: jobs already stopping for a preemption first, then lowest
//     priority, then the most recently submitted; the set is then pruned to a minimal one. The
//     caller checkpoints and requeues them; the head starts in a later round.
//
// Thread-safety: Scheduler is immutable after construction; Schedule may be called from any thread.
#ifndef MOBIUS_HOST_SCHEDULER_SCHEDULER_H_
#define MOBIUS_HOST_SCHEDULER_SCHEDULER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "host/scheduler/gpu_choice.h"
#include "host/scheduler/resources.h"

namespace mobius::jobs {

struct SchedulerOptions {
  bool preemption = false;  // may name lower-priority running jobs to preempt
  GpuChoiceOptions gpu_choice;
};

// Why a job is still queued (the reason text carries the numbers).
enum class PendingCause {
  kDraining,    // "node is draining"
  kNeverFits,   // "can never run on this node: ..."; the daemon fails the job
  kQuota,       // "user quota: 2 of 2 running jobs"
  kResources,   // "waiting for 4 GPUs: 2 free (GPUs 2,3 used by j-000004)"; "host memory: ..."
  kBehind,      // "behind higher-priority job j-000009 (held for it: GPUs 4,5)"
  kPreempting,  // "preempting lower-priority jobs j-000003: waiting for them to checkpoint ..."
};

// "draining", "never_fits", "quota", "resources", "behind", "preempting".
const char* PendingCauseName(PendingCause cause);

struct StartDecision {
  std::string job_id;
  std::vector<int> gpus;        // ascending GPU indices
  std::vector<int> numa_nodes;  // NUMA nodes of those GPUs, ascending (for pinned allocations)
  PlacementCost cost;           // gpu_choice.h

  friend bool operator==(const StartDecision&, const StartDecision&) = default;
};

struct PreemptDecision {
  std::string job_id;                // the higher-priority job that needs the resources
  std::vector<std::string> victims;  // running jobs to checkpoint, stop and requeue (not already
                                     // preempting), in the order chosen

  friend bool operator==(const PreemptDecision&, const PreemptDecision&) = default;
};

struct QueuedDecision {
  std::string job_id;
  int position = 0;  // 1-based, in priority-then-FIFO order among the jobs left queued
  PendingCause cause = PendingCause::kResources;
  std::string reason;

  friend bool operator==(const QueuedDecision&, const QueuedDecision&) = default;
};

struct ScheduleResult {
  std::vector<StartDecision> start;      // in queue order
  std::vector<PreemptDecision> preempt;  // at most one (the head's)
  std::vector<QueuedDecision> queued;    // every job not started, in queue order

  friend bool operator==(const ScheduleResult&, const ScheduleResult&) = default;
};

// One line per decision, for logs and test failures:
//   start j-000001 on GPUs 0,1,4,5 (NUMA 0,1)
//   preempt j-000003, j-000004 for j-000009
//   queued 1 j-000002 [resources] waiting for 4 GPUs: ...
std::string DescribeSchedule(const ScheduleResult& result);

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options = {}) : options_(options) {}

  // INVALID_ARGUMENT with the field path for malformed input (validate.h). The input vectors may be
  // in any order: the result depends only on their contents.
  absl::StatusOr<ScheduleResult> Schedule(const NodeResources& node,
                                          const std::vector<RunningJob>& running,
                                          const std::vector<JobRequest>& queued,
                                          const Quotas& quotas) const;

  const SchedulerOptions& options() const { return options_; }

 private:
  SchedulerOptions options_;
};

}  // namespace mobius::jobs

#endif  // MOBIUS_HOST_SCHEDULER_SCHEDULER_H_
