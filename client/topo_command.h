// `mobius topo`: shows the server's hardware topology, from the daemon or straight from an hwloc XML
// file (no daemon needed).
//
// Output: a readable tree (default), the mobius.v1.Topology message as JSON (--json), or hwloc XML
// (--xml) for other tools. Errors are one line on `err`; the return value is an exit code
// (client/exit_codes.h).
#ifndef MOBIUS_CLIENT_TOPO_COMMAND_H_
#define MOBIUS_CLIENT_TOPO_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "client/daemon_endpoint.h"

namespace mobius::cli {

struct TopoOptions {
  std::string topology_file;   // if set, read this file instead of asking the daemon
  DaemonEndpoint daemon;       // where to ask (client/daemon_endpoint.h)
  absl::Duration timeout = absl::Seconds(10);
  bool json = false;
  bool xml = false;
};

int RunTopo(const TopoOptions& options, std::ostream& out, std::ostream& err);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_TOPO_COMMAND_H_
