#include "server/rpc/caller_resolver.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/server_context.h"
#include "server/rpc/peer_listener.h"
#include "server/rpc/tcp_auth.h"

namespace mobius {
namespace {

bool InGroup(uid_t uid, gid_t primary, gid_t group) {
  if (group == static_cast<gid_t>(-1)) return false;
  if (primary == group) return true;
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* out = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &out) != 0 || out == nullptr) return false;
  int n = 64;
  std::vector<gid_t> groups(n);
  if (getgrouplist(out->pw_name, out->pw_gid, groups.data(), &n) < 0) {
    groups.resize(n);
    if (getgrouplist(out->pw_name, out->pw_gid, groups.data(), &n) < 0) return false;
  }
  for (int i = 0; i < n; ++i) {
    if (groups[i] == group) return true;
  }
  return false;
}

}  // namespace

std::string UserName(uid_t uid) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* out = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &out) == 0 && out != nullptr) {
    return out->pw_name;
  }
  return absl::StrCat("uid ", uid);
}

jobs::Caller CallerResolver::ForUid(uid_t uid, gid_t gid) const {
  jobs::Caller c;
  c.uid = uid;
  c.user = UserName(uid);
  c.admin = uid == 0 || access_.admin_uids.count(uid) > 0 || InGroup(uid, gid, access_.admin_gid);
  return c;
}

absl::StatusOr<jobs::Caller> CallerResolver::Resolve(const grpc::ServerContext& context) const {
  const std::string peer = context.peer();
  if (absl::StartsWith(peer, "fd:")) {  // the unix socket (PeerListener hands fds to gRPC)
    std::optional<PeerCredentials> cred =
        unix_peers_ != nullptr ? unix_peers_->Lookup(peer) : std::nullopt;
    if (!cred) {
      return absl::UnauthenticatedError(
          absl::StrCat("cannot identify the caller (peer ", peer, ")"));
    }
    return ForUid(cred->uid, cred->gid);
  }
  if (tcp_ == nullptr) {
    return absl::UnauthenticatedError(absl::StrCat("cannot identify the caller (peer ", peer, ")"));
  }
  absl::StatusOr<RemoteIdentity> who = AuthenticateCall(*tcp_, context);
  if (!who.ok()) return who.status();
  return ForUid(who->uid, who->gid);
}

}  // namespace mobius
