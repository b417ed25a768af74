#include "server/rpc/job_service.h"

#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "common/jobspec/json.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/jobspec_convert.h"

namespace mobius {
namespace {

v1::JobState StateToProto(jobs::JobState s) {
  switch (s) {
    case jobs::JobState::kQueued: return v1::JOB_STATE_QUEUED;
    case jobs::JobState::kRunning: return v1::JOB_STATE_RUNNING;
    case jobs::JobState::kSucceeded: return v1::JOB_STATE_SUCCEEDED;
    case jobs::JobState::kFailed: return v1::JOB_STATE_FAILED;
    case jobs::JobState::kCancelled: return v1::JOB_STATE_CANCELLED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

absl::StatusOr<jobs::JobState> StateFromProto(int s) {
  switch (s) {
    case v1::JOB_STATE_QUEUED: return jobs::JobState::kQueued;
    case v1::JOB_STATE_RUNNING: return jobs::JobState::kRunning;
    case v1::JOB_STATE_SUCCEEDED: return jobs::JobState::kSucceeded;
    case v1::JOB_STATE_FAILED: return jobs::JobState::kFailed;
    case v1::JOB_STATE_CANCELLED: return jobs::JobState::kCancelled;
    default: return absl::InvalidArgumentError(absl::StrCat("states: unknown job state ", s));
  }
}

bool EmulatedPlan(const std::string& plan_json) {
  return plan_json.find("\"emulated_links\":true") != std::string::npos;
}

// The streams' heartbeat: WatchJob and StreamLogs send something at least this often, so that a
// client hearing nothing for a few intervals knows the daemon stopped answering (the CLI's
// --stream_idle_seconds). WatchJob sends the job as it is now (a JobEvent with `job`, as its first
// event is); a following StreamLogs sends a LogLine with seq 0, which is no line (clients skip
// it). Sent from the manager's idle callback, so a stream whose handler is stuck sends none.
constexpr std::chrono::seconds kStreamHeartbeat(10);

// Whether the stream is due a heartbeat; `last_write` is when it last sent anything.
bool HeartbeatDue(std::chrono::steady_clock::time_point last_write) {
  return std::chrono::steady_clock::now() - last_write >= kStreamHeartbeat;
}

}  // namespace

v1::StepReport StepToProto(const jobs::StepReportRow& r, bool emulated) {
  v1::StepReport p;
  p.set_step(r.step);
  p.set_total_steps(r.total_steps);
  p.set_loss(r.loss);
  p.set_lr(r.lr);
  p.set_grad_norm(r.grad_norm);
  p.set_tokens(r.tokens);
  p.set_tokens_per_second(r.tokens_per_second);
  p.set_step_seconds(r.step_seconds);
  p.set_compute_seconds(r.compute_seconds);
  p.set_h2d_bytes(r.h2d_bytes);
  p.set_d2h_bytes(r.d2h_bytes);
  p.set_stall_seconds(r.stall_seconds);
  p.set_optimizer_seconds(r.optimizer_seconds);
  if (r.eval_loss) p.set_eval_loss(*r.eval_loss);
  p.set_loss_scale(r.loss_scale);
  p.set_skipped(r.skipped);
  p.set_emulated(emulated);
  p.set_unix_ms(r.unix_ms);
  return p;
}

void SpecProtoCache::Get(const std::string& id, const std::string& spec_json, v1::JobSpec* out) {
  const size_t hash = absl::HashOf(spec_json);
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it != entries_.end() && it->second.json_hash == hash) {
      if (it->second.spec != nullptr) *out = *it->second.spec;
      return;
    }
  }
  std::shared_ptr<const v1::JobSpec> spec;
  if (absl::StatusOr<jobspec::JobSpec> parsed = jobspec::JobSpecFromJson(spec_json); parsed.ok()) {
    spec = std::make_shared<const v1::JobSpec>(JobSpecToProto(*parsed));
    *out = *spec;
  }
  absl::MutexLock lock(&mu_);
  if (entries_.size() >= capacity_) entries_.clear();
  entries_[id] = Entry{hash, std::move(spec)};
}

v1::Job JobToProto(const jobs::JobView& v, SpecProtoCache* cache) {
  const jobs::JobRecord& r = v.record;
  v1::Job j;
  j.set_id(r.id);
  j.set_submission_id(r.submission_id);
  j.set_uid(r.uid);
  j.set_user(r.user);
  j.set_name(r.name);
  if (cache != nullptr) {
    cache->Get(r.id, r.spec_json, j.mutable_spec());
  } else if (absl::StatusOr<jobspec::JobSpec> spec = jobspec::JobSpecFromJson(r.spec_json);
             spec.ok()) {
    *j.mutable_spec() = JobSpecToProto(*spec);
  }
  j.set_state(StateToProto(r.state));
  j.set_state_reason(r.state_reason);
  j.set_pending_reason(v.pending_reason);
  j.set_queue_position(v.queue_position);
  for (int g : r.gpus) j.add_gpus(g);
  j.set_created_unix_ms(r.created_unix_ms);
  j.set_started_unix_ms(r.started_unix_ms);
  j.set_finished_unix_ms(r.finished_unix_ms);
  j.set_restarts(r.restarts);
  j.set_steps_done(r.steps_done);
  j.set_total_steps(r.total_steps);
  if (v.last_step) *j.mutable_last_step() = StepToProto(*v.last_step, EmulatedPlan(r.plan_json));
  if (v.last_eval) *j.mutable_last_eval() = StepToProto(*v.last_eval, EmulatedPlan(r.plan_json));
  j.set_checkpoint(r.checkpoint);
  j.set_predicted_step_seconds(v.predicted_step_seconds);
  j.set_fair_share(v.fair_share);
  return j;
}

namespace {

void TotalsToProto(const jobs::UsageTotals& t, v1::UsageTotals* p) {
  p->set_uid(t.uid);
  p->set_user(t.user);
  p->set_gid(t.gid);
  p->set_group(t.group);
  p->set_runs(t.runs);
  p->set_jobs(t.jobs);
  p->set_gpu_seconds(t.gpu_seconds);
  p->set_host_gib_seconds(t.host_gib_seconds);
  p->set_measured_host_gib_seconds(t.measured_host_gib_seconds);
  p->set_tokens(t.tokens);
  p->set_steps(t.steps);
  p->set_running(t.running);
}

void RunToProto(const jobs::UsageRecord& r, v1::RunUsage* p) {
  p->set_job_id(r.job_id);
  p->set_uid(r.uid);
  p->set_user(r.user);
  p->set_group(r.group);
  p->set_gpus(r.gpus);
  p->set_started_unix_ms(r.started_unix_ms);
  p->set_last_unix_ms(r.last_unix_ms);
  p->set_ended(r.ended);
  p->set_gpu_seconds(r.gpu_seconds());
  p->set_host_gib_seconds(r.host_gib_seconds());
  p->set_measured_host_gib_seconds(r.measured_host_byte_seconds / (1 << 30));
  p->set_tokens(r.tokens);
  p->set_steps(r.steps);
}

}  // namespace

// Times the call for the metrics (on destruction).
class RpcTimer {
 public:
  RpcTimer(const RpcObserver& observer, std::string method)
      : observer_(observer), method_(std::move(method)), start_(std::chrono::steady_clock::now()) {}
  ~RpcTimer() {
    if (observer_) {
      observer_(method_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
                             .count());
    }
  }

