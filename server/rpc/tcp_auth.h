// TcpAuthenticator: who is calling over mobiusd's TCP listener, and the TLS credentials of that
// listener.
//
// The unix socket identifies callers by the kernel (SO_PEERCRED, peer_listener.h). A TCP peer has
// no such identity, so the TCP port is TLS only (never plaintext) and every call must prove one:
//   - a client certificate that chains to --tls_client_ca (verified during the TLS handshake: a
//     certificate from another CA fails the handshake). The certificate's subject CN names the
//     user: a user name of this server, or a numeric uid;
//   - or a bearer token (`authorization: Bearer TOKEN` call metadata) listed in --token_file,
//     which maps it to a user name or numeric uid (format below).
// A call that carries a bearer token is judged by the token alone (a wrong token is refused even
// on a connection with a good certificate); otherwise by the certificate. The result is a uid and
// a user name, exactly what the unix socket yields, so ownership, admin rights (root,
// --admin_uids, --admin_group; server/rpc/caller_resolver.h) and the audit log are the same on
// both doors.
//
// Token file: one `TOKEN USER` pair per line (whitespace-separated), `#` comments and blank lines
// ignored. TOKEN: at least 16 visible ASCII characters (no spaces), unique in the file. USER: a
// user name known to this server (getpwnam) or a decimal uid. The file must be a regular file not
// readable or writable by group or others (mode 0600 or 0400). Errors name FILE:LINE and never
// quote a token. Tokens are kept only as SHA-256 digests and compared in constant time, against
// every entry.
//
// Enforcement: ServerCredentials() attaches an AuthMetadataProcessor that runs Authenticate() on
// every call before any service sees it (health and reflection included); a failure ends the call
// with UNAUTHENTICATED. The handlers call AuthenticateCall() again to learn the identity: gRPC
// shares one AuthContext among all calls of a connection, so a per-call identity cannot be stored
// there safely, and the check costs microseconds.
//
// Thread-safety: immutable after Create(); every method may be called from any thread.
#ifndef MOBIUS_SERVER_RPC_TCP_AUTH_H_
#define MOBIUS_SERVER_RPC_TCP_AUTH_H_

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace grpc {
class ServerContext;
class ServerCredentials;
}  // namespace grpc

namespace mobius {

struct TcpSecurityOptions {
  std::string cert_file;       // PEM certificate (chain) of the daemon; required
  std::string key_file;        // PEM private key of cert_file; required
  std::string client_ca_file;  // PEM CA bundle; set: client certificates are verified and identify
  std::string token_file;      // set: bearer tokens (format above)
};

// A user on this server (by name or uid); gid is the primary group, -1 when the uid has no
// passwd entry.
struct RemoteIdentity {
  uid_t uid = 0;
  gid_t gid = static_cast<gid_t>(-1);
  std::string user;
  std::string method;  // "token" or "certificate"
};

// `name_or_uid`: a user name of this server or a decimal uid (a uid without a passwd entry is
// named "uid N"). NOT_FOUND for an unknown name.
absl::StatusOr<RemoteIdentity> LookupLocalUser(absl::string_view name_or_uid);

class TcpAuthenticator {
 public:
  // Reads and checks every file: INVALID_ARGUMENT naming the flag (--tls_cert, --tls_key,
  // --tls_client_ca, --token_file) and the file (FILE:LINE for token lines) when one is missing,
  // unreadable, malformed, too open (the token file), or when the key does not match the
  // certificate; INVALID_ARGUMENT when neither client certificates nor tokens are configured.
  static absl::StatusOr<std::unique_ptr<TcpAuthenticator>> Create(const TcpSecurityOptions& options);

  // `authorization`: the call's "authorization" metadata values; `certificate_cns`: the subject CN
  // of the verified client certificate (empty without one). UNAUTHENTICATED with the reason
  // (never the token) when they identify nobody.
  absl::StatusOr<RemoteIdentity> Authenticate(absl::Span<const absl::string_view> authorization,
                                              absl::Span<const absl::string_view> certificate_cns)
      const;

  // TLS server credentials for the TCP port (client certificates requested and verified against
  // the CA when configured; required when there are no tokens), with this authenticator as the
  // gate of every call. `self` must be this object's owner; it is kept alive by the credentials.
  static std::shared_ptr<grpc::ServerCredentials> ServerCredentials(
      std::shared_ptr<const TcpAuthenticator> self);

  // "client certificates (CA FILE) and 3 bearer tokens (FILE)", for the start-up log.
  std::string Describe() const;
  size_t token_count() const { return tokens_.size(); }

 private:
  struct Token {
    std::array<uint8_t, 32> digest;  // SHA-256 of the token
    RemoteIdentity identity;
  };
  TcpAuthenticator() = default;

  TcpSecurityOptions options_;
  std::string cert_pem_, key_pem_, client_ca_pem_;
  std::vector<Token> tokens_;
};

// Reads a token file (format above). Exposed for tests.
absl::StatusOr<std::vector<std::pair<std::string, RemoteIdentity>>> ReadTokenFile(
    const std::string& path);

// The identity of a call that arrived on the TCP port (its authorization metadata and the
// verified client certificate of its connection); UNAUTHENTICATED otherwise.
absl::StatusOr<RemoteIdentity> AuthenticateCall(const TcpAuthenticator& auth,
                                                const grpc::ServerContext& context);

}  // namespace mobius

#endif  // MOBIUS_SERVER_RPC_TCP_AUTH_H_
