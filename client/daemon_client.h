// The CLI's connection to mobiusd: its unix socket, or its TLS-only TCP port (daemon_endpoint.h).
// Every call carries a deadline.
//
// Errors: UNAVAILABLE with a hint ("is mobiusd running? ...") when the socket is missing or nothing
// answers (over TCP also a failed TLS handshake: an untrusted daemon or client certificate);
// DEADLINE_EXCEEDED when the daemon is too slow; UNAUTHENTICATED over TCP without a valid token or
// certificate; otherwise the daemon's own status. Thread-compatible.
#ifndef MOBIUS_CLIENT_DAEMON_CLIENT_H_
#define MOBIUS_CLIENT_DAEMON_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/daemon_endpoint.h"
#include "mobius/v1/node.pb.h"

namespace mobius::cli {

class DaemonClient {
 public:
  // Does not connect yet; calls connect lazily (and report unusable TLS files).
  static std::unique_ptr<DaemonClient> For(const DaemonEndpoint& endpoint, absl::Duration timeout);
  virtual ~DaemonClient() = default;

  virtual absl::StatusOr<v1::GetTopologyResponse> GetTopology(bool include_hwloc_xml) = 0;
  // "SERVING", "NOT_SERVING", ... of the daemon as a whole (grpc.health.v1 Check, service "").
  virtual absl::StatusOr<std::string> Health() = 0;
};

// UNAVAILABLE with the hint ("is mobiusd running? ...") when nothing exists at a unix endpoint's
// socket path; OK for TCP endpoints (only a call can tell).
absl::Status CheckDaemonSocket(const DaemonEndpoint& endpoint);
// A failed call's status as the CLI reports it: UNAVAILABLE and DEADLINE_EXCEEDED get the
// address, the timeout and the hint; UNAUTHENTICATED gets how to authenticate; other codes pass
// through.
absl::Status ExplainDaemonError(absl::Status status, const DaemonEndpoint& endpoint,
                                absl::Duration timeout);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_DAEMON_CLIENT_H_
