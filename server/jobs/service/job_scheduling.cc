// The job manager's scheduling rounds (job_manager_state.h, "scheduling"): what the queued jobs
// need, the scheduler's decisions, and acting on them.
#include <map>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/jobspec/json.h"
#include "glog/logging.h"
#include "server/jobs/service/job_identity.h"
#include "server/jobs/service/job_manager_state.h"
#include "host/run/job_planning.h"

namespace mobius::jobs {

using internal::GpuList;
using internal::LogIfError;

namespace {

int64_t SubmitSeq(const std::string& id) {  // "j-000123" -> 123
  int64_t n = 0;
  absl::string_view digits = id;
  if (digits.size() > 2) digits.remove_prefix(2);
  return absl::SimpleAtoi(digits, &n) ? n : 0;
}

}  // namespace

void JobManager::State::JoinFinishedSupervisors() {
  // Not the calling one: Finish runs on it and reschedules.
  for (auto it = finished.begin(); it != finished.end();) {
    if (it->get_id() == std::this_thread::get_id()) {
      ++it;
      continue;
    }
    it->join();
    it = finished.erase(it);
  }
}

std::vector<JobRequest> JobManager::State::QueuedRequests(
    const std::vector<JobRecord>& queued_jobs) {
  std::vector<JobRequest> requests;
  std::map<std::string, int64_t> created_ms;
  for (const JobRecord& job : queued_jobs) {
    auto it = estimates.find(job.id);
    if (it == estimates.end()) {
      // Jobs from before a daemon restart: plan again to learn what they need, on the GPUs this
      // node has now (a job asking for more GPUs than are usable after the restart is re-planned
      // for those it can get and resumes from its checkpoint there: docs/scheduler.md).
      // The model config as the job's user reads it (job_identity.h).
      absl::StatusOr<jobspec::JobSpec> spec = jobspec::JobSpecFromJson(job.spec_json);
      absl::StatusOr<model::ModelConfig> config =
          spec.ok() ? CheckSpecFilesAs(options, job.uid, *spec, /*cache=*/nullptr, job.id)
                    : absl::StatusOr<model::ModelConfig>(spec.status());
      PlanJobOptions po = PlanOptionsOf(options);
      po.fit_to_node = true;
      if (config.ok()) po.model_config = &*config;
      absl::StatusOr<PlannedJob> planned =
          config.ok() ? PlanJob(*spec, options.topology, options.facts, options.node.allowed_gpus,
                                {}, po)
                      : absl::StatusOr<PlannedJob>(config.status());
      if (!planned.ok()) {
        LogIfError(job.id, Transition(job.id, JobState::kFailed,
                                      absl::StrCat("cannot plan: ", planned.status().message())));
        continue;
      }
      it = estimates.emplace(job.id, planned->request).first;
    }
    JobRequest r = it->second;
    r.job_id = job.id;
    r.uid = job.uid;
    r.priority = job.priority;
    r.submit_seq = SubmitSeq(job.id);
    requests.push_back(r);
    created_ms[job.id] = job.created_unix_ms;
  }
  ScoreRequests(requests, created_ms);
  return requests;
}

jobs::Quotas JobManager::State::CurrentQuotas() {
  jobs::Quotas quotas;
  quotas.defaults = options.default_quota;
  if (auto list = store->ListQuotas(); list.ok()) {
    for (const Quota& q : *list) {
      quotas.per_uid[q.uid] = {.max_gpus = q.max_gpus,
                               .max_running_jobs = q.max_running_jobs,
                               .max_host_bytes = q.max_host_bytes,
                               .max_queued_jobs = q.max_queued_jobs};
    }
  }
  return quotas;
}

void JobManager::State::Preempt(const std::vector<PreemptDecision>& preempt) {
  for (const PreemptDecision& p : preempt) {
    for (const std::string& victim : p.victims) {
      auto it = running.find(victim);
      if (it == running.end() || !it->second.preempted_for.empty()) continue;
      it->second.preempted_for = p.job_id;
      DaemonLog(victim, absl::StrCat("preempted by higher-priority ", p.job_id,
                                     ": checkpointing (grace ",
                                     absl::FormatDuration(options.preemption_grace),
                                     "), then back to the queue"));
      if (it->second.launcher) {
        it->second.launcher->RequestCheckpointAndStop(options.preemption_grace);
      }
    }
  }
}

void JobManager::State::StartJobs(const std::vector<StartDecision>& start,
                                  const std::vector<JobRequest>& requests,
                                  const std::vector<JobRecord>& queued_jobs) {
  // A job starts only once the store has RUNNING: a run the store does not know of would be
  // requeued and run again after a restart, and its checkpoints likely share the full disk. One
  // the store refuses waits at the head of the queue; the retrier reschedules.
  std::map<std::string, std::string> refused_before;
  refused_before.swap(start_refused);
  std::vector<QueuedDecision> refused;
  for (const StartDecision& d : start) {
    absl::Status t = TransitionNow(d.job_id, JobState::kRunning,
                                   absl::StrCat("started on GPUs ", GpuList(d.gpus)));
    if (!t.ok()) {
      if (!refused_before.count(d.job_id)) {
        LOG(ERROR) << "job " << d.job_id
                   << ": not started: the job store did not take RUNNING: " << t
                   << "; it stays queued and starts once the store takes it";
      }
      start_refused[d.job_id] = std::string(t.message());
      refused.push_back({.job_id = d.job_id,
                         .position = static_cast<int>(refused.size()) + 1,
                         .cause = PendingCause::kResources,
                         .reason = absl::StrCat("the job store cannot be written (", t.message(),
                                                "); starts once it can")});
      continue;
    }
    Running& r = running[d.job_id];
    r.gpus = d.gpus;
    for (const JobRequest& req : requests) {
      if (req.job_id != d.job_id) continue;
      r.host_bytes = req.host_bytes;
      r.pinned_bytes = req.pinned_bytes;
      r.uid = req.uid;
      r.priority = req.priority;
      r.seq = req.submit_seq;
    }
    estimates.erase(d.job_id);
    for (const JobRecord& job : queued_jobs) {
      if (job.id == d.job_id) StartUsage(job, d.gpus, r.host_bytes);
    }
    r.thread = std::thread([this, id = d.job_id, gpus = d.gpus] { Supervise(id, gpus); });
  }
  if (!refused.empty()) {
    for (auto& [id, q] : queued) q.position += static_cast<int>(refused.size());
    for (QueuedDecision& q : refused) queued[q.job_id] = std::move(q);
    retry_wake.SignalAll();
  }
}

void JobManager::State::Reschedule() {
  if (stopping) return;
  JoinFinishedSupervisors();
  // As the daemon knows them: a job whose end the store has not taken yet is not queued.
  absl::StatusOr<std::vector<JobRecord>> queued_jobs = JobsInStates({JobState::kQueued});
  if (!queued_jobs.ok()) {
    LOG(ERROR) << "scheduling: " << queued_jobs.status();
    return;
  }
  const std::vector<JobRequest> requests = QueuedRequests(*queued_jobs);
  std::vector<RunningJob> run;
  for (const auto& [id, r] : running) {
    run.push_back({id, r.uid, r.priority, r.seq, r.gpus, r.host_bytes, r.pinned_bytes,
                   !r.preempted_for.empty()});
  }
  absl::StatusOr<ScheduleResult> result =
      scheduler.Schedule(options.node, run, requests, CurrentQuotas());
  if (!result.ok()) {
    LOG(ERROR) << "scheduling: " << result.status();
    return;
  }
  Preempt(result->preempt);
  queued.clear();
  for (const QueuedDecision& q : result->queued) {
    if (q.cause == PendingCause::kNeverFits) {
      LogIfError(q.job_id, Transition(q.job_id, JobState::kFailed, q.reason));
      estimates.erase(q.job_id);
      continue;
    }
    queued[q.job_id] = q;
  }
  StartJobs(result->start, requests, *queued_jobs);
  if (options.observer != nullptr) {
    std::map<JobState, int> counts = {{JobState::kQueued, static_cast<int>(queued.size())},
                                      {JobState::kRunning, static_cast<int>(running.size())}};
    options.observer->JobCounts(counts);
  }
  Bump();
}

}  // namespace mobius::jobs
