#include "client/flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, socket, "",
          "mobiusd's unix socket (default: $MOBIUS_SOCKET, else /run/mobius/mobiusd.sock).");
ABSL_FLAG(double, timeout_seconds, 10, "Deadline of each call to the daemon, in seconds.");
ABSL_FLAG(bool, json, false, "Print machine-readable JSON instead of text.");
ABSL_FLAG(bool, xml, false, "topo: print the topology as hwloc XML (lstopo --input can read it).");
ABSL_FLAG(std::string, topology_file, "",
          "topo: read this hwloc XML file instead of asking the daemon.");
