#include "server/rpc/node_service.h"

#include "server/rpc/topology_convert.h"

namespace mobius {

grpc::Status NodeServiceImpl::GetTopology(grpc::ServerContext* context,
                                          const v1::GetTopologyRequest* request,
                                          v1::GetTopologyResponse* response) {
  *response->mutable_topology() = TopologyToProto(snapshot_->topology, snapshot_->facts);
  if (request->include_hwloc_xml()) response->set_hwloc_xml(snapshot_->hwloc_xml);
  return grpc::Status::OK;
}

}  // namespace mobius
