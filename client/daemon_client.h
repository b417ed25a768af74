// The CLI's connection to mobiusd over its unix socket. Every call carries a deadline.
//
// Errors: UNAVAILABLE with a hint ("is mobiusd running? ...") when the socket is missing or nothing
// answers; DEADLINE_EXCEEDED when the daemon is too slow; otherwise the daemon's own status.
// Thread-compatible.
#ifndef MOBIUS_CLIENT_DAEMON_CLIENT_H_
#define MOBIUS_CLIENT_DAEMON_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "mobius/v1/node.pb.h"

namespace mobius::cli {

class DaemonClient {
 public:
  // Does not connect yet; calls connect lazily.
  static std::unique_ptr<DaemonClient> ForSocket(const std::string& socket_path,
                                                 absl::Duration timeout);
  virtual ~DaemonClient() = default;

  virtual absl::StatusOr<v1::GetTopologyResponse> GetTopology(bool include_hwloc_xml) = 0;
  // "SERVING", "NOT_SERVING", ... of the daemon as a whole (grpc.health.v1 Check, service "").
  virtual absl::StatusOr<std::string> Health() = 0;
};

// The socket to use: --socket if given, else $MOBIUS_SOCKET, else the default path.
std::string ResolveSocketPath(const std::string& flag_value);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_DAEMON_CLIENT_H_
