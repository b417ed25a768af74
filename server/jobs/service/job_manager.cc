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
#include "host/scheduler/fits.h"
#include "host/scheduler/scheduler.h"
#include "server/jobs/service/job_identity.h"
#include "server/jobs/service/job_manager_state.h"
#include "server/jobs/service/state_dirs.h"
#include "host/run/job_planning.h"
#include "server/jobs/store/page_token.h"
#include "common/model/model_config_parse.h"
#include "host/launch/run_builder.h"
#include "host/planner/profile.h"
#include "common/run/store_layout.h"
#include "common/run/checkpoint_dirs.h"
#include "common/run/host_store.h"
#include "host/launch/launcher.h"

namespace mobius::jobs {

using internal::GpuList;
using internal::NowMs;
using internal::PlanSummaryJson;
using internal::PredictedFromPlanJson;

// ---- public API ---------------------------------------------------------------------------------

JobManager::JobManager(std::unique_ptr<State> state) : s_(std::move(state)) {}

JobManager::~JobManager() { Shutdown(); }

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Create(JobManagerOptions options) {
  auto s = std::make_unique<State>();
  MOBIUS_RETURN_IF_ERROR(PrepareStateDir(options.state_dir));
  MOBIUS_ASSIGN_OR_RETURN(s->store, JobStore::Open(options.state_dir + "/jobs.db"));
  RestrictDatabaseFiles(options.state_dir);
  SchedulerOptions so;
  so.preemption = options.preemption;
  s->scheduler = Scheduler(so);
  s->options = std::move(options);
  absl::StatusOr<int> cleaned = runtime::CleanOrphanStores(s->options.shm_dir);
  if (cleaned.ok() && *cleaned > 0) {
    LOG(INFO) << "removed " << *cleaned << " orphaned host store(s) from " << s->options.shm_dir;
  }
  // Runs the previous daemon left open died with it: closed at their last write.
  if (absl::StatusOr<int> closed = s->store->CloseOpenUsage(); !closed.ok()) {
    LOG(ERROR) << "accounting: cannot close the previous daemon's open runs: " << closed.status();
  } else if (*closed > 0) {
    LOG(INFO) << "accounting: closed " << *closed << " run(s) the previous daemon left open";
  }
  // Jobs that were running when the daemon died (or whose end it could not record).
  {
    absl::MutexLock lock(&s->mu);
    MOBIUS_RETURN_IF_ERROR(s->RecoverRunningJobs());
  }
  auto m = std::unique_ptr<JobManager>(new JobManager(std::move(s)));
  State* state = m->s_.get();
  state->retrier = std::thread([state] { state->RetryLoop(); });
  {
    absl::MutexLock lock(&state->mu);
    state->Reschedule();
  }
  return m;
}

namespace {

// Admission, one route for submit and plan: the spec normalised, the caller allowed to submit,
// the spec valid, its files read as the caller (the model's config), the job planned on this node
// (PlanJob), and whether it can ever fit this node (`fits`; the probe's id names it there).
struct Admission {
  PlannedJob planned;
  absl::Status fits;
};

absl::StatusOr<Admission> Admit(JobManager::State& s, const Caller& caller, jobspec::JobSpec& spec,
                                SpecCheckCache* checks, const std::string& probe_id) {
  jobspec::Normalize(spec);
  MOBIUS_RETURN_IF_ERROR(CheckMaySubmit(s.options, caller));
  MOBIUS_RETURN_IF_ERROR(jobspec::ValidateJobSpec(spec, {.require_absolute_paths = true}));
  MOBIUS_RETURN_IF_ERROR(TrainerOptionsFromSpec(spec, "unused").status());
  MOBIUS_ASSIGN_OR_RETURN(model::ModelConfig config,
                          CheckSpecFilesAs(s.options, caller.uid, spec, checks));
  PlanJobOptions plan_options = PlanOptionsOf(s.options);
  plan_options.model_config = &config;
  Admission a;
  MOBIUS_ASSIGN_OR_RETURN(a.planned, PlanJob(spec, s.options.topology, s.options.facts,
                                             s.options.node.allowed_gpus, {}, plan_options));
  JobRequest probe = a.planned.request;
  probe.job_id = probe_id;
  a.fits = CheckFits(s.options.node, probe);
  return a;
}

}  // namespace

absl::StatusOr<JobView> JobManager::Submit(const Caller& caller, const std::string& submission_id,
                                           jobspec::JobSpec spec) {
  State& s = *s_;
  absl::StatusOr<Admission> admitted = Admit(s, caller, spec, &s.spec_checks, "new");
  const absl::Status st = admitted.ok() ? admitted->fits : admitted.status();
  if (!st.ok()) {
    s.Audit(caller, "SubmitJob", submission_id, spec.name, st);
    if (s.options.observer != nullptr) {
      s.options.observer->SubmitRejected(absl::IsFailedPrecondition(st) ? "never_fits"
                                                                        : "invalid_spec");
    }
    return st;
  }
  const PlannedJob& planned = admitted->planned;
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
  // The user's limit on queued jobs, counted by the store as it creates the job.
  int32_t max_queued = s.options.default_quota.max_queued_jobs;
  if (absl::StatusOr<Quota> q = s.store->GetQuota(caller.uid); q.ok()) max_queued = q->max_queued_jobs;
  absl::StatusOr<JobStore::CreateResult> created = s.store->CreateJob(record, max_queued);
  s.Audit(caller, "SubmitJob", created.ok() ? created->job.id : submission_id, spec.name,
          created.status());
  if (!created.ok()) return created.status();
  if (!created->existed) {
    s.DaemonLog(created->job.id,
                absl::StrCat("submitted by ", caller.user, " (uid ", caller.uid, "): ",
                             planned.report.plan.num_stages(), " stages planned, needs ",
                             planned.request.host_bytes >> 20, " MiB host memory"));
    absl::MutexLock lock(&s.mu);
    s.estimates[created->job.id] = planned.request;
    s.Reschedule();
  }
  return Get(caller, created->job.id);
}

absl::StatusOr<std::pair<std::string, std::string>> JobManager::Plan(const Caller& caller,
                                                                     jobspec::JobSpec spec) {
  MOBIUS_ASSIGN_OR_RETURN(Admission admitted, Admit(*s_, caller, spec, nullptr, "plan"));
  const PlannedJob& planned = admitted.planned;
  const absl::Status& fits = admitted.fits;
  const planner::Plan& p = planned.report.plan;
  runtime::RunConfig none;
  std::string text = absl::StrCat(
      "plan: ", p.num_stages(), " stages (", p.partitioner, "), ", p.mapping.gpu_order.size(),
      " GPU(s) in order ", GpuList(p.mapping.gpu_order), " (", p.mapper, "), schedule ",
      runtime::ScheduleName(p.schedule), "\npredicted step: ", p.predicted_step_seconds, " s on ",
      planned.report.device, "\nmemory: ", p.memory.max_gpu_bytes >> 20, " MiB per GPU at most, ",
      p.memory.host_bytes >> 20, " MiB host, ", p.memory.pinned_bytes >> 20, " MiB pinned\n",
      fits.ok() ? "fits this node" : absl::StrCat("does not fit this node: ", fits.message()),
      "\n");
  return std::make_pair(PlanSummaryJson(planned.report, none), text);
}

namespace {

// Sets the view's latest step report and latest eval report from the store. A failed read leaves
// them unset: they are informational, and the job itself was read.
void AddStepReports(JobStore& store, JobView& v) {
  if (v.record.steps_done <= 0) return;
  const int64_t at = v.record.steps_done;
  if (auto last = store.LatestStepReport(v.record.id, at); last.ok()) v.last_step = *last;
  if (auto eval = store.LatestStepReport(v.record.id, at, /*eval_only=*/true); eval.ok()) {
    v.last_eval = *eval;
  }
}

}  // namespace

absl::StatusOr<JobView> JobManager::Get(const Caller& caller, const std::string& id) {
  State& s = *s_;
  JobView v;
  {
    absl::MutexLock lock(&s.mu);
    // Under the lock: a pending transition is written and popped atomically with respect to it.
    MOBIUS_ASSIGN_OR_RETURN(v.record, s.GetJob(id));
    if (!caller.admin && v.record.uid != caller.uid) {
      return absl::PermissionDeniedError(absl::StrCat("job ", id, " belongs to another user"));
    }
    auto it = s.queued.find(id);
    if (v.record.state == JobState::kQueued && it != s.queued.end()) {
      v.queue_position = it->second.position;
      v.pending_reason = it->second.reason;
      v.fair_share = s.share_factors.count(v.record.uid) ? s.share_factors[v.record.uid] : 1.0;
    }
  }
  AddStepReports(*s.store, v);
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
  std::string next_page_token;
  MOBIUS_ASSIGN_OR_RETURN(const int64_t after_seq, DecodePageToken(page_token, filter));
  std::vector<JobView> views;
  {
    absl::MutexLock lock(&s_->mu);
    MOBIUS_ASSIGN_OR_RETURN(ListJobsPage page, s_->store->ListJobs(filter, page_size, page_token));
    MOBIUS_RETURN_IF_ERROR(s_->OverlayPage(filter, after_seq, page));
    next_page_token = std::move(page.next_page_token);
    for (JobRecord& r : page.jobs) {
      JobView v;
      v.record = std::move(r);
      auto it = s_->queued.find(v.record.id);
      if (v.record.state == JobState::kQueued && it != s_->queued.end()) {
        v.queue_position = it->second.position;
        v.pending_reason = it->second.reason;
        auto f = s_->share_factors.find(v.record.uid);
        v.fair_share = f == s_->share_factors.end() ? 1.0 : f->second;
      }
      v.predicted_step_seconds = PredictedFromPlanJson(v.record.plan_json);
      views.push_back(std::move(v));
    }
  }
  for (JobView& v : views) AddStepReports(*s_->store, v);  // outside the lock: SQLite reads
  return std::make_pair(std::move(views), std::move(next_page_token));
}

absl::StatusOr<JobView> JobManager::Cancel(const Caller& caller, const std::string& id) {
  State& s = *s_;
  absl::Status st;
  {
    absl::MutexLock lock(&s.mu);
    absl::StatusOr<JobRecord> job = s.GetJob(id);
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
      // Informational: the supervisor acts on `cancel` below, and the job ends CANCELLED (in
      // memory first when the store cannot be written).
      s.Informational(id, "cancel requests", s.store->SetCancelRequested(id));
      auto it = s.running.find(id);
      if (it != s.running.end()) {
        it->second.cancel = true;
        it->second.cancelled_by = caller.user;
        if (it->second.launcher) it->second.launcher->Cancel();
        s.DaemonLog(id,
                    absl::StrCat("cancel requested by ", caller.user, "; stopping the workers"));
      } else {
        // RUNNING without a supervisor here (nothing should leave one so): nothing to stop.
        st = s.Transition(id, JobState::kCancelled, absl::StrCat("cancelled by ", caller.user));
      }
    }
    s.Bump();
  }
  s.Audit(caller, "CancelJob", id, "", st);
  if (!st.ok()) return st;
  return Get(caller, id);
}

