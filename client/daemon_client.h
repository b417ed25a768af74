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

// UNAVAILABLE with the hint ("is mobiusd running? ...") when nothing exists at `socket_path`.
absl::Status CheckDaemonSocket(const std::string& socket_path);
// A failed call's status as the CLI reports it: UNAVAILABLE and DEADLINE_EXCEEDED get the socket,
// the timeout and the hint; other codes pass through.
absl::Status ExplainDaemonError(absl::Status status, const std::string& socket_path,
                                absl::Duration timeout);

// The socket to use: --socket if given, else $MOBIUS_SOCKET, else the default path.
std::string ResolveSocketPath(const std::string& flag_value);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_DAEMON_CLIENT_H_
