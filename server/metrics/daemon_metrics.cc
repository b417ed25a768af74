#include "server/metrics/daemon_metrics.h"

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/os/identity.h"
#include "server/metrics/metrics_http.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace mobius {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

namespace {

Histogram::BucketBoundaries StepBuckets() {
  return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120, 300};
}
Histogram::BucketBoundaries RpcBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
}
Histogram::BucketBoundaries WaitBuckets() {
  return {0.1, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600};
}

}  // namespace

struct DaemonMetrics::State {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<MetricsHttpServer> http;  // destroyed first (declared last would be later)
  MetricsOptions options;

  Family<Gauge>& build_info = BuildGauge().Name("mobius_build_info")
      .Help("Always 1; the labels describe the running mobiusd").Register(*registry);
  Family<Histogram>& rpc = BuildHistogram().Name("mobius_rpc_duration_seconds")
      .Help("Time mobiusd spent answering a gRPC call, by method").Register(*registry);
  Family<Counter>& restarts = BuildCounter().Name("mobius_worker_restarts_total")
      .Help("Jobs restarted from their checkpoint after a worker failure").Register(*registry);
  Family<Gauge>& jobs = BuildGauge().Name("mobius_jobs")
      .Help("Jobs in the queue or running, by state").Register(*registry);
  Family<Histogram>& queue_wait = BuildHistogram().Name("mobius_job_queue_wait_seconds")
      .Help("Time from submission to start").Register(*registry);
  Family<Counter>& rejections = BuildCounter().Name("mobius_admission_rejections_total")
      .Help("Submissions refused, by reason (invalid_spec, never_fits)").Register(*registry);
  Family<Gauge>& gpu_used = BuildGauge().Name("mobius_gpu_memory_used_bytes")
      .Help("GPU memory the running job's plan uses on this GPU (planner estimate)")
      .Register(*registry);
  Family<Gauge>& gpu_capacity = BuildGauge().Name("mobius_gpu_memory_capacity_bytes")
      .Help("GPU memory capacity").Register(*registry);
  Family<Counter>& swap_bytes = BuildCounter().Name("mobius_stage_swap_bytes_total")
      .Help("Bytes copied between host and this GPU by pipeline workers (stages, activations, "
            "gradients), by direction").Register(*registry);
  Family<Counter>& stall = BuildCounter().Name("mobius_swap_stall_seconds_total")
      .Help("Time this GPU's worker waited for stage weights, activations or updates")
      .Register(*registry);
  Family<Counter>& compute = BuildCounter().Name("mobius_gpu_compute_seconds_total")
      .Help("Time this GPU's worker waited for its compute queue").Register(*registry);
  Family<Counter>& link_bytes = BuildCounter().Name("mobius_pcie_link_bytes_total")
      .Help("Bytes over each PCIe link (emulated links on the CPU backend), by direction")
      .Register(*registry);
  Family<Histogram>& job_step = BuildHistogram().Name("mobius_job_step_duration_seconds")
      .Help("Optimizer step wall time of a running job").Register(*registry);
  Family<Counter>& job_tokens = BuildCounter().Name("mobius_job_tokens_total")
      .Help("Tokens a running job has trained on").Register(*registry);
  Family<Gauge>& job_loss = BuildGauge().Name("mobius_job_loss")
      .Help("Training loss of a running job's last step").Register(*registry);
  Family<Gauge>& job_eval_loss = BuildGauge().Name("mobius_job_eval_loss")
      .Help("Held-out loss of a running job's last eval step (NaN before the first)")
      .Register(*registry);
  Family<Gauge>& job_mfu = BuildGauge().Name("mobius_job_mfu_ratio")
      .Help("Model FLOPs utilisation of a running job (6N FLOPs per token over its GPUs' peak)")
      .Register(*registry);
  Family<Gauge>& job_planned = BuildGauge().Name("mobius_job_planned_step_seconds")
      .Help("The planner's predicted step time for a running job").Register(*registry);
  Family<Gauge>& job_measured = BuildGauge().Name("mobius_job_measured_step_seconds")
      .Help("A running job's last measured step time").Register(*registry);
  Family<Gauge>& job_current_step = BuildGauge().Name("mobius_job_current_step")
      .Help("A running job's last completed optimizer step").Register(*registry);
  Family<Gauge>& job_total_steps = BuildGauge().Name("mobius_job_total_steps")
      .Help("The optimizer steps a running job will take in all").Register(*registry);
  Family<Gauge>& job_progress = BuildGauge().Name("mobius_job_progress_ratio")
      .Help("A running job's progress: completed steps over total steps, 0..1")
      .Register(*registry);
  Family<Gauge>& job_tokens_per_second = BuildGauge().Name("mobius_job_tokens_per_second")
      .Help("A running job's training throughput over its last step").Register(*registry);
  Family<Gauge>& job_loss_scale = BuildGauge().Name("mobius_job_loss_scale")
      .Help("A running fp16 job's dynamic loss scale at its last step (0: bf16)")
      .Register(*registry);
  Family<Counter>& job_skipped = BuildCounter().Name("mobius_job_skipped_steps_total")
      .Help("Steps a running fp16 job skipped because its gradients overflowed")
      .Register(*registry);
  Family<Counter>& train_tokens = BuildCounter().Name("mobius_train_tokens_total")
      .Help("Tokens trained on by all jobs").Register(*registry);
  Family<Histogram>& train_step = BuildHistogram().Name("mobius_train_step_duration_seconds")
      .Help("Optimizer step wall time, all jobs").Register(*registry);
  Family<Gauge>& host_pinned = BuildGauge().Name("mobius_host_pinned_bytes")
      .Help("Page-locked host memory reserved by running jobs (planner estimate)")
      .Register(*registry);
  Family<Gauge>& host_store = BuildGauge().Name("mobius_host_store_bytes")
      .Help("Shared host model stores of running jobs").Register(*registry);
  Family<Counter>& user_gpu_seconds = BuildCounter().Name("mobius_user_gpu_seconds_total")
      .Help("GPU-seconds (GPUs held x wall time) of the user's runs").Register(*registry);
  Family<Counter>& user_host_gib_seconds =
      BuildCounter().Name("mobius_user_host_memory_gib_seconds_total")
          .Help("Host-memory GiB-seconds of the user's runs (the plans' estimates x wall time)")
          .Register(*registry);
  Family<Counter>& user_tokens = BuildCounter().Name("mobius_user_tokens_total")
      .Help("Tokens trained by the user's runs").Register(*registry);
  Family<Gauge>& user_fair_share = BuildGauge().Name("mobius_user_fair_share")
      .Help("The user's fair-share factor (1: no recent usage), users with queued or running jobs")
      .Register(*registry);
  std::map<uint32_t, std::string> fair_share_users;  // guarded by mu: the gauges set last round

