#include "server/daemon/flags.h"

#include "absl/flags/flag.h"
#include "common/paths.h"

ABSL_FLAG(std::string, socket, mobius::kDefaultSocketPath,
          "Unix socket to serve gRPC on. Its directory must exist and be writable.");
ABSL_FLAG(std::string, socket_mode, "0660",
          "Permission bits of the socket file (octal): who may talk to the daemon.");
ABSL_FLAG(std::string, topology_file, "",
          "Load the hardware topology from this hwloc XML file instead of discovering it "
          "(emulate a server you do not have).");
ABSL_FLAG(double, shutdown_grace_seconds, 5.0,
          "On SIGTERM/SIGINT, how long in-flight RPCs may take before they are cancelled.");
