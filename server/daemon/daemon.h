// mobiusd's server object: owns the topology snapshot, the claimed socket and the gRPC server.
//
//   auto d = Daemon::Create(options);   // loads topology, claims the socket, starts serving
//   d->Shutdown(grace);                 // stops serving, removes the socket
//
// Create() errors: INVALID_ARGUMENT / NOT_FOUND for a bad topology file, FAILED_PRECONDITION /
// PERMISSION_DENIED for a socket that is taken or whose directory is unusable. Shutdown() may be
// called from any one thread, once.
#ifndef MOBIUS_SERVER_DAEMON_DAEMON_H_
#define MOBIUS_SERVER_DAEMON_DAEMON_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mobius {

struct DaemonOptions {
  std::string socket_path;
  unsigned socket_mode = 0660;
  std::string topology_file;  // empty: live hwloc discovery
};

class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Create(const DaemonOptions& options);
  virtual ~Daemon() = default;
  virtual void Shutdown(absl::Duration grace) = 0;
};

}  // namespace mobius

#endif  // MOBIUS_SERVER_DAEMON_DAEMON_H_
