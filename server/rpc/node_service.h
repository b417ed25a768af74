// gRPC adapter for mobius.v1.NodeService. Converts requests to domain calls and back; holds no
// logic of its own.
//
// The topology snapshot is immutable after daemon start-up, so handlers read it without locks and
// may run on any gRPC thread.
#ifndef MOBIUS_SERVER_RPC_NODE_SERVICE_H_
#define MOBIUS_SERVER_RPC_NODE_SERVICE_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "mobius/v1/node.grpc.pb.h"
#include "host/topology/analysis.h"
#include "host/topology/topology.h"

namespace mobius {

// What the daemon discovered at start-up.
struct TopologySnapshot {
  topology::Topology topology;
  topology::TopologyFacts facts;
  std::string hwloc_xml;
};

class NodeServiceImpl final : public v1::NodeService::Service {
 public:
  // `snapshot` must outlive the service.
  explicit NodeServiceImpl(const TopologySnapshot* snapshot) : snapshot_(snapshot) {}

  grpc::Status GetTopology(grpc::ServerContext* context, const v1::GetTopologyRequest* request,
                           v1::GetTopologyResponse* response) override;
  // UNIMPLEMENTED until a provider is set (the daemon's job manager knows the answer).
  grpc::Status GetNodeStatus(grpc::ServerContext* context, const v1::GetNodeStatusRequest* request,
                             v1::GetNodeStatusResponse* response) override;
  // UNIMPLEMENTED until a provider is set (the daemon's job manager plans specs).
  grpc::Status Plan(grpc::ServerContext* context, const v1::PlanRequest* request,
                    v1::PlanResponse* response) override;
  void SetPlanProvider(
      std::function<absl::StatusOr<v1::PlanResponse>(grpc::ServerContext*, const v1::PlanRequest&)>
          provider) {
    plan_provider_ = std::move(provider);
  }
  void SetStatusProvider(std::function<absl::StatusOr<v1::GetNodeStatusResponse>()> provider) {
    status_provider_ = std::move(provider);
  }

 private:
  const TopologySnapshot* snapshot_;
  std::function<absl::StatusOr<v1::GetNodeStatusResponse>()> status_provider_;
  std::function<absl::StatusOr<v1::PlanResponse>(grpc::ServerContext*, const v1::PlanRequest&)>
      plan_provider_;
};

}  // namespace mobius

#endif  // MOBIUS_SERVER_RPC_NODE_SERVICE_H_