 private:
  const RpcObserver& observer_;
  std::string method_;
  std::chrono::steady_clock::time_point start_;
};

#define MOBIUS_RPC_CALLER(service, var)                                                 \
  RpcTimer rpc_timer_(on_rpc_, absl::StrCat(service, ".", __func__));                   \
  absl::StatusOr<jobs::Caller> var = callers_->Resolve(*context);                      \
  if (!var.ok()) return ToGrpcStatus(var.status())

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* context,
                                       const v1::SubmitJobRequest* request, v1::Job* response) {
  MOBIUS_RPC_CALLER("JobService", caller);
  absl::StatusOr<jobs::JobView> v =
      manager_->Submit(*caller, request->submission_id(), JobSpecFromProto(request->spec()));
  if (!v.ok()) return ToGrpcStatus(v.status());
  *response = JobToProto(*v);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                                    v1::Job* response) {
  MOBIUS_RPC_CALLER("JobService", caller);
  absl::StatusOr<jobs::JobView> v = manager_->Get(*caller, request->id());
  if (!v.ok()) return ToGrpcStatus(v.status());
  *response = JobToProto(*v, &specs_);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext* context,
                                      const v1::ListJobsRequest* request,
                                      v1::ListJobsResponse* response) {
  MOBIUS_RPC_CALLER("JobService", caller);
  jobs::ListJobsFilter filter;
  if (request->has_uid()) filter.uid = request->uid();
  if (!request->user().empty()) {
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* out = nullptr;
    if (getpwnam_r(request->user().c_str(), &pw, buf.data(), buf.size(), &out) != 0 ||
        out == nullptr) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("user: no such user \"", request->user(), "\"")));
    }
    filter.uid = out->pw_uid;
  }
  for (int s : request->states()) {
    absl::StatusOr<jobs::JobState> state = StateFromProto(s);
    if (!state.ok()) return ToGrpcStatus(state.status());
    filter.states.Add(*state);
  }
  auto page = manager_->List(*caller, filter, request->page_size(), request->page_token());
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (const jobs::JobView& v : page->first) *response->add_jobs() = JobToProto(v, &specs_);
  response->set_next_page_token(page->second);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetUsage(grpc::ServerContext* context,
                                      const v1::GetUsageRequest* request,
                                      v1::GetUsageResponse* response) {
  MOBIUS_RPC_CALLER("JobService", caller);
  jobs::UsageQuery query;
  if (request->has_uid()) query.uid = request->uid();
  query.since_unix_ms = request->since_unix_ms();
  query.runs = request->runs();
  absl::StatusOr<jobs::UsageView> v = manager_->Usage(*caller, query);
  if (!v.ok()) return ToGrpcStatus(v.status());
  response->set_since_unix_ms(v->report.since_unix_ms);
  response->set_until_unix_ms(v->report.until_unix_ms);
  for (const jobs::UsageTotals& t : v->report.users) {
    v1::UsageTotals* p = response->add_users();
    TotalsToProto(t, p);
    auto f = v->fair_share.find(t.uid);
    if (f != v->fair_share.end()) p->set_fair_share(f->second);
  }
  for (const jobs::UsageTotals& t : v->report.groups) TotalsToProto(t, response->add_groups());
  for (const jobs::UsageRecord& r : v->runs) RunToProto(r, response->add_runs());
  response->set_runs_omitted(v->runs_omitted);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* context,
                                       const v1::CancelJobRequest* request, v1::Job* response) {
  MOBIUS_RPC_CALLER("JobService", caller);
  absl::StatusOr<jobs::JobView> v = manager_->Cancel(*caller, request->id());
  if (!v.ok()) return ToGrpcStatus(v.status());
  *response = JobToProto(*v);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::WatchJob(grpc::ServerContext* context,
                                      const v1::WatchJobRequest* request,
                                      grpc::ServerWriter<v1::JobEvent>* writer) {
  MOBIUS_RPC_CALLER("JobService", caller);
  absl::StatusOr<jobs::JobView> first = manager_->Get(*caller, request->id());
  if (!first.ok()) return ToGrpcStatus(first.status());
  v1::JobEvent head;
  *head.mutable_job() = JobToProto(*first);
  if (!writer->Write(head)) return grpc::Status::OK;
  auto last_write = std::chrono::steady_clock::now();
  auto heartbeat = [&] {
    if (context->IsCancelled()) return false;
    if (!HeartbeatDue(last_write)) return true;
    absl::StatusOr<jobs::JobView> now = manager_->Get(*caller, request->id());
    if (!now.ok()) return true;  // the stream's own reads report a lasting failure
    v1::JobEvent beat;
    *beat.mutable_job() = JobToProto(*now, &specs_);
    last_write = std::chrono::steady_clock::now();
    return writer->Write(beat);
  };
  // The run's plan (with its emulated_links) is recorded when the job starts, which may be after
  // this call began: a job watched from submission is looked at again at its first step report.
  bool emulated = EmulatedPlan(first->record.plan_json);
  bool plan_seen =
      first->record.state == jobs::JobState::kRunning && !first->record.plan_json.empty();
  auto emit = [&](const jobs::JobEvent& e) {
    if (context->IsCancelled()) return false;
    v1::JobEvent out;
    switch (e.kind) {
      case jobs::JobEvent::Kind::kState: {
        v1::JobStateChange* c = out.mutable_state_change();
        c->set_state(StateToProto(e.state));
        c->set_reason(e.reason);
        c->set_unix_ms(e.unix_ms);
        break;
      }
      case jobs::JobEvent::Kind::kStep:
        if (!plan_seen) {
          if (absl::StatusOr<jobs::JobView> now = manager_->Get(*caller, request->id()); now.ok()) {
            emulated = EmulatedPlan(now->record.plan_json);
          }
          plan_seen = true;
        }
        *out.mutable_step() = StepToProto(e.step, emulated);
        break;
      case jobs::JobEvent::Kind::kQueue: {
        v1::QueueUpdate* q = out.mutable_queue();
        q->set_queue_position(e.queue_position);
        q->set_pending_reason(e.reason);
        q->set_unix_ms(e.unix_ms);
        break;
      }
    }
    last_write = std::chrono::steady_clock::now();
    return writer->Write(out);
  };
  return ToGrpcStatus(manager_->Watch(*caller, request->id(), emit, heartbeat));
}

grpc::Status JobServiceImpl::StreamLogs(grpc::ServerContext* context,
                                        const v1::StreamLogsRequest* request,
                                        grpc::ServerWriter<v1::LogLine>* writer) {
  MOBIUS_RPC_CALLER("JobService", caller);
  auto last_write = std::chrono::steady_clock::now();
  absl::Status st = manager_->StreamLogs(
      *caller, request->id(), request->from_seq(), request->follow(),
      [&](const jobs::LogLine& line) {
        if (context->IsCancelled()) return false;
        v1::LogLine out;
        out.set_seq(line.seq);
        out.set_unix_ms(line.unix_ms);
        out.set_source(line.source);
        out.set_text(line.text);
        last_write = std::chrono::steady_clock::now();
        return writer->Write(out);
      },
      [&] {
        if (context->IsCancelled()) return false;
        if (!HeartbeatDue(last_write)) return true;
        v1::LogLine beat;  // seq 0: no line
        beat.set_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count());
        last_write = std::chrono::steady_clock::now();
        return writer->Write(beat);
      });
  return ToGrpcStatus(st);
}

