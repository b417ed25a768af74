// PeerListener: the daemon's unix-socket door, with the caller's identity.
//
// gRPC C++ 1.51 does not tell a handler who is on the other end of a unix socket. So the daemon
// accepts connections itself: it listens on the socket, reads each connection's kernel-verified
// credentials (SO_PEERCRED: uid, gid, pid), records them under the connection's fd, and hands the fd
// to the gRPC server (grpc::AddInsecureChannelFromFd). gRPC names such a connection's peer
// "fd:<N>", so a handler maps ServerContext::peer() back to the credentials with Lookup(). A
// reused fd number is overwritten at accept, before gRPC sees the new connection, so a lookup never
// returns a previous connection's identity.
//
// Thread-safety: Lookup may be called from any thread; Start/Stop from one owner.
#ifndef MOBIUS_SERVER_RPC_PEER_LISTENER_H_
#define MOBIUS_SERVER_RPC_PEER_LISTENER_H_

#include <sys/types.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace grpc {
class Server;
}

namespace mobius {

struct PeerCredentials {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
};

class PeerListener {
 public:
  // Binds and listens on `socket_path` (created with mode 0600; the caller widens it). The path
  // must not exist (SocketClaim cleared it).
  static absl::StatusOr<std::unique_ptr<PeerListener>> Listen(const std::string& socket_path);
  ~PeerListener();  // Stop()

  // Starts accepting; every connection goes to `server`, which must outlive Stop().
  void Start(grpc::Server* server);
  // Stops accepting and closes the listening socket (connections already handed over stay).
  void Stop();

  // The credentials of the connection gRPC names `peer` ("fd:17"); nullopt for unknown peers.
  std::optional<PeerCredentials> Lookup(const std::string& peer) const;

 private:
  explicit PeerListener(int fd) : listen_fd_(fd) {}
  void AcceptLoop(grpc::Server* server);

  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // self-pipe that ends the accept loop
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::map<int, PeerCredentials> peers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mobius

#endif  // MOBIUS_SERVER_RPC_PEER_LISTENER_H_
