#include "server/jobs/service/job_manager_state.h"

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
#include "server/jobs/service/job_dirs.h"
#include "server/jobs/service/job_identity.h"
#include "host/run/job_planning.h"
#include "server/jobs/service/state_dirs.h"
#include "host/run/run_setup.h"
#include "host/launch/dataset_prep.h"
#include "host/launch/cgroup_device_filter.h"
#include "host/launch/job_cgroup.h"
#include "host/launch/launcher.h"
#include "host/planner/profile.h"

namespace mobius::jobs {

namespace internal {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string GpuList(const std::vector<int>& gpus) { return absl::StrJoin(gpus, ","); }

std::string PlanSummaryJson(const planner::PlanReport& r, const runtime::RunConfig& run) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : r.plan.partition.stages) stages.push_back({s.begin, s.end});
  nlohmann::json j = {{"stages", stages},
                      {"gpu_order", r.plan.mapping.gpu_order},
                      {"schedule", runtime::ScheduleName(r.plan.schedule)},
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

void LogIfError(const std::string& id, const absl::Status& st) {
  if (!st.ok()) LOG(ERROR) << "job " << id << ": state change refused: " << st;
}

}  // namespace internal

using internal::GpuList;
using internal::LogIfError;
using internal::NowMs;
using internal::PlanSummaryJson;

namespace {

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
  if (r.eval_loss) row.eval_loss = *r.eval_loss;
  row.loss_scale = r.loss_scale;
  row.skipped = r.skipped;
  return row;
}

}  // namespace

// ---- state helpers ----------------------------------------------------------------------------

void JobManager::State::DaemonLog(const std::string& id, const std::string& text) {
  LOG(INFO) << id << ": " << text;
  Informational(id, "log lines", store->AppendLogs(id, {{0, NowMs(), "daemon", text}}).status());
}
void JobManager::State::Audit(const Caller& c, const std::string& method,
                              const std::string& target, const std::string& detail,
                              const absl::Status& result) {
  AuditEntry e;
  e.unix_ms = NowMs();
  e.uid = c.uid;
  e.method = "JobService." + method;
  e.target = target;
  e.detail = detail;
  e.result = result.code();
  write_log.Record("audit log", "entries", store->AppendAudit(e).status());
}

// ---- supervision --------------------------------------------------------------------------------

launch::DatasetPrepOptions JobManager::State::DatasetOptions(const std::string& id, uid_t uid) {
  launch::DatasetPrepOptions po;
  po.worker_binary = options.worker_binary;
  po.cache_dir = UserDatasetCacheDir(options.state_dir, uid);
  po.threads = options.tokenize_threads > 0
                   ? options.tokenize_threads
                   : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);
  po.on_log = [this, id](const std::string& line) {
    DaemonLog(id, absl::StrCat("tokenizer: ", line));
  };
  po.interrupted = [this, id]() -> absl::Status {
    absl::MutexLock lock(&mu);
    auto it = running.find(id);
    if (it == running.end()) return absl::OkStatus();
    if (it->second.cancel) return absl::CancelledError("cancelled while tokenizing the dataset");
    if (it->second.shutdown || !it->second.preempted_for.empty()) {
      return absl::AbortedError("stopped while tokenizing the dataset");
    }
    return absl::OkStatus();
  };
  return po;
}

