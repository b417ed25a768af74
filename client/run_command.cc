#include "client/run_command.h"

#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/exit_codes.h"
#include "client/node_run.h"
#include "client/node_world.h"
#include "common/run/rendezvous.h"
#include "common/host_memory.h"
#include "common/jobspec/yaml.h"
#include "common/status_macros.h"
#include "host/scheduler/node_resources.h"
#include "host/scheduler/scheduler.h"
#include "host/run/job_planning.h"
#include "host/run/run_setup.h"
#include "host/topology/analysis.h"
#include "host/topology/hwloc_source.h"
#include "common/device/device_probe.h"
#include "host/launch/launcher.h"

namespace mobius::cli {
namespace {

std::atomic<runtime::Launcher*> g_launcher{nullptr};
std::atomic<bool> g_stop{false};
void OnStop(int) { g_stop = true; }

// Tokenized datasets are reused across runs: $XDG_CACHE_HOME/mobius/datasets, else
// ~/.cache/mobius/datasets, else the run directory.
std::string DatasetCacheDir(const std::string& run_dir) {
  if (const char* xdg = getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return absl::StrCat(xdg, "/mobius/datasets");
  }
  if (const char* home = getenv("HOME"); home != nullptr && home[0] == '/') {
    return absl::StrCat(home, "/.cache/mobius/datasets");
  }
  return run_dir + "/datasets";
}

int Fail(std::ostream& err, const absl::Status& s) {
  err << "mobius run: " << s.message() << "\n";
  return ExitCodeFor(s);
}

std::string RendezvousAddress(const NodeWorld& world) {
  const bool v6 = world.rendezvous_host.find(':') != std::string::npos;
  return absl::StrCat(v6 ? "[" : "", world.rendezvous_host, v6 ? "]" : "", ":",
                      world.rendezvous_port);
}

// Several nodes (docs/multinode.md): the spec's global batch is split; this node is planned and
// run on its share (the run config gets the global batch back with the node group).
absl::Status TakeNodeShare(const NodeWorld& world, jobspec::JobSpec& spec, std::ostream& err) {
  const int64_t global_batch = spec.training.global_batch;
  // "microbatch 0 = the whole batch" of this node: its share of the global batch.
  jobspec::TrainingSpec share = spec.training;
  share.global_batch = global_batch / world.nodes;
  const int64_t mb = share.EffectiveMicrobatch();
  if (mb <= 0 || global_batch % (mb * world.nodes) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "training.global_batch %d does not split into %d nodes of whole microbatches of %d: make "
        "it a multiple of %d",
        global_batch, world.nodes, mb, mb * world.nodes));
  }
  spec.training.global_batch = global_batch / world.nodes;
  spec.training.microbatch = mb;
  const int64_t per_node = global_batch / mb / world.nodes;
  err << absl::StrFormat(
      "mobius run: node %d runs microbatches %d..%d of each global batch's %d (%d sequences "
      "each); node 0 writes the checkpoints\n",
      world.node_rank, world.node_rank * per_node, (world.node_rank + 1) * per_node - 1,
      per_node * world.nodes, mb);
  return absl::OkStatus();
}

// This machine: its topology, the GPUs the run may use, where the workers will run (the CPU
// backend makes the GPUs' memory host memory, and the plan's host estimate must fit what this
// machine has), and the plan options that follow.
struct Node {
  topology::LoadedTopology loaded;
  topology::TopologyFacts facts;
  std::vector<int> allowed;
  bool emulate = false;
  HostMemory machine;
  jobs::PlanJobOptions plan;
};

