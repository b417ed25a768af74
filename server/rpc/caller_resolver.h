// CallerResolver: who is calling, for every handler that needs a caller (JobService,
// AdminService, NodeService.Plan), on either of the daemon's doors:
//   - the unix socket: the connection's SO_PEERCRED uid, recorded by PeerListener (gRPC names such
//     a connection's peer "fd:N");
//   - the TCP port (when --listen_tcp is set): the client certificate or bearer token of the call,
//     mapped to a local uid by TcpAuthenticator (tcp_auth.h).
// Either way the result is a uid and a user name; admin when the uid is 0, is one of the
// configured admin uids, or the user is in the configured admin group. A caller that neither door
// can identify gets UNAUTHENTICATED.
//
// Thread-safety: immutable after construction; Resolve may be called from any thread.
#ifndef MOBIUS_SERVER_RPC_CALLER_RESOLVER_H_
#define MOBIUS_SERVER_RPC_CALLER_RESOLVER_H_

#include <sys/types.h>

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "server/jobs/service/job_manager.h"

namespace grpc {
class ServerContext;
}

namespace mobius {

class PeerListener;
class TcpAuthenticator;

struct AccessConfig {
  std::set<uid_t> admin_uids;  // root is always an admin
  gid_t admin_gid = static_cast<gid_t>(-1);  // members of this group are admins; -1: none
};

class CallerResolver {
 public:
  // Not owned; both must outlive the resolver. `tcp` is null when there is no TCP listener.
  CallerResolver(const PeerListener* unix_peers, const TcpAuthenticator* tcp, AccessConfig access)
      : unix_peers_(unix_peers), tcp_(tcp), access_(std::move(access)) {}

  absl::StatusOr<jobs::Caller> Resolve(const grpc::ServerContext& context) const;

  // The caller with uid `uid` (primary group `gid`, -1: look it up), as Resolve would name it.
  jobs::Caller ForUid(uid_t uid, gid_t gid) const;

 private:
  const PeerListener* unix_peers_;
  const TcpAuthenticator* tcp_;
  AccessConfig access_;
};

// The user name of `uid`, "uid N" when it has no passwd entry.
std::string UserName(uid_t uid);

}  // namespace mobius

#endif  // MOBIUS_SERVER_RPC_CALLER_RESOLVER_H_