namespace {

// The /dev/nvidia<minor> nodes of the run's GPUs (by PCI bus id: the driver's minor is not the
// CUDA index), for the job cgroup's device filter; nullopt (no filter) when the GPUs are emulated
// or any of them is not listed by the driver.
std::optional<std::vector<uint32_t>> GrantedGpuMinors(const JobManagerOptions& options,
                                                      const runtime::RunConfig& run) {
  if (options.emulate_links || options.devices_in_host_memory) return std::nullopt;
  std::vector<uint32_t> minors;
  for (int g : run.rank_gpu) {
    const topology::Gpu& gpu = options.topology.gpus.at(static_cast<size_t>(g));
    if (gpu.pci < 0 || static_cast<size_t>(gpu.pci) >= options.topology.pci.size()) {
      return std::nullopt;
    }
    absl::StatusOr<uint32_t> minor =
        launch::NvidiaDeviceMinor(options.topology.pci[static_cast<size_t>(gpu.pci)].bus_id);
    if (!minor.ok()) {
      LOG(WARNING) << "GPU " << g << ": " << minor.status() << "; no device filter for the job";
      return std::nullopt;
    }
    minors.push_back(*minor);
  }
  return minors;
}

// What the job's metrics and MFU need of its run (job_observer.h).
JobRunInfo RunInfoOf(const std::string& id, const RunSetup& setup,
                     const topology::Topology& topology) {
  const PlannedJob& planned = setup.planned;
  JobRunInfo info;
  info.job_id = id;
  info.run = &setup.run;
  info.predicted_step_seconds = planned.report.plan.predicted_step_seconds;
  info.gpu_memory_bytes = planned.report.plan.memory.gpu_bytes;
  info.pinned_bytes = planned.report.plan.memory.pinned_bytes;
  // Model FLOPs per token as MFU counts them (PaLM's 6N convention: no recompute, no attention).
  info.flops_per_token = 6.0 * static_cast<double>(planned.report.parameters);
  for (int g : setup.run.rank_gpu) {
    std::optional<planner::DeviceSpec> d = planner::DeviceSpecForGpuName(
        topology.gpus[g].name, topology.gpus[g].memory_bytes);
    if (d) info.peak_flops_per_second += d->peak_flops_per_s;
  }
  info.host_store_bytes = setup.host_store_bytes;
  return info;
}

// The job log's line as the run starts: stages, GPUs, mapping, prediction, emulation.
std::string StartLine(const RunSetup& setup, const std::vector<int>& gpus) {
  const runtime::RunConfig& run = setup.run;
  const planner::PlanReport& report = setup.planned.report;
  const int asked = setup.spec.resources.gpus;
  return absl::StrCat(
      setup.resume_from.empty() ? "starting: "
                                : absl::StrCat("resuming from ", setup.resume_from, "; "),
      run.stages.size(), " stages on ", run.num_workers, " GPU(s) ", GpuList(gpus),
      asked > static_cast<int>(gpus.size())
          ? absl::StrCat(" (re-planned: the job asks for ", asked, ", this node has ", gpus.size(),
                         " usable)")
          : "",
      ", ", report.plan.mapper, " mapping, predicted ", report.plan.predicted_step_seconds,
      " s/step on ", report.device,
      run.links.empty()
          ? ""
          : absl::StrCat("; running on the CPU backend with emulated PCIe links x", run.link_scale,
                         " (mobius plan --emulated-gpus --link-scale predicts that)"));
}

std::string LinkTrafficLine(const std::vector<runtime::LinkTraffic>& links) {
  std::vector<std::string> parts;
  for (const runtime::LinkTraffic& l : links) {
    parts.push_back(absl::StrCat(l.name, " ", l.h2d_bytes, "/", l.d2h_bytes));
  }
  return absl::StrCat("bytes per emulated link (h2d/d2h): ", absl::StrJoin(parts, ", "));
}

}  // namespace

absl::StatusOr<JobManager::State::PreparedRun> JobManager::State::PrepareRun(
    const std::string& id, const JobRecord& job, const std::vector<int>& gpus) {
  MOBIUS_ASSIGN_OR_RETURN(jobspec::JobSpec spec, jobspec::JobSpecFromJson(job.spec_json));
  // The job's processes and file checks run as its user (job_identity.h); its default checkpoint
  // directory and dataset cache are in that user's directory of the state (state_dirs.h).
  PreparedRun p;
  MOBIUS_ASSIGN_OR_RETURN(p.identity, JobIdentity(options, job.uid));
  MOBIUS_RETURN_IF_ERROR(
      EnsureUserStateDir(options.state_dir, job.uid, JobFilesOwner(p.identity)));
  if (jobspec::IsTextFormat(spec.dataset.format)) {
    DaemonLog(id, absl::StrCat("preparing the ", spec.dataset.format,
                               " dataset with the tokenizer in ", spec.dataset.tokenizer));
  }
  RunSetupOptions so;
  so.topology = &options.topology;
  so.facts = &options.facts;
  so.allowed = options.node.allowed_gpus;
  so.gpus = gpus;
  so.plan = PlanOptionsOf(options);
  so.run_name = id;
  so.default_checkpoint_dir = JobCheckpointDir(options, job, spec);
  so.resume = true;  // a requeued or restarted job continues from its newest checkpoint
  so.emulation = {.enabled = options.emulate_links, .link_scale = options.link_scale};
  so.dataset = DatasetOptions(id, job.uid);
  so.dataset.identity = p.identity;
  so.inspect = [this, uid = job.uid](const inspect::InspectRequest& r) {
    return InspectAs(options, uid, r);
  };
  MOBIUS_ASSIGN_OR_RETURN(p.setup, SetUpRun(std::move(spec), so));
  if (p.setup.dataset.has_value()) {
    DaemonLog(id, p.setup.dataset->reused
                      ? absl::StrCat("dataset: reusing the token file ", p.setup.dataset->token_file)
                      : absl::StrCat("dataset: tokenized ",
                                     data::FormatTokenizeSummary(p.setup.dataset->token_file,
                                                                 p.setup.dataset->summary)));
  }
  const int64_t steps = p.setup.run.training.steps;
  if (job.total_steps == 0 && steps > 0) {  // epochs over a tokenized dataset
    Informational(id, "total step counts", store->SetTotalSteps(id, steps));
  }
  Informational(id, "run plans",
                store->UpdateRunInfo(id, gpus, PlanSummaryJson(p.setup.planned.report, p.setup.run)));
  return p;
}