absl::Status JobManager::Watch(const Caller& caller, const std::string& id,
                               const std::function<bool(const JobEvent&)>& emit,
                               const std::function<bool()>& idle) {
  State& s = *s_;
  MOBIUS_ASSIGN_OR_RETURN(JobView first, Get(caller, id));
  JobEvent submitted;
  submitted.kind = JobEvent::Kind::kState;
  submitted.state = JobState::kQueued;
  submitted.reason = "submitted";
  submitted.unix_ms = first.record.created_unix_ms;
  if (!emit(submitted)) return absl::OkStatus();
  // The job's transitions are the store's followed by its pending ones; a pending one, once
  // written, comes back from the store with a seq: those already sent are skipped by count.
  int64_t seen_transition = 0, seen_step = 0;
  size_t sent_pending = 0;
  int last_position = -1;
  std::string last_reason;
  for (;;) {
    int64_t version;
    std::vector<TransitionRecord> transitions;
    std::vector<PendingTransition> pending;
    {
      absl::MutexLock lock(&s.mu);
      version = s.version;
      MOBIUS_ASSIGN_OR_RETURN(transitions, s.store->Transitions(id));
      if (const auto* queue = s.pending.Of(id)) pending.assign(queue->begin(), queue->end());
    }
    MOBIUS_ASSIGN_OR_RETURN(std::vector<StepReportRow> steps,
                            s.store->StepReports(id, seen_step, kMaxReadLimit));
    bool sent = false;
    for (const StepReportRow& row : steps) {
      JobEvent e;
      e.kind = JobEvent::Kind::kStep;
      e.step = row;
      e.unix_ms = row.unix_ms;
      if (!emit(e)) return absl::OkStatus();
      seen_step = row.step;
      sent = true;
    }
    bool terminal = false;
    auto send = [&](JobState to, const std::string& reason, int64_t unix_ms) {
      JobEvent e;
      e.kind = JobEvent::Kind::kState;
      e.state = to;
      e.reason = reason;
      e.unix_ms = unix_ms;
      if (to == JobState::kQueued) seen_step = 0;  // a restart reports its steps again
      terminal = IsTerminal(to);
      sent = true;
      return emit(e);
    };
    for (const TransitionRecord& t : transitions) {
      if (t.seq <= seen_transition) continue;
      seen_transition = t.seq;
      if (sent_pending > 0) {  // sent while it was pending
        --sent_pending;
        continue;
      }
      if (!send(t.to, t.reason, t.unix_ms)) return absl::OkStatus();
    }
    sent_pending = std::min(sent_pending, pending.size());  // one the store refused was dropped
    for (size_t i = sent_pending; i < pending.size(); ++i) {
      if (!send(pending[i].to, pending[i].reason, pending[i].unix_ms)) return absl::OkStatus();
      ++sent_pending;
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
      sent = true;
    }
    if (!sent && idle && !idle()) return absl::OkStatus();
    absl::MutexLock lock(&s.mu);
    while (s.version == version && !s.stopping) {
      s.changed.WaitWithTimeout(&s.mu, absl::Seconds(1));
      if (s.version == version) break;  // re-check the store now and then regardless
    }
    if (s.stopping) return absl::UnavailableError("mobiusd is shutting down");
  }
}

