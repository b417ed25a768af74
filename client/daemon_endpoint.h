// Where the CLI finds mobiusd and how it proves who it is. Plain data and its resolution from the
// connection flags and environment; no gRPC (client/daemon_channel.h makes the channel).
//
//   unix socket (default): --socket PATH, --daemon PATH or unix:PATH, $MOBIUS_SOCKET,
//                          /run/mobius/mobiusd.sock. The daemon identifies the caller by its uid.
//   TCP:                   --daemon tcp://HOST:PORT or $MOBIUS_DAEMON. Always TLS: the daemon's
//                          certificate is verified against --tls_ca (default: the system's CAs)
//                          and the name in it must be HOST (or --tls_server_name); the caller
//                          authenticates with a client certificate (--tls_cert + --tls_key) or a
//                          bearer token (--token_file, else $MOBIUS_TOKEN). There is no plaintext
//                          TCP.
// Flags beat environment variables; --daemon and --socket together are a usage error. TLS and
// token settings are ignored for a unix socket.
//
// Thread-compatible.
#ifndef MOBIUS_CLIENT_DAEMON_ENDPOINT_H_
#define MOBIUS_CLIENT_DAEMON_ENDPOINT_H_

#include <string>

#include "absl/status/statusor.h"

namespace mobius::cli {

inline constexpr char kDaemonEnvVar[] = "MOBIUS_DAEMON";
inline constexpr char kTokenEnvVar[] = "MOBIUS_TOKEN";

struct DaemonEndpoint {
  // A unix socket path, or "tcp://HOST:PORT" (HOST: a name, an IPv4 address or [IPv6]).
  std::string address;
  std::string tls_ca_file;      // tcp: PEM CA bundle for the daemon's certificate; empty: system
  std::string tls_cert_file;    // tcp: client certificate (PEM), with tls_key_file
  std::string tls_key_file;
  std::string tls_server_name;  // tcp: the name expected in the daemon's certificate; empty: HOST
  std::string token;            // tcp: bearer token; never printed

  bool is_tcp() const;
  // "HOST:PORT" for tcp, the socket path otherwise.
  std::string target() const;
  // For messages: "tcp://HOST:PORT" or the socket path.
  const std::string& display() const { return address; }
};

// The connection flags as given (empty: not given).
struct EndpointFlags {
  std::string daemon, socket;
  std::string tls_ca, tls_cert, tls_key, tls_server_name;
  std::string token_file;
};

// Applies the precedence above, reads $MOBIUS_DAEMON / $MOBIUS_SOCKET / $MOBIUS_TOKEN and, for a
// TCP address, the token file (its first non-comment line; the file must not be readable by group
// or others). INVALID_ARGUMENT naming the flag for: --daemon with --socket, a malformed tcp://
// address, --tls_cert without --tls_key (or the reverse), an unreadable or too open token file.
absl::StatusOr<DaemonEndpoint> ResolveDaemonEndpoint(const EndpointFlags& flags);

// The unix socket endpoint at `path` (tests, callers without flags).
DaemonEndpoint UnixEndpoint(const std::string& path);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_DAEMON_ENDPOINT_H_
