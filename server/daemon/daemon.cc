#include "server/daemon/daemon.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/device/device_probe.h"
#include "common/errors.h"
#include "common/host_memory.h"
#include "common/os/identity.h"
#include "common/rpc/jobspec_convert.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "server/daemon/socket_claim.h"
#include "host/scheduler/node_resources.h"
#include "server/jobs/service/job_identity.h"
#include "server/jobs/service/job_manager.h"
#include "host/launch/job_cgroup.h"
#include "server/metrics/daemon_metrics.h"
#include "server/rpc/caller_resolver.h"
#include "server/rpc/job_service.h"
#include "server/rpc/node_service.h"
#include "server/rpc/peer_listener.h"
#include "server/rpc/tcp_auth.h"
#include "host/topology/analysis.h"
#include "host/topology/hwloc_source.h"

namespace mobius {
namespace {

class DaemonImpl : public Daemon {
 public:
  absl::Status Start(const DaemonOptions& options) {
    // First, so that a TCP misconfiguration is reported before anything is claimed or started.
    MOBIUS_RETURN_IF_ERROR(SetUpTcp(options));
    MOBIUS_RETURN_IF_ERROR(LoadTopology(options));
    MetricsOptions mo;
    mo.address = options.metrics_address;
    mo.version = MOBIUS_VERSION;
    for (const auto& g : snapshot_.topology.gpus) {
      mo.gpu_memory_capacity_bytes.push_back(static_cast<int64_t>(g.memory_bytes));
    }
    MOBIUS_ASSIGN_OR_RETURN(metrics_, DaemonMetrics::Create(mo));
    if (!mo.address.empty()) {
      LOG(INFO) << "Prometheus metrics on http://" << mo.address << "/metrics (port "
                << metrics_->port() << ")";
    }

    LogDevices();
    MOBIUS_ASSIGN_OR_RETURN(claim_, SocketClaim::Acquire(options.socket_path));

    MOBIUS_RETURN_IF_ERROR(StartJobs(options));

    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    node_service_ = std::make_unique<NodeServiceImpl>(&snapshot_);
    node_service_->SetStatusProvider([this] { return NodeStatusProto(); });
    node_service_->SetPlanProvider(
        [this](grpc::ServerContext* context,
               const v1::PlanRequest& request) -> absl::StatusOr<v1::PlanResponse> {
          MOBIUS_ASSIGN_OR_RETURN(jobs::Caller caller, callers_->Resolve(*context));
          MOBIUS_ASSIGN_OR_RETURN(auto plan, jobs_->Plan(caller, JobSpecFromProto(request.spec())));
          v1::PlanResponse r;
          r.set_plan_json(plan.first);
          r.set_text(plan.second);
          return r;
        });
    // The socket is ours, not gRPC's: each accepted connection's SO_PEERCRED identifies the
    // caller (peer_listener.h). Created with no access for others; SetMode() opens it up.
    MOBIUS_ASSIGN_OR_RETURN(listener_, PeerListener::Listen(options.socket_path));
    callers_ = std::make_unique<CallerResolver>(
        listener_.get(), tcp_auth_.get(), AccessConfig{options.admin_uids, options.admin_gid});
    RpcObserver on_rpc = [this](const std::string& method, double seconds) {
      metrics_->ObserveRpc(method, seconds);
    };
    job_service_ = std::make_unique<JobServiceImpl>(jobs_.get(), callers_.get(), on_rpc);
    admin_service_ = std::make_unique<AdminServiceImpl>(jobs_.get(), callers_.get(), on_rpc);
    grpc::ServerBuilder builder;
    builder.RegisterService(node_service_.get());
    builder.RegisterService(job_service_.get());
    builder.RegisterService(admin_service_.get());
    int tcp_port = 0;
    if (tcp_auth_ != nullptr) {
      // TLS only: there is no insecure TCP port, and every call passes the authenticator.
      builder.AddListeningPort(options.listen_tcp, TcpAuthenticator::ServerCredentials(tcp_auth_),
                               &tcp_port);
    }
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || (tcp_auth_ != nullptr && tcp_port == 0)) {
      if (tcp_auth_ != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--listen_tcp ", options.listen_tcp,
            ": cannot listen there (address in use, or not an address of this host?)"));
      }
      return absl::UnavailableError("gRPC server failed to start");
    }
    listener_->Start(server_.get());
    if (options.socket_gid != static_cast<gid_t>(-1) &&
        chown(options.socket_path.c_str(), static_cast<uid_t>(-1), options.socket_gid) != 0) {
      return MOBIUS_ERRNO_ERROR(absl::StrCat("chgrp ", options.socket_path));
    }
    MOBIUS_RETURN_IF_ERROR(claim_->SetMode(options.socket_mode));
    LOG(INFO) << "serving gRPC (NodeService, JobService, AdminService, grpc.health.v1, "
                 "reflection) on unix:"
              << options.socket_path;
    if (tcp_auth_ != nullptr) {
      // Tests and scripts parse this line for the port (--listen_tcp=HOST:0 picks one).
      LOG(INFO) << "serving gRPC over TLS on tcp:" << tcp_host_ << ":" << tcp_port
                << " (callers authenticate with " << tcp_auth_->Describe() << ")";
    }
    return absl::OkStatus();
  }

  void Shutdown(absl::Duration grace) override {
    if (listener_ != nullptr) listener_->Stop();
    // Running jobs stop and are requeued (they resume from their checkpoint at the next start);
    // watch and log streams end with UNAVAILABLE.
    if (jobs_ != nullptr) jobs_->Shutdown();
    if (server_ != nullptr) {
      server_->GetHealthCheckService()->Shutdown();
      server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoSeconds(grace));
      server_->Wait();
      server_.reset();
    }
    if (claim_ != nullptr) claim_->Release();
  }

  ~DaemonImpl() override { Shutdown(absl::ZeroDuration()); }

 private:
  // Checks the TCP flags and reads the TLS and token files. Without --listen_tcp the TLS and token
  // flags are refused rather than silently ignored.
  absl::Status SetUpTcp(const DaemonOptions& options) {
    if (options.listen_tcp.empty()) {
      const std::pair<const char*, const std::string*> tls_flags[] = {
          {"--tls_cert", &options.tls_cert_file},
          {"--tls_key", &options.tls_key_file},
          {"--tls_client_ca", &options.tls_client_ca_file},
          {"--token_file", &options.token_file}};
      for (const auto& [flag, value] : tls_flags) {
        if (!value->empty()) {
          return absl::InvalidArgumentError(absl::StrCat(
              flag,
              " is set but --listen_tcp is empty: TLS and tokens apply to the TCP listener "
              "only (the unix socket identifies callers by their uid)"));
        }
      }
      return absl::OkStatus();
    }
    const std::string& address = options.listen_tcp;
    const size_t colon = address.rfind(':');
    uint32_t port = 0;
    const std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
    const std::string port_text = colon == std::string::npos ? "" : address.substr(colon + 1);
    if (host.empty() || port_text.empty() || !absl::SimpleAtoi(port_text, &port) || port > 65535 ||
        (host.find(':') != std::string::npos && host.front() != '[')) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--listen_tcp '", address,
          "' is not HOST:PORT (e.g. 0.0.0.0:7465, [::]:7465, 127.0.0.1:0 for any free port)"));
    }
    tcp_host_ = host;
    TcpSecurityOptions tls;
    tls.cert_file = options.tls_cert_file;
    tls.key_file = options.tls_key_file;
    tls.client_ca_file = options.tls_client_ca_file;
    tls.token_file = options.token_file;
    MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<TcpAuthenticator> auth, TcpAuthenticator::Create(tls));
    tcp_auth_ = std::move(auth);
    return absl::OkStatus();
  }

  absl::Status LoadTopology(const DaemonOptions& options) {
    std::unique_ptr<topology::TopologySource> source =
        options.topology_file.empty() ? topology::MakeHwlocLiveSource()
                                      : topology::MakeHwlocXmlFileSource(options.topology_file);
    MOBIUS_ASSIGN_OR_RETURN(topology::LoadedTopology loaded, source->Load());
    snapshot_.topology = std::move(loaded.topology);
    snapshot_.hwloc_xml = std::move(loaded.hwloc_xml);
    snapshot_.facts = topology::Analyze(snapshot_.topology);
    LOG(INFO) << "topology from " << snapshot_.topology.source << ": "
              << snapshot_.topology.gpus.size() << " GPU(s), "
              << snapshot_.facts.root_complexes.size() << " root complex(es), "
              << snapshot_.facts.switches.size() << " PCIe switch(es), "
              << snapshot_.facts.contention_groups.size() << " contention group(s), "
              << snapshot_.topology.numa_nodes.size() << " NUMA node(s)";
    return absl::OkStatus();
  }

  void LogDevices() {
    DeviceProbe probe = ProbeDevices();
    has_cuda_ = !probe.cuda_devices.empty();
    LOG(INFO) << "compute devices on this machine: " << DescribeBackendChoice(probe);
  }

  absl::Status StartJobs(const DaemonOptions& options) {
    jobs::NodeConfig node;
    node.gpu_allow_list = options.gpu_allow_list;
    int64_t numa = 0;
    for (const auto& n : snapshot_.topology.numa_nodes) numa += n.memory_bytes;
    node.host_bytes = options.host_memory_bytes > 0 ? options.host_memory_bytes : numa / 10 * 9;
    // Never more than this machine has (an emulated topology may claim far more): its memory (or
    // its cgroup's limit) less 10% for the system and the daemon. Not MemAvailable at this moment:
    // a daemon restarted right after a crash sees the dead job's memory still being freed. What is
    // free when a job starts is the launcher's check (it waits a while for memory to come back).
    if (absl::StatusOr<HostMemory> machine = ReadHostMemory(); machine.ok()) {
      const int64_t usable = machine->capacity_bytes() / 10 * 9;
      if (usable < node.host_bytes) {
        LOG(INFO) << "host budget capped by this machine: " << machine->Describe();
        node.host_bytes = usable;
      }
    } else {
      LOG(WARNING) << "cannot read this machine's memory: " << machine.status();
    }
    node.pinned_bytes =
        options.pinned_budget_bytes > 0 ? options.pinned_budget_bytes : node.host_bytes / 2;
    jobs::JobManagerOptions jo;
    MOBIUS_ASSIGN_OR_RETURN(jo.node,
                            jobs::MakeNodeResources(snapshot_.topology, snapshot_.facts, node));
    jo.state_dir = options.state_dir;
    jo.worker_binary = options.worker_binary;
    jo.topology = snapshot_.topology;
    jo.facts = snapshot_.facts;
    jo.default_quota = {.max_gpus = options.max_gpus_per_user,
                        .max_running_jobs = options.max_running_jobs_per_user,
                        .max_host_bytes = options.max_host_bytes_per_user,
                        .max_queued_jobs = options.max_queued_jobs_per_user};
    jo.emulate_links =
        options.emulate_links == "on" || (options.emulate_links == "auto" && !has_cuda_);
    jo.devices_in_host_memory = jo.emulate_links || !has_cuda_;
    jo.link_scale = options.link_scale;
    jo.kill_grace = options.kill_grace;
    jo.heartbeat_timeout = options.heartbeat_timeout;
    jo.step_timeout = options.step_timeout;
    jo.preemption = options.preemption;
    jo.preemption_grace = options.preemption_grace;
    jo.fair_share = options.fair_share;
    jo.usage_interval = options.usage_interval;
    jo.observer = metrics_.get();
    jo.single_user = !CanSwitchIdentity();
    MOBIUS_ASSIGN_OR_RETURN(launch::JobCgroupMode cgroup_mode,
                            launch::ParseJobCgroupMode(options.job_cgroups));
    MOBIUS_ASSIGN_OR_RETURN(cgroups_, launch::SetUpJobCgroups(cgroup_mode));
    jo.cgroups = cgroups_.get();
    // A job found RUNNING at start-up: its completion record read as its user (job_identity.h).
    jo.read_completion = [worker = options.worker_binary, single = jo.single_user](
                             const jobs::JobRecord& job, const std::string& dir) {
      jobs::JobManagerOptions as;
      as.worker_binary = worker;
      as.single_user = single;
      return jobs::ReadCompletionAs(as, job.uid, dir);
    };
    LOG(INFO) << (jo.single_user
                      ? absl::StrCat("single-user mode (unprivileged, uid ", getuid(),
                                     "): every job runs as this user; only it and the admins "
                                     "may submit")
                      : std::string("multi-user mode (root): each job runs as the user who "
                                    "submitted it, with that user's groups"));
    LOG(INFO) << "jobs: state in " << jo.state_dir << ", workers " << jo.worker_binary << ", "
              << jo.node.allowed_gpus.size() << " usable GPU(s), host budget "
              << (node.host_bytes >> 20) << " MiB, pinned budget " << (node.pinned_bytes >> 20)
              << " MiB; "
              << (jo.emulate_links
                      ? absl::StrCat("CPU backend with emulated PCIe links (x", jo.link_scale, ")")
                      : std::string("no link emulation: each worker runs on its GPU "
                                    "(CUDA backend; CPU where a device is unusable)"));
    MOBIUS_ASSIGN_OR_RETURN(jobs_, jobs::JobManager::Create(std::move(jo)));
    return absl::OkStatus();
  }

  absl::StatusOr<v1::GetNodeStatusResponse> NodeStatusProto() {
    jobs::NodeStatus st = jobs_->Status();
    v1::GetNodeStatusResponse r;
    for (const auto& g : st.gpus) {
      v1::GpuStatus* p = r.add_gpus();
      p->set_index(g.index);
      p->set_name(g.name);
      p->set_memory_bytes(g.memory_bytes);
      p->set_allowed(g.allowed);
      p->set_job_id(g.job_id);
    }
    r.set_host_memory_total_bytes(st.host_bytes);
    r.set_host_memory_available_bytes(st.host_bytes - st.host_used_bytes);
    r.set_pinned_budget_bytes(st.pinned_bytes);
    r.set_pinned_used_bytes(st.pinned_used_bytes);
    r.set_draining(st.draining);
    v1::JobStateCount* q = r.add_jobs();
    q->set_state(v1::JOB_STATE_QUEUED);
    q->set_count(st.queued);
    v1::JobStateCount* run = r.add_jobs();
    run->set_state(v1::JOB_STATE_RUNNING);
    run->set_count(st.running);
    return r;
  }

  TopologySnapshot snapshot_;
  std::unique_ptr<SocketClaim> claim_;
  std::unique_ptr<NodeServiceImpl> node_service_;
  bool has_cuda_ = false;
  std::shared_ptr<const TcpAuthenticator> tcp_auth_;  // null: no TCP listener
  std::string tcp_host_;
  std::unique_ptr<CallerResolver> callers_;
  std::unique_ptr<DaemonMetrics> metrics_;          // before jobs_: the manager reports to it
  std::unique_ptr<launch::JobCgroupRoot> cgroups_;  // null: no per-job isolation
  std::unique_ptr<jobs::JobManager> jobs_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  std::unique_ptr<PeerListener> listener_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Create(const DaemonOptions& options) {
  auto d = std::make_unique<DaemonImpl>();
  MOBIUS_RETURN_IF_ERROR(d->Start(options));
  return d;
}

}  // namespace mobius