absl::Status JobManager::StreamLogs(const Caller& caller, const std::string& id, int64_t from_seq,
                                    bool follow, const std::function<bool(const LogLine&)>& emit,
                                    const std::function<bool()>& idle) {
  State& s = *s_;
  MOBIUS_RETURN_IF_ERROR(Get(caller, id).status());
  int64_t next = std::max<int64_t>(from_seq, 1);
  for (;;) {
    int64_t version;
    JobRecord job;
    {
      absl::MutexLock lock(&s.mu);
      version = s.version;
      // Read the state before the lines: lines written before it turned terminal are then read
      // too. The daemon's state: a job whose end the store has not taken is over all the same.
      MOBIUS_ASSIGN_OR_RETURN(job, s.GetJob(id));
    }
    bool sent = false;
    for (;;) {
      MOBIUS_ASSIGN_OR_RETURN(std::vector<LogLine> lines, s.store->ReadLogs(id, next, 1000));
      for (const LogLine& line : lines) {
        if (!emit(line)) return absl::OkStatus();
        next = line.seq + 1;
        sent = true;
      }
      if (lines.size() < 1000) break;
    }
    if (!follow || IsTerminal(job.state)) return absl::OkStatus();
    if (!sent && idle && !idle()) return absl::OkStatus();
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

absl::Status JobManager::SetQuota(const Caller& caller, const Quota& q) {
  absl::Status st = caller.admin ? s_->store->SetQuota(q)
                                 : absl::PermissionDeniedError("quotas are for admins");
  s_->Audit(caller, "SetQuota", absl::StrCat("uid ", q.uid),
            absl::StrCat("max_gpus ", q.max_gpus, " max_running_jobs ", q.max_running_jobs,
                         " max_queued_jobs ", q.max_queued_jobs, " max_host_bytes ",
                         q.max_host_bytes),
            st);
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
  std::thread retrier;
  {
    absl::MutexLock lock(&s.mu);
    retrier = std::move(s.retrier);
    s.retry_wake.SignalAll();
    if (s.stopping && s.running.empty() && s.finished.empty() && !retrier.joinable()) return;
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
  if (retrier.joinable()) retrier.join();
  // The supervisors' last changes (requeues) are in; whatever the store still refuses is logged.
  absl::MutexLock lock(&s.mu);
  s.FinalFlush();
}

}  // namespace mobius::jobs
