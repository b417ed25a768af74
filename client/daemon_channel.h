// The gRPC channel to mobiusd for a DaemonEndpoint (daemon_endpoint.h): insecure over the unix
// socket (the kernel identifies the caller), TLS over TCP with the daemon's certificate verified,
// the client certificate when given, and the bearer token as call credentials (sent only over
// TLS). Used by DaemonClient and the job verbs; includes gRPC, so keep it out of widely included
// headers.
#ifndef MOBIUS_CLIENT_DAEMON_CHANNEL_H_
#define MOBIUS_CLIENT_DAEMON_CHANNEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "client/daemon_endpoint.h"
#include "grpcpp/channel.h"

namespace mobius::cli {

// INVALID_ARGUMENT naming the flag when a TLS file cannot be read.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeDaemonChannel(const DaemonEndpoint& endpoint);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_DAEMON_CHANNEL_H_