absl::StatusOr<std::unique_ptr<launch::JobCgroup>> JobManager::State::MakeJobCgroup(
    const std::string& id, const RunSetup& setup) {
  if (options.cgroups == nullptr) return nullptr;
  launch::JobLimits limits = launch::JobLimitsFor(
      options.cgroups->support(), setup.planned.report.plan.memory.host_bytes,
      setup.run.num_workers, GrantedGpuMinors(options, setup.run));
  MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<launch::JobCgroup> cgroup,
                          options.cgroups->CreateJob(id, limits));
  DaemonLog(id, absl::StrCat("cgroup ", cgroup->path(), ": memory.max ",
                             limits.memory_max_bytes >> 20, " MiB"));
  return cgroup;
}

runtime::LaunchOptions JobManager::State::LaunchOptionsOf(const JobRecord& job,
                                                          const PreparedRun& prepared) {
  const RunSetup& setup = prepared.setup;
  runtime::LaunchOptions lo;
  lo.run = setup.run;
  lo.worker_binary = options.worker_binary;
  lo.run_dir = absl::StrCat(JobDir(options, job), "/run-", job.restarts);
  lo.identity = prepared.identity;
  lo.model_config = setup.model_config;
  lo.validated = setup.validated;
  lo.kill_grace = options.kill_grace;
  lo.heartbeat_timeout = options.heartbeat_timeout;
  lo.step_timeout = options.step_timeout;
  lo.host_bytes_needed = setup.planned.report.plan.memory.host_bytes;
  lo.host_memory_wait = absl::Seconds(120);  // e.g. the previous run's workers still exiting
  return lo;
}

absl::StatusOr<runtime::LaunchResult> JobManager::State::RunLauncher(
    const std::string& id, const runtime::LaunchOptions& lo) {
  MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Launcher> launcher,
                          runtime::Launcher::Start(lo));
  std::shared_ptr<runtime::Launcher> shared = std::move(launcher);
  {
    absl::MutexLock lock(&mu);
    Running& r = running[id];
    r.launcher = shared;
    if (r.cancel) shared->Cancel();
    if (r.shutdown) {
      shared->RequestCheckpointAndStop(options.checkpoint_grace);
    } else if (!r.preempted_for.empty()) {
      shared->RequestCheckpointAndStop(options.preemption_grace);
    }
  }
  return shared->Wait();
}