  std::mutex mu;  // guards the per-job bookkeeping below
  struct PerJob {
    Histogram* step = nullptr;
    Counter* tokens = nullptr;
    Gauge *loss = nullptr, *eval_loss = nullptr, *mfu = nullptr, *planned = nullptr,
          *measured = nullptr, *current_step = nullptr, *total_steps = nullptr,
          *progress = nullptr, *tokens_per_second = nullptr, *loss_scale = nullptr;
    Counter* skipped = nullptr;
    std::vector<std::pair<uint64_t, uint64_t>> link_seen;  // cumulative link bytes counted so far
    std::vector<int> gpus;
    int64_t pinned = 0, store = 0;
  };
  std::map<std::string, PerJob> per_job;

  std::string Gpu(int g) const { return absl::StrCat(g); }
};

absl::StatusOr<std::unique_ptr<DaemonMetrics>> DaemonMetrics::Create(const MetricsOptions& options) {
  auto s = std::make_unique<State>();
  s->options = options;
  s->build_info.Add({{"version", options.version}}).Set(1);
  // Every known series exists from the start (at 0), so rate() sees the first event.
  for (size_t g = 0; g < options.gpu_memory_capacity_bytes.size(); ++g) {
    const std::string gpu = s->Gpu(static_cast<int>(g));
    s->gpu_capacity.Add({{"gpu", gpu}})
        .Set(static_cast<double>(options.gpu_memory_capacity_bytes[g]));
    s->gpu_used.Add({{"gpu", gpu}}).Set(0);
    for (const char* dir : {"h2d", "d2h"}) s->swap_bytes.Add({{"gpu", gpu}, {"direction", dir}});
    s->stall.Add({{"gpu", gpu}});
    s->compute.Add({{"gpu", gpu}});
  }
  for (const char* reason : {"invalid_spec", "never_fits"}) s->rejections.Add({{"reason", reason}});
  for (const char* st : {"queued", "running"}) s->jobs.Add({{"state", st}}).Set(0);
  s->host_pinned.Add({}).Set(0);
  s->host_store.Add({}).Set(0);
  s->restarts.Add({});
  s->train_tokens.Add({});
  s->queue_wait.Add({}, WaitBuckets());
  s->train_step.Add({}, StepBuckets());
  auto metrics = std::unique_ptr<DaemonMetrics>(new DaemonMetrics(std::move(s)));
  if (!options.address.empty()) {
    DaemonMetrics* m = metrics.get();
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> http =
        MetricsHttpServer::Start(options.address, [m] { return m->Serialize(); });
    if (!http.ok()) return http.status();
    metrics->s_->http = *std::move(http);
  }
  return metrics;
}

