// Conversion between the topology domain model (host/topology) and its wire form
// (mobius.v1.Topology). ToProto also writes the derived facts; FromProto reads the model back and
// recomputes nothing (callers run Analyze on the result when they need facts).
// Only rpc/ and client/ code includes this header (it pulls in protobuf).
#ifndef MOBIUS_HOST_TOPOLOGY_TOPOLOGY_CONVERT_H_
#define MOBIUS_HOST_TOPOLOGY_TOPOLOGY_CONVERT_H_

#include "absl/status/statusor.h"
#include "mobius/v1/topology.pb.h"
#include "host/topology/analysis.h"
#include "host/topology/topology.h"

namespace mobius {

v1::Topology TopologyToProto(const topology::Topology& t, const topology::TopologyFacts& facts);

// INVALID_ARGUMENT when indices are out of range (a peer sent an inconsistent message).
absl::StatusOr<topology::Topology> TopologyFromProto(const v1::Topology& p);

}  // namespace mobius

#endif  // MOBIUS_HOST_TOPOLOGY_TOPOLOGY_CONVERT_H_
