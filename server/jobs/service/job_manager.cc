#include "server/jobs/service/job_manager.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/jobspec/json.h"
#include "common/jobspec/validate.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "server/jobs/scheduler/fits.h"
#include "server/jobs/scheduler/scheduler.h"
#include "server/jobs/service/job_planning.h"
#include "common/model/model_config_parse.h"
#include "server/launch/run_builder.h"
#include "server/planner/profile.h"
#include "worker/runtime/store_layout.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/runtime/host_store.h"
#include "worker/runtime/launcher.h"

namespace mobius::jobs {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t SubmitSeq(const std::string& id) {  // "j-000123" -> 123
  int64_t n = 0;
  absl::string_view digits = id;
  if (digits.size() > 2) digits.remove_prefix(2);
  return absl::SimpleAtoi(digits, &n) ? n : 0;
}

std::string GpuList(const std::vector<int>& gpus) { return absl::StrJoin(gpus, ","); }

// Failures that would happen again on a retry with the same spec and plan.
bool Retryable(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kPermissionDenied:
      return false;
    default:
      return true;
  }
}

std::string PlanSummaryJson(const planner::PlanReport& r, const runtime::RunConfig& run) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : r.plan.partition.stages) stages.push_back({s.begin, s.end});
  nlohmann::json j = {{"stages", stages},
                      {"gpu_order", r.plan.mapping.gpu_order},
                      {"schedule", r.plan.schedule},
                      {"partitioner", r.plan.partitioner},
                      {"mapper", r.plan.mapper},
                      {"num_microbatches", r.plan.num_microbatches},
                      {"predicted_step_seconds", r.plan.predicted_step_seconds},
                      {"device", r.device},
                      {"max_gpu_bytes", r.plan.memory.max_gpu_bytes},
                      {"host_bytes", r.plan.memory.host_bytes},
                      {"pinned_bytes", r.plan.memory.pinned_bytes},
                      {"emulated_links", !run.links.empty()},
                      {"link_scale", run.link_scale}};
  return j.dump();
}

double PredictedFromPlanJson(const std::string& plan_json) {
  if (plan_json.empty()) return 0;
  auto j = nlohmann::json::parse(plan_json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return 0;
  return j.value("predicted_step_seconds", 0.0);
}

StepReportRow ToRow(const runtime::StepReport& r) {
  StepReportRow row;
  row.step = r.step;
  row.total_steps = r.total_steps;
  row.loss = r.loss;
  row.lr = r.lr;
  row.grad_norm = r.grad_norm;
  row.tokens = r.tokens;
  row.tokens_per_second = r.tokens_per_second;
  row.step_seconds = r.step_seconds;
  row.compute_seconds = r.compute_seconds;
  row.h2d_bytes = static_cast<int64_t>(r.h2d_bytes);
  row.d2h_bytes = static_cast<int64_t>(r.d2h_bytes);
  row.stall_seconds = r.stall_seconds;
  row.optimizer_seconds = r.optimizer_seconds;
  row.unix_ms = NowMs();
  return row;
}

}  // namespace

struct JobManager::State {
  JobManagerOptions options;
  std::unique_ptr<JobStore> store;
  Scheduler scheduler;  // set in Create from options.preemption

  struct Running {
    std::vector<int> gpus;
    int64_t host_bytes = 0, pinned_bytes = 0;
    uint32_t uid = 0;
    int32_t priority = 0;
    int64_t seq = 0;
    std::shared_ptr<runtime::Launcher> launcher;  // set once the workers are spawned
    bool cancel = false;         // the user cancelled
    std::string cancelled_by;
    bool shutdown = false;       // the daemon is stopping: requeue
    std::string preempted_for;   // checkpointing to make room for this job: requeue
    std::thread thread;
  };

  absl::Mutex mu;
  absl::CondVar changed;
  int64_t version ABSL_GUARDED_BY(mu) = 0;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::map<std::string, Running> running ABSL_GUARDED_BY(mu);
  std::map<std::string, QueuedDecision> queued ABSL_GUARDED_BY(mu);
  std::map<std::string, JobRequest> estimates ABSL_GUARDED_BY(mu);
  std::vector<std::thread> finished ABSL_GUARDED_BY(mu);

