#include "server/rpc/node_service.h"

#include "common/rpc/grpc_status.h"
#include "host/topology/topology_convert.h"

namespace mobius {

grpc::Status NodeServiceImpl::GetTopology(grpc::ServerContext* context,
                                          const v1::GetTopologyRequest* request,
                                          v1::GetTopologyResponse* response) {
  *response->mutable_topology() = TopologyToProto(snapshot_->topology, snapshot_->facts);
  if (request->include_hwloc_xml()) response->set_hwloc_xml(snapshot_->hwloc_xml);
  return grpc::Status::OK;
}

grpc::Status NodeServiceImpl::GetNodeStatus(grpc::ServerContext* context,
                                            const v1::GetNodeStatusRequest* request,
                                            v1::GetNodeStatusResponse* response) {
  if (!status_provider_) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no job service");
  absl::StatusOr<v1::GetNodeStatusResponse> r = status_provider_();
  if (!r.ok()) return ToGrpcStatus(r.status());
  *response = *r;
  return grpc::Status::OK;
}

grpc::Status NodeServiceImpl::Plan(grpc::ServerContext* context, const v1::PlanRequest* request,
                                   v1::PlanResponse* response) {
  if (!plan_provider_) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no job service");
  absl::StatusOr<v1::PlanResponse> r = plan_provider_(context, *request);
  if (!r.ok()) return ToGrpcStatus(r.status());
  *response = *r;
  return grpc::Status::OK;
}

}  // namespace mobius