grpc::Status AdminServiceImpl::Drain(grpc::ServerContext* context, const v1::DrainRequest* request,
                                     v1::DrainResponse* response) {
  MOBIUS_RPC_CALLER("AdminService", caller);
  absl::Status st = manager_->SetDraining(*caller, true);
  if (!st.ok()) return ToGrpcStatus(st);
  jobs::NodeStatus status = manager_->Status();
  response->set_draining(true);
  response->set_running_jobs(status.running);
  response->set_queued_jobs(status.queued);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::Undrain(grpc::ServerContext* context,
                                       const v1::UndrainRequest* request,
                                       v1::UndrainResponse* response) {
  MOBIUS_RPC_CALLER("AdminService", caller);
  absl::Status st = manager_->SetDraining(*caller, false);
  if (!st.ok()) return ToGrpcStatus(st);
  response->set_draining(false);
  return grpc::Status::OK;
}

namespace {

void QuotaToProto(const jobs::Quota& q, v1::Quota* p) {
  p->set_uid(q.uid);
  p->set_user(UserName(q.uid));
  p->set_max_gpus(q.max_gpus);
  p->set_max_running_jobs(q.max_running_jobs);
  p->set_max_queued_jobs(q.max_queued_jobs);
  p->set_max_host_bytes(q.max_host_bytes);
}

}  // namespace

grpc::Status AdminServiceImpl::SetQuota(grpc::ServerContext* context,
                                        const v1::SetQuotaRequest* request, v1::Quota* response) {
  MOBIUS_RPC_CALLER("AdminService", caller);
  const jobs::Quota q{.uid = request->uid(),
                      .max_gpus = request->max_gpus(),
                      .max_running_jobs = request->max_running_jobs(),
                      .max_queued_jobs = request->max_queued_jobs(),
                      .max_host_bytes = request->max_host_bytes()};
  absl::Status st = manager_->SetQuota(*caller, q);
  if (!st.ok()) return ToGrpcStatus(st);
  QuotaToProto(q, response);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::GetQuotas(grpc::ServerContext* context,
                                         const v1::GetQuotasRequest* request,
                                         v1::GetQuotasResponse* response) {
  MOBIUS_RPC_CALLER("AdminService", caller);
  auto quotas = manager_->Quotas(*caller);
  if (!quotas.ok()) return ToGrpcStatus(quotas.status());
  for (const jobs::Quota& q : *quotas) QuotaToProto(q, response->add_quotas());
  return grpc::Status::OK;
}

}  // namespace mobius