DaemonMetrics::DaemonMetrics(std::unique_ptr<State> state) : s_(std::move(state)) {}
DaemonMetrics::~DaemonMetrics() { s_->http.reset(); }  // no scrape during destruction

int DaemonMetrics::port() const { return s_->http ? s_->http->port() : 0; }

std::string DaemonMetrics::Serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, s_->registry->Collect());
  return out.str();
}

void DaemonMetrics::ObserveRpc(const std::string& method, double seconds) {
  s_->rpc.Add({{"method", method}}, RpcBuckets()).Observe(seconds);
}

void DaemonMetrics::JobStarted(const jobs::JobRunInfo& info, double queue_wait_seconds) {
  State& s = *s_;
  s.queue_wait.Add({}, WaitBuckets()).Observe(queue_wait_seconds);
  std::lock_guard<std::mutex> lock(s.mu);
  State::PerJob& j = s.per_job[info.job_id];
  const prometheus::Labels job{{"job", info.job_id}};
  j.step = &s.job_step.Add(job, StepBuckets());
  j.tokens = &s.job_tokens.Add(job);
  j.loss = &s.job_loss.Add(job);
  j.eval_loss = &s.job_eval_loss.Add(job);
  j.eval_loss->Set(std::numeric_limits<double>::quiet_NaN());
  j.mfu = &s.job_mfu.Add(job);
  j.planned = &s.job_planned.Add(job);
  j.measured = &s.job_measured.Add(job);
  j.planned->Set(info.predicted_step_seconds);
  j.current_step = &s.job_current_step.Add(job);
  j.total_steps = &s.job_total_steps.Add(job);
  j.progress = &s.job_progress.Add(job);
  j.tokens_per_second = &s.job_tokens_per_second.Add(job);
  j.loss_scale = &s.job_loss_scale.Add(job);
  j.skipped = &s.job_skipped.Add(job);
  j.gpus = info.run->rank_gpu;
  for (size_t r = 0; r < j.gpus.size(); ++r) {
    const int64_t bytes = r < info.gpu_memory_bytes.size() ? info.gpu_memory_bytes[r] : 0;
    s.gpu_used.Add({{"gpu", s.Gpu(j.gpus[r])}}).Set(static_cast<double>(bytes));
  }
  j.pinned = info.pinned_bytes;
  j.store = info.host_store_bytes;
  s.host_pinned.Add({}).Increment(static_cast<double>(j.pinned));
  s.host_store.Add({}).Increment(static_cast<double>(j.store));
}

void DaemonMetrics::StepCompleted(const jobs::JobRunInfo& info, const runtime::StepReport& step) {
  State& s = *s_;
  s.train_tokens.Add({}).Increment(static_cast<double>(step.tokens));
  s.train_step.Add({}, StepBuckets()).Observe(step.step_seconds);
  for (const runtime::WorkerStepReport& r : step.ranks) {
    if (r.rank < 0 || r.rank >= static_cast<int>(info.run->rank_gpu.size())) continue;
    const std::string gpu = s.Gpu(info.run->rank_gpu[r.rank]);
    s.swap_bytes.Add({{"gpu", gpu}, {"direction", "h2d"}}).Increment(static_cast<double>(r.h2d_bytes));
    s.swap_bytes.Add({{"gpu", gpu}, {"direction", "d2h"}}).Increment(static_cast<double>(r.d2h_bytes));
    s.stall.Add({{"gpu", gpu}}).Increment(r.stall_seconds);
    s.compute.Add({{"gpu", gpu}}).Increment(r.compute_seconds);
  }
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.per_job.find(info.job_id);
  if (it == s.per_job.end()) return;
  State::PerJob& j = it->second;
  j.step->Observe(step.step_seconds);
  j.tokens->Increment(static_cast<double>(step.tokens));
  j.loss->Set(step.loss);
  if (step.eval_loss) j.eval_loss->Set(*step.eval_loss);
  j.measured->Set(step.step_seconds);
  j.current_step->Set(static_cast<double>(step.step));
  if (step.total_steps > 0) {
    j.total_steps->Set(static_cast<double>(step.total_steps));
    j.progress->Set(std::min(1.0, static_cast<double>(step.step) / step.total_steps));
  }
  j.tokens_per_second->Set(step.tokens_per_second);
  j.loss_scale->Set(step.loss_scale);
  if (step.skipped) j.skipped->Increment();
  if (info.peak_flops_per_second > 0 && step.step_seconds > 0) {
    j.mfu->Set(info.flops_per_token * step.tokens / step.step_seconds / info.peak_flops_per_second);
  }
  j.link_seen.resize(step.link_bytes.size());
  for (size_t l = 0; l < step.link_bytes.size() && l < info.run->links.size(); ++l) {
    const std::string& link = info.run->links[l].name;
    const auto [h2d, d2h] = step.link_bytes[l];
    // Cumulative per run; a count that went down (it cannot today) adds nothing.
    const auto delta = [](uint64_t now, uint64_t seen) { return now > seen ? now - seen : 0; };
    s.link_bytes.Add({{"link", link}, {"direction", "h2d"}})
        .Increment(static_cast<double>(delta(h2d, j.link_seen[l].first)));
    s.link_bytes.Add({{"link", link}, {"direction", "d2h"}})
        .Increment(static_cast<double>(delta(d2h, j.link_seen[l].second)));
    j.link_seen[l] = {h2d, d2h};
  }
}

