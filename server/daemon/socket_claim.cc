#include "server/daemon/socket_claim.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "glog/logging.h"

namespace mobius {
namespace {

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string ReadSmallFile(int fd) {
  char buf[64] = {0};
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

bool UnixSocketIsLive(const std::string& path) {
  // Non-blocking: a unix-socket connect blocks while the listener's backlog is full, and a full
  // backlog (EAGAIN) means somebody is listening.
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  bool live = rc == 0 || errno == EAGAIN || errno == EINPROGRESS;
  close(fd);
  return live;
}

absl::StatusOr<std::unique_ptr<SocketClaim>> SocketClaim::Acquire(const std::string& path) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path '", path, "' must be 1..",
                                                   sizeof(addr.sun_path) - 1, " characters"));
  }
  const std::string dir = DirName(path);
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return absl::FailedPreconditionError(absl::StrCat(
          "socket directory ", dir, " does not exist; create it or choose another --socket"));
    }
    return MOBIUS_ERRNO_ERROR(absl::StrCat("socket directory ", dir));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("socket directory ", dir, " is not a directory"));
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("socket directory ", dir, " is not writable by this user (uid ", getuid(), ")"));
  }

  const std::string lock_path = path + ".lock";
  int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("lock file ", lock_path));
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    std::string owner = ReadSmallFile(lock_fd);
    close(lock_fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "another mobiusd", owner.empty() ? "" : absl::StrCat(" (pid ", owner, ")"),
          " is already serving on ", path));
    }
    return ErrnoError(err, absl::StrCat("flock ", lock_path), __FILE__, __LINE__);
  }
  std::string pid = std::to_string(getpid());
  if (ftruncate(lock_fd, 0) != 0 || pwrite(lock_fd, pid.data(), pid.size(), 0) < 0) {
    LOG(WARNING) << "could not record pid in " << lock_path << ": " << strerror(errno);
  }
  auto claim = std::unique_ptr<SocketClaim>(new SocketClaim(path, lock_fd));

  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      claim->path_.clear();  // not ours: never remove it
      unlink(lock_path.c_str());
      claim->Release();
      return absl::FailedPreconditionError(
          absl::StrCat(path, " exists and is not a socket; refusing to replace it"));
    }
    if (UnixSocketIsLive(path)) {
      claim->path_.clear();
      unlink(lock_path.c_str());
      claim->Release();
      return absl::FailedPreconditionError(
          absl::StrCat("a live server already answers on ", path, " (not holding ", lock_path, ")"));
    }
    LOG(INFO) << "removing stale socket " << path << " left by a previous daemon";
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return MOBIUS_ERRNO_ERROR(absl::StrCat("remove stale socket ", path));
    }
  }
  return claim;
}

absl::Status SocketClaim::SetMode(unsigned mode) const {
  if (chmod(path_.c_str(), mode) != 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("chmod ", path_));
  return absl::OkStatus();
}

void SocketClaim::Release() {
  if (lock_fd_ < 0) return;
  if (!path_.empty()) {
    unlink(path_.c_str());
    unlink((path_ + ".lock").c_str());
  }
  close(lock_fd_);  // drops the flock
  lock_fd_ = -1;
}

SocketClaim::~SocketClaim() { Release(); }

}  // namespace mobius
