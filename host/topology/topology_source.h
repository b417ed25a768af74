// Where a Topology comes from: live hwloc discovery of this machine, or an hwloc XML file (so that
// behaviour on machines we do not have can be tested and planned for).
//
// Every source also returns the hwloc XML of what it loaded, so `mobius topo --xml` can hand the
// same topology to other tools (lstopo, Slurm gres.conf generators, another mobiusd).
//
// Thread-compatible: one Load() at a time per source object.
#ifndef MOBIUS_HOST_TOPOLOGY_TOPOLOGY_SOURCE_H_
#define MOBIUS_HOST_TOPOLOGY_TOPOLOGY_SOURCE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "host/topology/topology.h"

namespace mobius::topology {

struct LoadedTopology {
  Topology topology;
  std::string hwloc_xml;  // hwloc v2 XML export of the loaded topology
};

class TopologySource {
 public:
  virtual ~TopologySource() = default;

  // Errors: NOT_FOUND / PERMISSION_DENIED for an unreadable file, INVALID_ARGUMENT for a file that
  // is empty or not hwloc XML (the message names the file and what is wrong), INTERNAL when hwloc
  // fails on the live machine.
  virtual absl::StatusOr<LoadedTopology> Load() = 0;

  // "hwloc discovery" or "file <path>", for logs.
  virtual std::string Describe() const = 0;
};

}  // namespace mobius::topology

#endif  // MOBIUS_HOST_TOPOLOGY_TOPOLOGY_SOURCE_H_
