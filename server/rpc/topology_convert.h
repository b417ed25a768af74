// Conversion between the topology domain model (server/topology) and its wire form
// (mobius.v1.Topology). ToProto also writes the derived facts; FromProto reads the model back and
// recomputes nothing (callers run Analyze on the result when they need facts).
// Only rpc/ and client/ code includes this header (it pulls in protobuf).
#ifndef MOBIUS_SERVER_RPC_TOPOLOGY_CONVERT_H_
#define MOBIUS_SERVER_RPC_TOPOLOGY_CONVERT_H_

#include "absl/status/statusor.h"
#include "mobius/v1/topology.pb.h"
#include "server/topology/analysis.h"
#include "server/topology/topology.h"

namespace mobius {

v1::Topology TopologyToProto(const topology::Topology& t, const topology::TopologyFacts& facts);

// INVALID_ARGUMENT when indices are out of range (a peer sent an inconsistent message).
absl::StatusOr<topology::Topology> TopologyFromProto(const v1::Topology& p);

}  // namespace mobius

#endif  // MOBIUS_SERVER_RPC_TOPOLOGY_CONVERT_H_