absl::StatusOr<Node> LoadNode(const RunCommandOptions& o, const NodeWorld& world) {
  Node n;
  std::unique_ptr<topology::TopologySource> source =
      o.topology_file.empty() ? topology::MakeHwlocLiveSource()
                              : topology::MakeHwlocXmlFileSource(o.topology_file);
  MOBIUS_ASSIGN_OR_RETURN(n.loaded, source->Load());
  n.facts = topology::Analyze(n.loaded.topology);
  const std::vector<jobs::GpuResource> gpus = jobs::GpuResourcesFromTopology(n.loaded.topology, n.facts);
  if (o.gpus.empty()) {
    for (const auto& g : gpus) n.allowed.push_back(g.index);
  } else {
    MOBIUS_ASSIGN_OR_RETURN(n.allowed, jobs::ParseGpuAllowList(o.gpus, gpus));
  }
  const DeviceProbe probe = ProbeDevices();
  n.emulate = o.emulate_links == "on" || (o.emulate_links == "auto" && probe.cuda_devices.empty());
  n.plan.devices_in_host_memory = n.emulate || probe.cuda_devices.empty() || o.backend == "cpu";
  MOBIUS_ASSIGN_OR_RETURN(n.machine, ReadHostMemory());
  int64_t numa = 0;
  for (const auto& m : n.loaded.topology.numa_nodes) numa += static_cast<int64_t>(m.memory_bytes);
  n.plan.host_memory_bytes =
      numa > 0 ? std::min(numa, n.machine.available_bytes()) : n.machine.available_bytes();
  if (world.nodes > 1) {  // the plan of one node of N, each stage's all-reduce simulated
    n.plan.internode.nodes = world.nodes;
    n.plan.internode.link.bytes_per_s = o.internode_gbps * 1e9 / 8;
    n.plan.internode.link.latency_seconds = o.internode_latency_us * 1e-6;
    // The runtime reduces a stage's buckets after its whole offload: one bucket in the simulation.
    n.plan.internode.bucket_bytes = 0;
  }
  return n;
}

// The GPUs the run gets: the daemon's topology-aware choice (spread over uplinks for a
// cross-mapped pipeline) for what the job asks, planned on the default GPUs first.
absl::StatusOr<std::vector<int>> ChooseGpus(const RunCommandOptions& o, const Node& n,
                                            const jobspec::JobSpec& spec) {
  absl::StatusOr<jobs::PlannedJob> planned =
      jobs::PlanJob(spec, n.loaded.topology, n.facts, n.allowed, {}, n.plan);
  if (!planned.ok() && absl::IsFailedPrecondition(planned.status()) &&
      planned.status().message().find("host RAM") != absl::string_view::npos) {
    return absl::FailedPreconditionError(absl::StrCat(
        planned.status().message(), " [this machine: ", n.machine.Describe(), "]"));
  }
  if (!planned.ok()) return planned.status();
  jobs::NodeConfig nc;
  if (!o.gpus.empty()) nc.gpu_allow_list = o.gpus;
  nc.host_bytes = nc.pinned_bytes = std::numeric_limits<int64_t>::max() / 4;
  MOBIUS_ASSIGN_OR_RETURN(jobs::NodeResources node,
                          jobs::MakeNodeResources(n.loaded.topology, n.facts, nc));
  jobs::JobRequest request = planned->request;
  request.job_id = "j-000001";
  request.host_bytes = request.pinned_bytes = 0;
  absl::StatusOr<jobs::ScheduleResult> chosen = jobs::Scheduler().Schedule(node, {}, {request}, {});
  std::vector<int> granted = planned->report.plan.mapping.gpu_order;  // PlanJob's default GPUs
  std::sort(granted.begin(), granted.end());
  if (chosen.ok() && chosen->start.size() == 1) granted = chosen->start[0].gpus;
  return granted;
}

// What this process's run differs in from the daemon's (its PrepareRun): the name, the run
// directory, the terminal for the tokenizer's lines, Ctrl-C, and no identity switch (the user runs
// it). The rest of the route is SetUpRun's.
jobs::RunSetupOptions SetupOptionsOf(const RunCommandOptions& o, const Node& node,
                                     const std::vector<int>& granted, const std::string& name,
                                     const std::string& run_dir, const std::string& worker_binary,
                                     std::ostream& err) {
  jobs::RunSetupOptions so;
  so.topology = &node.loaded.topology;
  so.facts = &node.facts;
  so.allowed = node.allowed;
  so.gpus = granted;
  so.plan = node.plan;
  so.run_name = name;
  so.default_checkpoint_dir = run_dir + "/checkpoints";
  so.resume = o.resume;
  so.emulation = {.enabled = node.emulate, .link_scale = o.link_scale};
  so.backend = o.backend;  // validated with the rest of the run config by the launcher
  so.transport = o.transport;
  so.dataset.worker_binary = worker_binary;
  so.dataset.cache_dir = DatasetCacheDir(run_dir);
  so.dataset.on_log = [&err](const std::string& line) {
    err << "tokenizer | " << line << "\n";
  };
  so.dataset.interrupted = [] {
    return g_stop ? absl::CancelledError("interrupted while tokenizing the dataset")
                  : absl::OkStatus();
  };
  return so;
}

