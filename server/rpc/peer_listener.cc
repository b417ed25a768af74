#include "server/rpc/peer_listener.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "glog/logging.h"
#include "grpcpp/server.h"
#include "grpcpp/server_posix.h"

namespace mobius {

absl::StatusOr<std::unique_ptr<PeerListener>> PeerListener::Listen(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path ", path, " is longer than ",
                                                   sizeof(addr.sun_path) - 1, " bytes"));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return MOBIUS_ERRNO_ERROR("socket(AF_UNIX)");
  const mode_t old_umask = umask(0077);
  const int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  umask(old_umask);
  if (rc != 0 || listen(fd, 128) != 0) {
    absl::Status s = MOBIUS_ERRNO_ERROR(absl::StrCat("listen on unix:", path));
    close(fd);
    return s;
  }
  auto l = std::unique_ptr<PeerListener>(new PeerListener(fd));
  if (pipe2(l->wake_, O_CLOEXEC) != 0) return MOBIUS_ERRNO_ERROR("pipe");
  return l;
}

PeerListener::~PeerListener() {
  Stop();
  for (int fd : wake_) {
    if (fd >= 0) close(fd);
  }
}

void PeerListener::Start(grpc::Server* server) {
  thread_ = std::thread([this, server] { AcceptLoop(server); });
}

void PeerListener::Stop() {
  if (thread_.joinable()) {
    const char c = 'x';
    (void)!write(wake_[1], &c, 1);
    thread_.join();
  }
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
  }
}

void PeerListener::AcceptLoop(grpc::Server* server) {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      PLOG(ERROR) << "poll on the daemon socket";
      return;
    }
    if (fds[1].revents != 0) return;
    const int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        PLOG(WARNING) << "accept on the daemon socket";
      }
      continue;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      PLOG(WARNING) << "SO_PEERCRED; dropping the connection";
      close(conn);
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      peers_[conn] = {cred.uid, cred.gid, cred.pid};
    }
    // gRPC's fd transport wants a non-blocking socket; it owns (and closes) the fd from here on.
    fcntl(conn, F_SETFL, fcntl(conn, F_GETFL) | O_NONBLOCK);
    grpc::AddInsecureChannelFromFd(server, conn);
  }
}

std::optional<PeerCredentials> PeerListener::Lookup(const std::string& peer) const {
  absl::string_view rest = peer;
  if (!absl::ConsumePrefix(&rest, "fd:")) return std::nullopt;
  int fd = -1;
  if (!absl::SimpleAtoi(rest, &fd)) return std::nullopt;
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(fd);
  if (it == peers_.end()) return std::nullopt;
  return it->second;
}

}  // namespace mobius