void DaemonMetrics::JobStopped(const jobs::JobRunInfo& info) {
  State& s = *s_;
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.per_job.find(info.job_id);
  if (it == s.per_job.end()) return;
  State::PerJob& j = it->second;
  s.job_step.Remove(j.step);
  s.job_tokens.Remove(j.tokens);
  s.job_loss.Remove(j.loss);
  s.job_eval_loss.Remove(j.eval_loss);
  s.job_mfu.Remove(j.mfu);
  s.job_planned.Remove(j.planned);
  s.job_measured.Remove(j.measured);
  s.job_current_step.Remove(j.current_step);
  s.job_total_steps.Remove(j.total_steps);
  s.job_progress.Remove(j.progress);
  s.job_tokens_per_second.Remove(j.tokens_per_second);
  s.job_loss_scale.Remove(j.loss_scale);
  s.job_skipped.Remove(j.skipped);
  for (int g : j.gpus) s.gpu_used.Add({{"gpu", s.Gpu(g)}}).Set(0);
  s.host_pinned.Add({}).Decrement(static_cast<double>(j.pinned));
  s.host_store.Add({}).Decrement(static_cast<double>(j.store));
  s.per_job.erase(it);
}

void DaemonMetrics::JobCounts(const std::map<jobs::JobState, int>& counts) {
  for (const auto& [state, n] : counts) {
    const char* name = state == jobs::JobState::kQueued ? "queued" : "running";
    if (state == jobs::JobState::kQueued || state == jobs::JobState::kRunning) {
      s_->jobs.Add({{"state", name}}).Set(n);
    }
  }
}

void DaemonMetrics::SubmitRejected(const std::string& reason) {
  s_->rejections.Add({{"reason", reason}}).Increment();
}

void DaemonMetrics::WorkerRestart() { s_->restarts.Add({}).Increment(); }

namespace {
std::string UserLabel(uint32_t uid) {
  if (absl::StatusOr<Identity> who = LookUpIdentity(uid); who.ok()) return who->name;
  return absl::StrCat("uid ", uid);
}
}  // namespace

void DaemonMetrics::UsageAccrued(const jobs::UsageDelta& d) {
  if (d.gpu_seconds <= 0 && d.host_gib_seconds <= 0 && d.tokens <= 0) return;
  const std::string user = d.user.empty() ? UserLabel(d.uid) : d.user;
  State& s = *s_;
  s.user_gpu_seconds.Add({{"user", user}}).Increment(std::max(d.gpu_seconds, 0.0));
  s.user_host_gib_seconds.Add({{"user", user}}).Increment(std::max(d.host_gib_seconds, 0.0));
  s.user_tokens.Add({{"user", user}}).Increment(static_cast<double>(std::max<int64_t>(d.tokens, 0)));
}

void DaemonMetrics::FairShare(const std::map<uint32_t, double>& factors) {
  State& s = *s_;
  std::lock_guard<std::mutex> lock(s.mu);
  // Users without queued or running jobs leave the gauge.
  for (auto it = s.fair_share_users.begin(); it != s.fair_share_users.end();) {
    if (factors.count(it->first)) {
      ++it;
      continue;
    }
    s.user_fair_share.Remove(&s.user_fair_share.Add({{"user", it->second}}));
    it = s.fair_share_users.erase(it);
  }
  for (const auto& [uid, factor] : factors) {
    auto [it, added] = s.fair_share_users.emplace(uid, std::string());
    if (added) it->second = UserLabel(uid);
    s.user_fair_share.Add({{"user", it->second}}).Set(factor);
  }
}

}  // namespace mobius