// What the tokenizer (a text dataset) and the resume found, on the terminal.
void ReportSetup(const RunCommandOptions& o, const jobs::RunSetup& setup, std::ostream& err) {
  if (setup.dataset.has_value()) {
    err << "mobius run: "
        << (setup.dataset->reused
                ? "reusing " + setup.dataset->token_file
                : "tokenized " + data::FormatTokenizeSummary(setup.dataset->token_file,
                                                             setup.dataset->summary))
        << "\n";
  }
  if (o.resume) {
    err << "mobius run: "
        << (!setup.resume_from.empty()
                ? "resuming from " + setup.resume_from
                : "no complete checkpoint in " + setup.run.training.checkpoint_dir +
                      "; starting afresh")
        << "\n";
  }
}

// Several nodes: this node's place in the group, in the run config.
void JoinNodeGroup(const RunCommandOptions& o, const NodeWorld& world, const Node& n,
                   int64_t global_batch, const std::string& name, runtime::RunConfig& run) {
  runtime::NodeGroup& g = run.nodes;
  run.training.batch = global_batch;  // every node reads the global batch (its share)
  g.count = world.nodes;
  g.rank = world.node_rank;
  g.rendezvous = RendezvousAddress(world);
  g.job_key = world.job_key.empty() ? "mobius-" + name : world.job_key;
  g.timeout_seconds = o.node_timeout_seconds;
  if (o.allreduce_bucket_mib > 0) {
    g.bucket_bytes = static_cast<int64_t>(o.allreduce_bucket_mib * (1 << 20));
  }
  if (n.emulate) {  // the inter-node link emulated like the PCIe links, at the same scale
    g.link_bytes_per_second = o.internode_gbps * 1e9 / 8 * o.link_scale;
    g.link_latency_seconds = o.internode_latency_us * 1e-6 / o.link_scale;
  }
}

// The step reports: one line each on stdout (and the checkpoints), one JSON line each in the
// report file when there is one; the first and last loss for the summary.
class StepPrinter {
 public:
  explicit StepPrinter(std::ostream& out) : out_(out) {}
  absl::Status OpenReportFile(const std::string& path) {
    if (path.empty()) return absl::OkStatus();
    file_.open(path, std::ios::app);
    if (!file_) {
      return absl::InvalidArgumentError(
          absl::StrCat("--report-file ", path, ": cannot open for writing"));
    }
    return absl::OkStatus();
  }
  void Print(const runtime::StepReport& r) {
    if (std::isnan(first_loss)) first_loss = r.loss;
    last_loss = r.loss;
    if (file_.is_open()) {
      file_ << absl::StrFormat(
                   "{\"step\": %d, \"loss\": %.9g, \"grad_norm\": %.9g, \"lr\": %.9g, "
                   "\"step_seconds\": %.6f, \"tokens\": %d, \"h2d_bytes\": %d, "
                   "\"d2h_bytes\": %d, \"internode_bytes\": %d, \"loss_scale\": %g, "
                   "\"skipped\": %s%s}",
                   r.step, r.loss, r.grad_norm, r.lr, r.step_seconds, r.tokens, r.h2d_bytes,
                   r.d2h_bytes, r.internode_bytes, r.loss_scale, r.skipped ? "true" : "false",
                   r.eval_loss ? absl::StrFormat(", \"eval_loss\": %.9g", *r.eval_loss) : "")
            << "\n"
            << std::flush;
    }
    out_ << runtime::FormatStepReport(r) << "\n" << std::flush;
    if (!r.checkpoint.empty()) out_ << "checkpoint " << r.checkpoint << "\n" << std::flush;
  }
  double first_loss = NAN, last_loss = NAN;