  void Bump() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    ++version;
    changed.SignalAll();
  }
  void DaemonLog(const std::string& id, const std::string& text) {
    LOG(INFO) << id << ": " << text;
    absl::StatusOr<int64_t> r = store->AppendLogs(id, {{0, NowMs(), "daemon", text}});
    if (!r.ok()) LOG(WARNING) << "log for " << id << ": " << r.status();
  }
  void Audit(const Caller& c, const std::string& method, const std::string& target,
             const std::string& detail, const absl::Status& result) {
    AuditEntry e;
    e.unix_ms = NowMs();
    e.uid = c.uid;
    e.method = "JobService." + method;
    e.target = target;
    e.detail = detail;
    e.result = result.code();
    absl::StatusOr<int64_t> r = store->AppendAudit(e);
    if (!r.ok()) LOG(WARNING) << "audit: " << r.status();
  }

  absl::Status Transition(const std::string& id, JobState to, const std::string& reason) {
    absl::StatusOr<JobRecord> r = store->Transition(id, to, reason, NowMs());
    if (!r.ok()) return r.status();
    DaemonLog(id, absl::StrCat(JobStateName(to), ": ", reason));
    return absl::OkStatus();
  }

  void Reschedule() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void Supervise(std::string id, std::vector<int> gpus);
  void Finish(const std::string& id, const absl::Status& status, int64_t steps);
};

// ---- scheduling ---------------------------------------------------------------------------------

