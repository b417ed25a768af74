#include "server/daemon/daemon.h"

#include <sys/stat.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "server/daemon/socket_claim.h"
#include "server/rpc/node_service.h"
#include "server/rpc/peer_listener.h"
#include "server/topology/analysis.h"
#include "server/topology/hwloc_source.h"
#include "worker/backend/device_probe.h"

namespace mobius {
namespace {

class DaemonImpl : public Daemon {
 public:
  absl::Status Start(const DaemonOptions& options) {
    MOBIUS_RETURN_IF_ERROR(LoadTopology(options));
    LogDevices();
    MOBIUS_ASSIGN_OR_RETURN(claim_, SocketClaim::Acquire(options.socket_path));

    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    node_service_ = std::make_unique<NodeServiceImpl>(&snapshot_);
    // The socket is ours, not gRPC's: each accepted connection's SO_PEERCRED identifies the
    // caller (peer_listener.h). Created with no access for others; SetMode() opens it up.
    MOBIUS_ASSIGN_OR_RETURN(listener_, PeerListener::Listen(options.socket_path));
    grpc::ServerBuilder builder;
    builder.RegisterService(node_service_.get());
    server_ = builder.BuildAndStart();
    if (server_ == nullptr) return absl::UnavailableError("gRPC server failed to start");
    listener_->Start(server_.get());
    MOBIUS_RETURN_IF_ERROR(claim_->SetMode(options.socket_mode));
    LOG(INFO) << "serving gRPC (NodeService, grpc.health.v1, reflection) on unix:"
              << options.socket_path;
    return absl::OkStatus();
  }

  void Shutdown(absl::Duration grace) override {
    if (listener_ != nullptr) listener_->Stop();
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
    LOG(INFO) << "compute devices on this machine: " << DescribeBackendChoice(probe);
  }

  TopologySnapshot snapshot_;
  std::unique_ptr<SocketClaim> claim_;
  std::unique_ptr<NodeServiceImpl> node_service_;
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