 private:
  std::ostream& out_;
  std::ofstream file_;
};

// The plan and its host memory, as the run starts.
void PrintPlanLines(const RunCommandOptions& o, const Node& n, const runtime::RunConfig& run,
                    const planner::PlanReport& report, const std::string& run_dir,
                    std::ostream& err) {
  err << absl::StrFormat(
      "mobius run: %d stages on %d GPU(s) (%s mapping), predicted %.3f s/step%s; run directory %s\n",
      run.stages.size(), run.num_workers, report.plan.mapper, report.plan.predicted_step_seconds,
      n.emulate ? absl::StrCat(", CPU backend with emulated PCIe links x", o.link_scale) : "",
      run_dir);
  const planner::MemoryEstimate& m = report.plan.memory;
  const double gib = double(1 << 30);
  err << absl::StrFormat(
      "mobius run: host memory estimate %.2f GiB (store %.2f GiB, worker processes %.2f GiB%s) "
      "of %s\n",
      m.host_bytes / gib,
      (m.host_model_state_bytes + m.host_activation_bytes + m.host_activation_grad_bytes) / gib,
      m.host_process_bytes / gib,
      m.host_emulated_device_bytes > 0
          ? absl::StrFormat(", emulated GPUs %.2f GiB", m.host_emulated_device_bytes / gib)
          : "",
      n.machine.Describe());
}

// Runs the launched workers to the end: stops them on SIGINT/SIGTERM or when another node fails
// (several nodes: node 0 hosts the rendezvous), then reports. Returns the exit code.
int RunWorkers(const RunCommandOptions& o, const NodeWorld& world, const runtime::LaunchOptions& lo,
               const StepPrinter& steps, std::ostream& out, std::ostream& err) {
  std::unique_ptr<NodeRun> node_run;
  std::atomic<bool> peer_failed{false};
  std::mutex peer_mu;
  std::string peer_failure;  // guarded by peer_mu
  if (world.nodes > 1) {
    const char* token = getenv(runtime::kRendezvousTokenVariable);
    absl::StatusOr<std::unique_ptr<NodeRun>> started = NodeRun::Start(
        {.nodes = world.nodes, .node_rank = world.node_rank,
         .rendezvous_host = world.rendezvous_host, .rendezvous_port = world.rendezvous_port,
         .job_key = lo.run.nodes.job_key,
         .token = token != nullptr ? token : "",
         .timeout = absl::Seconds(o.node_timeout_seconds)},
        [&](const std::string& why) {
          std::lock_guard<std::mutex> lock(peer_mu);
          peer_failure = why;
          peer_failed = true;
        });
    if (!started.ok()) return Fail(err, started.status());
    node_run = *std::move(started);
  }
  absl::StatusOr<std::unique_ptr<runtime::Launcher>> launcher = runtime::Launcher::Start(lo);
  if (!launcher.ok()) {
    if (node_run) node_run->Finish(launcher.status());
    return Fail(err, launcher.status());
  }
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done) {
      if (g_stop || peer_failed) {
        (*launcher)->Cancel();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  runtime::LaunchResult result = (*launcher)->Wait();
  done = true;
  watcher.join();
  if (node_run) {
    const std::string silent = node_run->Finish(result.status);
    if (!silent.empty()) err << "mobius run: " << silent << "\n";
    std::lock_guard<std::mutex> lock(peer_mu);
    if (peer_failed && !result.status.ok()) {
      err << "mobius run: node " << world.node_rank << " stopped: " << peer_failure << "\n";
      return kExitJobFailed;
    }
  }
  if (!result.links.empty()) {
    out << "bytes per emulated link (h2d/d2h):";
    for (const auto& l : result.links) out << " " << l.name << " " << l.h2d_bytes << "/" << l.d2h_bytes;
    out << "\n";
  }
  if (!result.status.ok()) {
    err << "mobius run: " << result.status.message() << "\n";
    return result.cancelled ? kExitJobFailed
                            : (absl::IsInvalidArgument(result.status) ||
                                       absl::IsResourceExhausted(result.status)
                                   ? kExitUsage
                                   : kExitJobFailed);
  }
  out << absl::StrFormat("done: %d steps, loss %.4f -> %.4f\n", result.steps.size(),
                         steps.first_loss, steps.last_loss);
  return kExitOk;
}

}  // namespace