void JobManager::State::Reschedule() {
  if (stopping) return;
  // Join the supervisors that ended (not the calling one: Finish runs on it and reschedules).
  for (auto it = finished.begin(); it != finished.end();) {
    if (it->get_id() == std::this_thread::get_id()) {
      ++it;
      continue;
    }
    it->join();
    it = finished.erase(it);
  }
  absl::StatusOr<std::vector<JobRecord>> queued_jobs = store->JobsInStates({JobState::kQueued});
  if (!queued_jobs.ok()) {
    LOG(ERROR) << "scheduling: " << queued_jobs.status();
    return;
  }
  std::vector<JobRequest> requests;
  for (const JobRecord& job : *queued_jobs) {
    auto it = estimates.find(job.id);
    if (it == estimates.end()) {
      // Jobs from before a daemon restart: plan again to learn what they need.
      absl::StatusOr<jobspec::JobSpec> spec = jobspec::JobSpecFromJson(job.spec_json);
      absl::StatusOr<PlannedJob> planned =
          spec.ok() ? PlanJob(*spec, options.topology, options.facts, options.node.allowed_gpus, {})
                    : absl::StatusOr<PlannedJob>(spec.status());
      if (!planned.ok()) {
        Transition(job.id, JobState::kFailed, absl::StrCat("cannot plan: ", planned.status().message()))
            .IgnoreError();
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
  }
  std::vector<RunningJob> run;
  for (const auto& [id, r] : running) {
    run.push_back({id, r.uid, r.priority, r.seq, r.gpus, r.host_bytes, r.pinned_bytes,
                   !r.preempted_for.empty()});
  }
  jobs::Quotas quotas;
  quotas.defaults = options.default_quota;
  if (auto list = store->ListQuotas(); list.ok()) {
    for (const Quota& q : *list) quotas.per_uid[q.uid] = {q.max_gpus, q.max_running_jobs};
  }
  absl::StatusOr<ScheduleResult> result = scheduler.Schedule(options.node, run, requests, quotas);
  if (!result.ok()) {
    LOG(ERROR) << "scheduling: " << result.status();
    return;
  }
  for (const PreemptDecision& p : result->preempt) {
    for (const std::string& victim : p.victims) {
      auto it = running.find(victim);
      if (it == running.end() || !it->second.preempted_for.empty()) continue;
      it->second.preempted_for = p.job_id;
      DaemonLog(victim, absl::StrCat("preempted by higher-priority ", p.job_id,
                                     ": checkpointing, then back to the queue"));
      if (it->second.launcher) {
        it->second.launcher->RequestCheckpointAndStop(options.checkpoint_grace);
      }
    }
  }
  queued.clear();
  for (const QueuedDecision& q : result->queued) {
    if (q.cause == PendingCause::kNeverFits) {
      Transition(q.job_id, JobState::kFailed, q.reason).IgnoreError();
      estimates.erase(q.job_id);
      continue;
    }
    queued[q.job_id] = q;
  }
  for (const StartDecision& d : result->start) {
    const JobRequest* req = nullptr;
    for (const JobRequest& r : requests) {
      if (r.job_id == d.job_id) req = &r;
    }
    absl::Status t = Transition(d.job_id, JobState::kRunning,
                                absl::StrCat("started on GPUs ", GpuList(d.gpus)));
    if (!t.ok()) {
      LOG(ERROR) << t;
      continue;
    }
    Running& r = running[d.job_id];
    r.gpus = d.gpus;
    if (req != nullptr) {
      r.host_bytes = req->host_bytes;
      r.pinned_bytes = req->pinned_bytes;
      r.uid = req->uid;
      r.priority = req->priority;
      r.seq = req->submit_seq;
    }
    estimates.erase(d.job_id);
    r.thread = std::thread([this, id = d.job_id, gpus = d.gpus] { Supervise(id, gpus); });
  }
  if (options.observer != nullptr) {
    std::map<JobState, int> counts = {{JobState::kQueued, static_cast<int>(queued.size())},
                                      {JobState::kRunning, static_cast<int>(running.size())}};
    options.observer->JobCounts(counts);
  }
  Bump();
}

// ---- supervision --------------------------------------------------------------------------------

void JobManager::State::Supervise(std::string id, std::vector<int> gpus) {
  auto fail = [&](const absl::Status& s) { Finish(id, s, 0); };
  absl::StatusOr<JobRecord> job = store->GetJob(id);
  if (!job.ok()) return fail(job.status());
  absl::StatusOr<jobspec::JobSpec> spec = jobspec::JobSpecFromJson(job->spec_json);
  if (!spec.ok()) return fail(spec.status());
  const std::string job_dir = absl::StrCat(options.state_dir, "/jobs/", id);
  absl::StatusOr<train::TrainerOptions> training =
      TrainerOptionsFromSpec(*spec, job_dir + "/checkpoints");
  if (!training.ok()) return fail(training.status());
  training->resume = checkpoint::LatestCheckpoint(training->checkpoint_dir).ok();
  absl::StatusOr<PlannedJob> planned =
      PlanJob(*spec, options.topology, options.facts, options.node.allowed_gpus, gpus);
  if (!planned.ok()) return fail(planned.status());
  absl::StatusOr<runtime::RunConfig> run = launch::BuildRunConfig(
      id, *training, planned->report.plan, options.topology, options.facts,
      {.enabled = options.emulate_links, .link_scale = options.link_scale});
  if (!run.ok()) return fail(run.status());
  store->UpdateRunInfo(id, gpus, PlanSummaryJson(planned->report, *run)).IgnoreError();
  JobRunInfo info;
  info.job_id = id;
  info.run = &*run;
  info.predicted_step_seconds = planned->report.plan.predicted_step_seconds;
  info.gpu_memory_bytes = planned->report.plan.memory.gpu_bytes;
  info.pinned_bytes = planned->report.plan.memory.pinned_bytes;
  // Model FLOPs per token as MFU counts them (PaLM's 6N convention: no recompute, no attention).
  info.flops_per_token = 6.0 * static_cast<double>(planned->report.parameters);
  for (int g : run->rank_gpu) {
    std::optional<planner::DeviceSpec> d = planner::DeviceSpecForGpuName(
        options.topology.gpus[g].name, options.topology.gpus[g].memory_bytes);
    if (d) info.peak_flops_per_second += d->peak_flops_per_s;
  }
  if (absl::StatusOr<model::ModelConfig> mc = model::LoadModelConfig(spec->model_dir); mc.ok()) {
    runtime::RunConfig sized = *run;
    sized.store_path = "-";
    if (auto layout = runtime::MakeStoreLayout(*mc, sized); layout.ok()) {
      info.host_store_bytes = static_cast<int64_t>(layout->total_bytes);
    }
  }
  DaemonLog(id, absl::StrCat(
                    training->resume ? "resuming from " : "starting: ",
                    training->resume ? *checkpoint::LatestCheckpoint(training->checkpoint_dir) : "",
                    training->resume ? "; " : "", run->stages.size(), " stages on ",
                    run->num_workers, " GPU(s) ", GpuList(gpus), ", ", planned->report.plan.mapper,
                    " mapping, predicted ", planned->report.plan.predicted_step_seconds,
                    " s/step", run->links.empty() ? "" : absl::StrCat(
                        " (CPU backend, emulated PCIe links x", run->link_scale, ")")));

  runtime::LaunchOptions lo;
  lo.run = *run;
  lo.worker_binary = options.worker_binary;
  lo.run_dir = absl::StrCat(job_dir, "/run-", job->restarts);
  lo.shm_dir = options.shm_dir;
  lo.kill_grace = options.kill_grace;
  int64_t last_step = 0;
  lo.on_step = [&](const runtime::StepReport& r) {
    store->AppendStepReport(id, ToRow(r)).IgnoreError();
    if (options.observer != nullptr) options.observer->StepCompleted(info, r);
    last_step = r.step;
    if (!r.checkpoint.empty()) {
      store->SetCheckpoint(id, r.checkpoint, r.step).IgnoreError();
      DaemonLog(id, absl::StrCat("checkpoint ", r.checkpoint));
    }
    absl::MutexLock lock(&mu);
    Bump();
  };
  lo.on_log = [&](int rank, const std::string& line) {
    store->AppendLogs(id, {{0, NowMs(), absl::StrCat("worker-", rank), line}}).IgnoreError();
    absl::MutexLock lock(&mu);
    Bump();
  };
  // Before the launch: a first step report must find the job's series.
  if (options.observer != nullptr) {
    // Queue wait: submission to first start (a restart's start would include the earlier run).
    const double waited = job->restarts == 0 && job->started_unix_ms > job->created_unix_ms
                              ? (job->started_unix_ms - job->created_unix_ms) / 1e3
                              : 0.0;
    options.observer->JobStarted(info, waited);
  }
  absl::StatusOr<std::unique_ptr<runtime::Launcher>> launcher = runtime::Launcher::Start(lo);
  if (!launcher.ok()) {
    if (options.observer != nullptr) options.observer->JobStopped(info);
    return fail(launcher.status());
  }
  std::shared_ptr<runtime::Launcher> shared = std::move(*launcher);
  {
    absl::MutexLock lock(&mu);
    Running& r = running[id];
    r.launcher = shared;
    if (r.cancel) shared->Cancel();
    if (r.shutdown || !r.preempted_for.empty()) {
      shared->RequestCheckpointAndStop(options.checkpoint_grace);
    }
  }
  runtime::LaunchResult result = shared->Wait();
  if (!result.links.empty()) {
    std::vector<std::string> parts;
    for (const runtime::LinkTraffic& l : result.links) {
      parts.push_back(absl::StrCat(l.name, " ", l.h2d_bytes, "/", l.d2h_bytes));
    }
    DaemonLog(id, absl::StrCat("bytes per emulated link (h2d/d2h): ", absl::StrJoin(parts, ", ")));
  }
  if (options.observer != nullptr) options.observer->JobStopped(info);
  Finish(id, result.status, last_step);
}

void JobManager::State::Finish(const std::string& id, const absl::Status& status, int64_t steps) {
  absl::MutexLock lock(&mu);
  auto it = running.find(id);
  if (it == running.end()) return;
  Running& r = it->second;
  absl::StatusOr<JobRecord> job = store->GetJob(id);
  const bool stopped = absl::IsAborted(status);  // checkpointed and stopped on request
  if (status.ok() && !r.cancel) {
    Transition(id, JobState::kSucceeded, absl::StrCat("all ", steps, " steps done")).IgnoreError();
  } else if (r.shutdown) {
    Transition(id, JobState::kQueued,
               stopped ? "the daemon stopped; checkpointed, resumes from there"
                       : "the daemon stopped; resumes from its last checkpoint")
        .IgnoreError();
  } else if (!r.preempted_for.empty() && !r.cancel && stopped) {
    Transition(id, JobState::kQueued,
               absl::StrCat("preempted by ", r.preempted_for, "; resumes from its checkpoint"))
        .IgnoreError();
  } else if (r.cancel) {
    Transition(id, JobState::kCancelled, absl::StrCat("cancelled by ", r.cancelled_by))
        .IgnoreError();
  } else if (status.ok()) {
    Transition(id, JobState::kSucceeded, absl::StrCat("all ", steps, " steps done")).IgnoreError();
  } else {
    absl::StatusOr<jobspec::JobSpec> spec =
        job.ok() ? jobspec::JobSpecFromJson(job->spec_json) : job.status();
    const int max_restarts = spec.ok() ? spec->max_restarts : 0;
    if (Retryable(status) && job.ok() && job->restarts < max_restarts) {
      absl::StatusOr<int32_t> n = store->IncrementRestarts(id);
      if (options.observer != nullptr) options.observer->WorkerRestart();
      Transition(id, JobState::kQueued,
                 absl::StrCat("restart ", n.ok() ? *n : 0, " of ", max_restarts,
                              " after: ", status.message()))
          .IgnoreError();
    } else {
      Transition(id, JobState::kFailed, std::string(status.message())).IgnoreError();
    }
  }
  finished.push_back(std::move(r.thread));
  running.erase(it);
  Reschedule();
  Bump();
}

// ---- public API ---------------------------------------------------------------------------------

JobManager::JobManager(std::unique_ptr<State> state) : s_(std::move(state)) {}

JobManager::~JobManager() { Shutdown(); }

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Create(JobManagerOptions options) {
  auto s = std::make_unique<State>();
  std::error_code ec;
  std::filesystem::create_directories(options.state_dir + "/jobs", ec);
  if (ec) {
    return absl::FailedPreconditionError(absl::StrCat("state directory ", options.state_dir, ": ",
                                                      ec.message()));
  }
  MOBIUS_ASSIGN_OR_RETURN(s->store, JobStore::Open(options.state_dir + "/jobs.db"));
  s->scheduler = Scheduler(SchedulerOptions{.preemption = options.preemption});
  s->options = std::move(options);
  absl::StatusOr<int> cleaned = runtime::CleanOrphanStores(s->options.shm_dir);
  if (cleaned.ok() && *cleaned > 0) {
    LOG(INFO) << "removed " << *cleaned << " orphaned host store(s) from " << s->options.shm_dir;
  }
  // Jobs that were running when the daemon died resume from their checkpoint.
  MOBIUS_ASSIGN_OR_RETURN(std::vector<JobRecord> was_running,
                          s->store->JobsInStates({JobState::kRunning}));
  for (const JobRecord& job : was_running) {
    absl::StatusOr<jobspec::JobSpec> spec = jobspec::JobSpecFromJson(job.spec_json);
    const int max_restarts = spec.ok() ? spec->max_restarts : 0;
    if (job.restarts >= max_restarts) {
      s->Transition(job.id, JobState::kFailed,
                    absl::StrCat("the daemon stopped while it ran and its ", max_restarts,
                                 " restart(s) are used up"))
          .IgnoreError();
      continue;
    }
    s->store->IncrementRestarts(job.id).IgnoreError();
    s->Transition(job.id, JobState::kQueued,
                  job.checkpoint.empty()
                      ? std::string("the daemon stopped while it ran; starts over")
                      : absl::StrCat("the daemon stopped while it ran; resumes from ",
                                     job.checkpoint))
        .IgnoreError();
  }
  auto m = std::unique_ptr<JobManager>(new JobManager(std::move(s)));
  {
    absl::MutexLock lock(&m->s_->mu);
    m->s_->Reschedule();
  }
  return m;
}

absl::StatusOr<JobView> JobManager::Submit(const Caller& caller, const std::string& submission_id,
                                           jobspec::JobSpec spec) {
  State& s = *s_;
  jobspec::Normalize(spec);
  absl::Status st = jobspec::ValidateJobSpec(
      spec, {.require_absolute_paths = true, .check_files_exist = true});
  if (st.ok()) st = TrainerOptionsFromSpec(spec, "unused").status();
  absl::StatusOr<PlannedJob> planned =
      st.ok() ? PlanJob(spec, s.options.topology, s.options.facts, s.options.node.allowed_gpus, {})
              : absl::StatusOr<PlannedJob>(st);
  if (planned.ok()) {
    JobRequest probe = planned->request;
    probe.job_id = "new";
    st = CheckFits(s.options.node, probe);
  } else {
    st = planned.status();
  }
  if (!st.ok()) {
    s.Audit(caller, "SubmitJob", submission_id, spec.name, st);
    if (s.options.observer != nullptr) {
      s.options.observer->SubmitRejected(absl::IsFailedPrecondition(st) ? "never_fits"
                                                                        : "invalid_spec");
    }
    return st;
  }
  absl::StatusOr<train::TrainerOptions> training = TrainerOptionsFromSpec(spec, "unused");
  JobRecord record;
  record.submission_id = submission_id;
  record.uid = caller.uid;
  record.user = caller.user;
  record.name = spec.name;
  record.priority = spec.priority;
  record.spec_json = jobspec::JobSpecToJson(spec);
  record.created_unix_ms = NowMs();
  record.total_steps = training.ok() ? training->steps : 0;
  absl::StatusOr<JobStore::CreateResult> created = s.store->CreateJob(record);
  s.Audit(caller, "SubmitJob", created.ok() ? created->job.id : submission_id, spec.name,
          created.status());
  if (!created.ok()) return created.status();
  if (!created->existed) {
    s.DaemonLog(created->job.id,
                absl::StrCat("submitted by ", caller.user, " (uid ", caller.uid, "): ",
                             planned->report.plan.num_stages(), " stages planned, needs ",
                             planned->request.host_bytes >> 20, " MiB host memory"));
    absl::MutexLock lock(&s.mu);
    s.estimates[created->job.id] = planned->request;
    s.Reschedule();
  }
  return Get(caller, created->job.id);
}

absl::StatusOr<std::pair<std::string, std::string>> JobManager::Plan(const Caller& caller,
                                                                     jobspec::JobSpec spec) {
  State& s = *s_;
  jobspec::Normalize(spec);
  MOBIUS_RETURN_IF_ERROR(jobspec::ValidateJobSpec(
      spec, {.require_absolute_paths = true, .check_files_exist = true}));
  MOBIUS_RETURN_IF_ERROR(TrainerOptionsFromSpec(spec, "unused").status());
  MOBIUS_ASSIGN_OR_RETURN(
      PlannedJob planned,
      PlanJob(spec, s.options.topology, s.options.facts, s.options.node.allowed_gpus, {}));
  JobRequest probe = planned.request;
  probe.job_id = "plan";
  absl::Status fits = CheckFits(s.options.node, probe);
  const planner::Plan& p = planned.report.plan;
  runtime::RunConfig none;
  std::string text = absl::StrCat(
      "plan: ", p.num_stages(), " stages (", p.partitioner, "), ", p.mapping.gpu_order.size(),
      " GPU(s) in order ", GpuList(p.mapping.gpu_order), " (", p.mapper, "), schedule ",
      p.schedule, "\npredicted step: ", p.predicted_step_seconds, " s on ",
      planned.report.device, "\nmemory: ", p.memory.max_gpu_bytes >> 20, " MiB per GPU at most, ",
      p.memory.host_bytes >> 20, " MiB host, ", p.memory.pinned_bytes >> 20, " MiB pinned\n",
      fits.ok() ? "fits this node" : absl::StrCat("does not fit this node: ", fits.message()),
      "\n");
  return std::make_pair(PlanSummaryJson(planned.report, none), text);
}

absl::StatusOr<JobView> JobManager::Get(const Caller& caller, const std::string& id) {
  State& s = *s_;
  MOBIUS_ASSIGN_OR_RETURN(JobRecord record, s.store->GetJob(id));
  if (!caller.admin && record.uid != caller.uid) {
    return absl::PermissionDeniedError(absl::StrCat("job ", id, " belongs to another user"));
  }
  JobView v;
  v.record = std::move(record);
  {
    absl::MutexLock lock(&s.mu);
    auto it = s.queued.find(id);
    if (v.record.state == JobState::kQueued && it != s.queued.end()) {
      v.queue_position = it->second.position;
      v.pending_reason = it->second.reason;
    }
  }
  if (v.record.steps_done > 0) {
    auto steps = s.store->StepReports(id, v.record.steps_done - 1, 1);
    if (steps.ok() && !steps->empty()) v.last_step = steps->back();
  }
  v.predicted_step_seconds = PredictedFromPlanJson(v.record.plan_json);
  return v;
}

absl::StatusOr<std::pair<std::vector<JobView>, std::string>> JobManager::List(
    const Caller& caller, ListJobsFilter filter, int page_size, const std::string& page_token) {
  if (!caller.admin) {
    if (filter.uid.has_value() && *filter.uid != caller.uid) {
      return absl::PermissionDeniedError("only admins may list other users' jobs");
    }
    filter.uid = caller.uid;
  }
  MOBIUS_ASSIGN_OR_RETURN(ListJobsPage page, s_->store->ListJobs(filter, page_size, page_token));
  std::vector<JobView> views;
  absl::MutexLock lock(&s_->mu);
  for (JobRecord& r : page.jobs) {
    JobView v;
    v.record = std::move(r);
    auto it = s_->queued.find(v.record.id);
    if (v.record.state == JobState::kQueued && it != s_->queued.end()) {
      v.queue_position = it->second.position;
      v.pending_reason = it->second.reason;
    }
    v.predicted_step_seconds = PredictedFromPlanJson(v.record.plan_json);
    views.push_back(std::move(v));
  }
  return std::make_pair(std::move(views), page.next_page_token);
}

absl::StatusOr<JobView> JobManager::Cancel(const Caller& caller, const std::string& id) {
  State& s = *s_;
  absl::Status st;
  {
    absl::MutexLock lock(&s.mu);
    absl::StatusOr<JobRecord> job = s.store->GetJob(id);
    if (!job.ok()) {
      st = job.status();
    } else if (!caller.admin && job->uid != caller.uid) {
      st = absl::PermissionDeniedError(absl::StrCat("job ", id, " belongs to ", job->user,
                                                    "; only its owner or an admin may cancel it"));
    } else if (IsTerminal(job->state)) {
      st = absl::FailedPreconditionError(absl::StrCat("job ", id, " already ended (",
                                                      JobStateName(job->state), ")"));
    } else if (job->state == JobState::kQueued) {
      st = s.Transition(id, JobState::kCancelled, absl::StrCat("cancelled by ", caller.user));
      s.estimates.erase(id);
      s.Reschedule();
    } else {
      s.store->SetCancelRequested(id).IgnoreError();
      auto it = s.running.find(id);
      if (it != s.running.end()) {
        it->second.cancel = true;
        it->second.cancelled_by = caller.user;
        if (it->second.launcher) it->second.launcher->Cancel();
      }
      s.DaemonLog(id, absl::StrCat("cancel requested by ", caller.user, "; stopping the workers"));
    }
    s.Bump();
  }
  s.Audit(caller, "CancelJob", id, "", st);
  if (!st.ok()) return st;
  return Get(caller, id);
}

absl::Status JobManager::Watch(const Caller& caller, const std::string& id,
                               const std::function<bool(const JobEvent&)>& emit) {
  State& s = *s_;
  MOBIUS_ASSIGN_OR_RETURN(JobView first, Get(caller, id));
  JobEvent submitted;
  submitted.kind = JobEvent::Kind::kState;
  submitted.state = JobState::kQueued;
  submitted.reason = "submitted";
  submitted.unix_ms = first.record.created_unix_ms;
  if (!emit(submitted)) return absl::OkStatus();
  int64_t seen_transition = 0, seen_step = 0;
  int last_position = -1;
  std::string last_reason;
  for (;;) {
    int64_t version;
    {
      absl::MutexLock lock(&s.mu);
      version = s.version;
    }
    MOBIUS_ASSIGN_OR_RETURN(std::vector<TransitionRecord> transitions, s.store->Transitions(id));
    MOBIUS_ASSIGN_OR_RETURN(std::vector<StepReportRow> steps,
                            s.store->StepReports(id, seen_step, kMaxReadLimit));
    for (const StepReportRow& row : steps) {
      JobEvent e;
      e.kind = JobEvent::Kind::kStep;
      e.step = row;
      e.unix_ms = row.unix_ms;
      if (!emit(e)) return absl::OkStatus();
      seen_step = row.step;
    }
    bool terminal = false;
    for (const TransitionRecord& t : transitions) {
      if (t.seq <= seen_transition) continue;
      seen_transition = t.seq;
      JobEvent e;
      e.kind = JobEvent::Kind::kState;
      e.state = t.to;
      e.reason = t.reason;
      e.unix_ms = t.unix_ms;
      if (t.to == JobState::kQueued) seen_step = 0;  // a restart reports its steps again
      if (!emit(e)) return absl::OkStatus();
      terminal = IsTerminal(t.to);
    }
    if (terminal) return absl::OkStatus();
    MOBIUS_ASSIGN_OR_RETURN(JobView now, Get(caller, id));
    if (IsTerminal(now.record.state)) continue;  // its transition is read on the next pass
    if (now.record.state == JobState::kQueued &&
        (now.queue_position != last_position || now.pending_reason != last_reason)) {
      last_position = now.queue_position;
      last_reason = now.pending_reason;
      JobEvent e;
      e.kind = JobEvent::Kind::kQueue;
      e.state = JobState::kQueued;
      e.queue_position = now.queue_position;
      e.reason = now.pending_reason;
      e.unix_ms = NowMs();
      if (!emit(e)) return absl::OkStatus();
    }
    absl::MutexLock lock(&s.mu);
    while (s.version == version && !s.stopping) {
      s.changed.WaitWithTimeout(&s.mu, absl::Seconds(1));
      if (s.version == version) break;  // re-check the store now and then regardless
    }
    if (s.stopping) return absl::UnavailableError("mobiusd is shutting down");
  }
}

absl::Status JobManager::StreamLogs(const Caller& caller, const std::string& id, int64_t from_seq,
                                    bool follow, const std::function<bool(const LogLine&)>& emit) {
  State& s = *s_;
  MOBIUS_RETURN_IF_ERROR(Get(caller, id).status());
  int64_t next = std::max<int64_t>(from_seq, 1);
  for (;;) {
    int64_t version;
    {
      absl::MutexLock lock(&s.mu);
      version = s.version;
    }
    // Read the state before the lines: lines written before it turned terminal are then read too.
    MOBIUS_ASSIGN_OR_RETURN(JobRecord job, s.store->GetJob(id));
    for (;;) {
      MOBIUS_ASSIGN_OR_RETURN(std::vector<LogLine> lines, s.store->ReadLogs(id, next, 1000));
      for (const LogLine& line : lines) {
        if (!emit(line)) return absl::OkStatus();
        next = line.seq + 1;
      }
      if (lines.size() < 1000) break;
    }
    if (!follow || IsTerminal(job.state)) return absl::OkStatus();
    absl::MutexLock lock(&s.mu);
    if (s.version == version && !s.stopping) s.changed.WaitWithTimeout(&s.mu, absl::Seconds(1));
    if (s.stopping) return absl::UnavailableError("mobiusd is shutting down");
  }
}

absl::Status JobManager::SetDraining(const Caller& caller, bool draining) {
  absl::Status st = caller.admin ? absl::OkStatus()
                                 : absl::PermissionDeniedError("draining is for admins");
  if (st.ok()) {
    absl::MutexLock lock(&s_->mu);
    s_->options.node.draining = draining;
    s_->Reschedule();
  }
  s_->Audit(caller, draining ? "Drain" : "Undrain", "node", "", st);
  return st;
}

absl::Status JobManager::SetQuota(const Caller& caller, uint32_t uid, int32_t max_gpus,
                                  int32_t max_running_jobs) {
  absl::Status st = caller.admin ? s_->store->SetQuota(uid, max_gpus, max_running_jobs)
                                 : absl::PermissionDeniedError("quotas are for admins");
  s_->Audit(caller, "SetQuota", absl::StrCat("uid ", uid),
            absl::StrCat("max_gpus ", max_gpus, " max_running_jobs ", max_running_jobs), st);
  if (st.ok()) {
    absl::MutexLock lock(&s_->mu);
    s_->Reschedule();
  }
  return st;
}

absl::StatusOr<std::vector<Quota>> JobManager::Quotas(const Caller& caller) {
  if (!caller.admin) return absl::PermissionDeniedError("quotas are for admins");
  return s_->store->ListQuotas();
}

NodeStatus JobManager::Status() {
  State& s = *s_;
  NodeStatus out;
  absl::MutexLock lock(&s.mu);
  const NodeResources& node = s.options.node;
  for (const GpuResource& g : node.gpus) {
    NodeStatus::Gpu gpu;
    gpu.index = g.index;
    gpu.name = g.name;
    gpu.memory_bytes = g.memory_bytes;
    gpu.allowed = std::find(node.allowed_gpus.begin(), node.allowed_gpus.end(), g.index) !=
                  node.allowed_gpus.end();
    for (const auto& [id, r] : s.running) {
      if (std::find(r.gpus.begin(), r.gpus.end(), g.index) != r.gpus.end()) gpu.job_id = id;
    }
    out.gpus.push_back(gpu);
  }
  out.host_bytes = node.host_bytes;
  out.pinned_bytes = node.pinned_bytes;
  for (const auto& [id, r] : s.running) {
    out.host_used_bytes += r.host_bytes;
    out.pinned_used_bytes += r.pinned_bytes;
  }
  out.draining = node.draining;
  out.running = static_cast<int>(s.running.size());
  out.queued = static_cast<int>(s.queued.size());
  return out;
}

void JobManager::Shutdown() {
  State& s = *s_;
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&s.mu);
    if (s.stopping && s.running.empty() && s.finished.empty()) return;
    s.stopping = true;
    // Each running job finishes its step, writes a checkpoint and stops (cancelled if it takes
    // longer than the grace period); it is requeued and resumes from that checkpoint.
    for (auto& [id, r] : s.running) {
      r.shutdown = true;
      if (r.launcher) r.launcher->RequestCheckpointAndStop(s.options.checkpoint_grace);
    }
    s.Bump();
  }
  // Supervisors finish (requeueing their job) and move their thread to `finished`.
  for (;;) {
    absl::MutexLock lock(&s.mu);
    if (s.running.empty()) {
      threads.swap(s.finished);
      break;
    }
    s.changed.WaitWithTimeout(&s.mu, absl::Milliseconds(100));
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace mobius::jobs
