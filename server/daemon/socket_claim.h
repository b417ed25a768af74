// Claims a unix-socket path for exactly one daemon.
//
// Acquire() takes an exclusive flock on "<socket>.lock" (held for the daemon's lifetime; the lock
// file records the owner's pid), then decides what to do with an existing socket file:
//  - a live server answers on it        -> FAILED_PRECONDITION, nothing is touched;
//  - nothing answers (a crashed daemon)   -> the stale socket is removed;
//  - the path is not a socket             -> FAILED_PRECONDITION, nothing is touched.
// The socket's directory must exist and be writable (FAILED_PRECONDITION / PERMISSION_DENIED
// otherwise, naming the directory). Release() (or the destructor) removes the socket and the lock.
//
// Not thread-safe; one owner.
#ifndef MOBIUS_SERVER_DAEMON_SOCKET_CLAIM_H_
#define MOBIUS_SERVER_DAEMON_SOCKET_CLAIM_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace mobius {

class SocketClaim {
 public:
  static absl::StatusOr<std::unique_ptr<SocketClaim>> Acquire(const std::string& socket_path);
  ~SocketClaim();

  SocketClaim(const SocketClaim&) = delete;
  SocketClaim& operator=(const SocketClaim&) = delete;

  // Sets the socket file's permission bits (after the server created it).
  absl::Status SetMode(unsigned mode) const;
  void Release();
  const std::string& path() const { return path_; }

 private:
  SocketClaim(std::string path, int lock_fd) : path_(std::move(path)), lock_fd_(lock_fd) {}
  std::string path_;
  int lock_fd_ = -1;
};

// True when something accepts connections on the unix socket at `path`.
bool UnixSocketIsLive(const std::string& path);

}  // namespace mobius

#endif  // MOBIUS_SERVER_DAEMON_SOCKET_CLAIM_H_