int RunRunCommand(const RunCommandOptions& o, std::ostream& out, std::ostream& err) {
  jobspec::YamlOptions yo;
  yo.validate_options.check_files_exist = true;
  absl::StatusOr<jobspec::JobSpec> spec = jobspec::ParseJobSpecFile(o.spec_path, yo);
  if (!spec.ok()) return Fail(err, spec.status());
  // Which node of the job this is (flags > MOBIUS_* > Slurm > Kubernetes > one node).
  absl::StatusOr<NodeWorld> resolved = ResolveNodeWorld(
      {.nodes = o.nodes, .node_rank = o.node_rank, .rendezvous = o.rendezvous},
      ProcessEnvironment());
  if (!resolved.ok()) return Fail(err, resolved.status());
  const NodeWorld world = *std::move(resolved);
  const int64_t global_batch = spec->training.global_batch;
  if (world.nodes > 1) {
    err << "mobius run: node " << world.node_rank << " of " << world.nodes << " (from "
        << world.source << "), rendezvous " << RendezvousAddress(world) << "\n";
    if (absl::Status s = TakeNodeShare(world, *spec, err); !s.ok()) return Fail(err, s);
  }
  absl::StatusOr<Node> node = LoadNode(o, world);
  if (!node.ok()) return Fail(err, node.status());
  absl::StatusOr<std::vector<int>> granted = ChooseGpus(o, *node, *spec);
  if (!granted.ok()) return Fail(err, granted.status());

  const std::string name = spec->name.empty() ? "job" : spec->name;
  std::error_code ec;
  const std::string run_dir = std::filesystem::absolute(
      o.run_dir.empty() ? "mobius-run-" + name : o.run_dir, ec).string();
  std::string worker_binary = o.worker_binary;
  if (worker_binary.empty()) {
    worker_binary =
        (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "mobius-worker")
            .string();
  }
  // SIGINT / SIGTERM (Slurm's scancel and time limit): stop the tokenizer or the workers.
  struct sigaction sa {};
  sa.sa_handler = OnStop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const jobs::RunSetupOptions so =
      SetupOptionsOf(o, *node, *granted, name, run_dir, worker_binary, err);
  if (jobspec::IsTextFormat(spec->dataset.format)) {
    err << "mobius run: preparing the " << spec->dataset.format << " dataset (cache "
        << so.dataset.cache_dir << ")\n";
  }
  absl::StatusOr<jobs::RunSetup> setup = jobs::SetUpRun(*spec, so);
  if (!setup.ok()) return Fail(err, setup.status());
  ReportSetup(o, *setup, err);
  if (world.nodes > 1) JoinNodeGroup(o, world, *node, global_batch, name, setup->run);

  runtime::LaunchOptions lo;
  lo.run = setup->run;
  lo.run_dir = run_dir;
  lo.worker_binary = worker_binary;
  lo.host_bytes_needed = setup->planned.report.plan.memory.host_bytes;
  StepPrinter steps(out);
  if (absl::Status s = steps.OpenReportFile(o.report_file); !s.ok()) return Fail(err, s);
  lo.on_step = [&](const runtime::StepReport& r) { steps.Print(r); };
  // Every worker line goes to the run directory's log; errors to the terminal too.
  std::filesystem::create_directories(run_dir, ec);
  std::ofstream worker_log(run_dir + "/workers.log", std::ios::app);
  lo.on_log = [&](int rank, const std::string& line) {
    worker_log << "worker-" << rank << " | " << line << "\n";
    if (line.find("error") != std::string::npos || line.rfind("E", 0) == 0) {
      err << "worker-" << rank << " | " << line << "\n";
    }
  };
  PrintPlanLines(o, *node, lo.run, setup->planned.report, run_dir, err);
  return RunWorkers(o, world, lo, steps, out, err);
}

}  // namespace mobius::cli