void JobManager::State::Supervise(std::string id, std::vector<int> gpus) {
  auto fail = [&](const absl::Status& s) { Finish(id, s, 0); };
  absl::StatusOr<JobRecord> job;
  {
    absl::MutexLock lock(&mu);
    job = GetJob(id);  // its restarts as the daemon counts them
  }
  if (!job.ok()) return fail(job.status());
  absl::StatusOr<PreparedRun> prepared = PrepareRun(id, *job, gpus);
  if (!prepared.ok()) return fail(prepared.status());
  UsageGroupOf(id, job->uid, prepared->identity);
  const RunSetup& setup = prepared->setup;
  const JobRunInfo info = RunInfoOf(id, setup, options.topology);
  DaemonLog(id, StartLine(setup, gpus));
  runtime::LaunchOptions lo = LaunchOptionsOf(*job, *prepared);
  absl::StatusOr<std::unique_ptr<launch::JobCgroup>> cgroup = MakeJobCgroup(id, setup);
  if (!cgroup.ok()) return fail(cgroup.status());
  if (*cgroup != nullptr) lo.cgroup_procs_fd = (*cgroup)->procs_fd();
  int64_t last_step = 0;
  lo.on_step = [&](const runtime::StepReport& r) {
    Informational(id, "step reports", store->AppendStepReport(id, ToRow(r)));
    int64_t memory_bytes = -1;  // the job cgroup's, for the accounting's measured figure
    if (*cgroup != nullptr) {
      if (absl::StatusOr<launch::JobCgroupStats> st = (*cgroup)->Stats(); st.ok()) {
        memory_bytes = st->memory_current_bytes;
      }
    }
    if (options.observer != nullptr) options.observer->StepCompleted(info, r);
    last_step = r.step;
    if (r.eval_loss) DaemonLog(id, absl::StrCat("step ", r.step, ": eval loss ", *r.eval_loss));
    if (!r.checkpoint.empty()) {
      Informational(id, "checkpoint records",
                    store->SetCheckpoint(id, r.checkpoint, r.checkpoint_step));
      DaemonLog(id, absl::StrCat("checkpoint ", r.checkpoint));
    }
    absl::MutexLock lock(&mu);
    StepUsage(id, r.tokens, memory_bytes);
    Bump();
  };
  lo.on_log = [&](int rank, const std::string& line) {
    Informational(
        id, "log lines",
        store->AppendLogs(id, {{0, NowMs(), absl::StrCat("worker-", rank), line}}).status());
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
  absl::StatusOr<runtime::LaunchResult> result = RunLauncher(id, lo);
  if (!result.ok()) {
    if (options.observer != nullptr) options.observer->JobStopped(info);
    return fail(result.status());
  }
  if (*cgroup != nullptr) {
    // A worker killed by the job's own memory limit: say so instead of a bare SIGKILL.
    if (absl::StatusOr<launch::JobCgroupStats> st = (*cgroup)->Stats();
        st.ok() && st->oom_killed()) {
      result->status = absl::ResourceExhaustedError(
          absl::StrCat(launch::DescribeOomKill(*st), "; ", result->status.message()));
    }
    cgroup->reset();  // kills what is left, removes the cgroup
  }
  if (!result->links.empty()) DaemonLog(id, LinkTrafficLine(result->links));
  if (options.observer != nullptr) options.observer->JobStopped(info);
  Finish(id, result->status, last_step);
}

void JobManager::State::Finish(const std::string& id, const absl::Status& status, int64_t steps) {
  absl::MutexLock lock(&mu);
  auto it = running.find(id);
  if (it == running.end()) return;
  Running& r = it->second;
  absl::StatusOr<JobRecord> job = GetJob(id);
  const bool stopped = absl::IsAborted(status);  // checkpointed and stopped on request
  // Each change is the daemon's from here on, written or kept pending (Transition): the job gives
  // back its GPUs below either way and is never started again unless requeued.
  absl::Status st;
  if (status.ok() && !r.cancel) {
    st = Transition(id, JobState::kSucceeded, absl::StrCat("all ", steps, " steps done"));
  } else if (r.shutdown) {
    st = Transition(id, JobState::kQueued,
                    stopped ? "the daemon stopped; checkpointed, resumes from there"
                            : "the daemon stopped; resumes from its last checkpoint");
  } else if (!r.preempted_for.empty() && !r.cancel && stopped) {
    st = Transition(
        id, JobState::kQueued,
        absl::StrCat("preempted by ", r.preempted_for, "; resumes from its checkpoint"));
  } else if (r.cancel) {
    st = Transition(id, JobState::kCancelled, absl::StrCat("cancelled by ", r.cancelled_by));
  } else if (status.ok()) {
    st = Transition(id, JobState::kSucceeded, absl::StrCat("all ", steps, " steps done"));
  } else {
    absl::StatusOr<jobspec::JobSpec> spec =
        job.ok() ? jobspec::JobSpecFromJson(job->spec_json) : job.status();
    const int max_restarts = spec.ok() ? spec->max_restarts : 0;
    if (Retryable(status) && job.ok() && job->restarts < max_restarts) {
      if (options.observer != nullptr) options.observer->WorkerRestart();
      st = Transition(id, JobState::kQueued,
                      absl::StrCat("restart ", job->restarts + 1, " of ", max_restarts,
                                   " after: ", status.message()),
                      /*count_restart=*/true);
    } else {
      st = Transition(id, JobState::kFailed, std::string(status.message()));
    }
  }
  LogIfError(id, st);
  EndUsage(id);  // its GPUs are free: the workers are gone
  finished.push_back(std::move(r.thread));
  running.erase(it);
  Reschedule();
  Bump();
}

}  // namespace mobius::jobs
