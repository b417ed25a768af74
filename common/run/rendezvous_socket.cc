#include "common/run/rendezvous_socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/run/rendezvous.h"

namespace mobius::runtime::rendezvous {
namespace {

// getaddrinfo's list, freed on scope exit.
struct AddrInfoList {
  addrinfo* head = nullptr;
  ~AddrInfoList() {
    if (head != nullptr) freeaddrinfo(head);
  }
};

absl::Status Resolve(const std::string& host, int port, bool passive, AddrInfoList* list) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  // An empty host means every IPv4 interface (getaddrinfo's passive wildcard for AF_INET).
  hints.ai_family = host.empty() ? AF_INET : AF_UNSPEC;
  const std::string service = std::to_string(port);
  const int rc =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &list->head);
  if (rc == 0) return absl::OkStatus();
  const std::string what = absl::StrCat(
      "cannot resolve '", host, "': ", rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
  if (rc == EAI_NONAME || rc == EAI_NODATA) return absl::NotFoundError(what);
  return absl::UnavailableError(what);
}

int NewSocket(const addrinfo& ai) {
  return socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol);
}

std::string AddressOf(const addrinfo& ai) {
  return PeerName(*reinterpret_cast<const sockaddr_storage*>(ai.ai_addr), ai.ai_addrlen);
}

absl::Status BindError(int error_number, const std::string& address, int port) {
  if (error_number == EADDRINUSE) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": port ", port,
                                               " is in use (", strerror(error_number), ")"));
  }
  return ErrnoError(error_number, absl::StrCat("cannot listen on ", address), __FILE__, __LINE__);
}

}  // namespace

int64_t TimeoutMs(absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration()) return 0;
  if (timeout >= absl::Milliseconds(kMaxTimeoutMs)) return kMaxTimeoutMs;
  return absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1)));
}

Clock::time_point DeadlineAfterMs(int64_t timeout_ms) {
  return Clock::now() +
         std::chrono::milliseconds(std::clamp<int64_t>(timeout_ms, 0, kMaxTimeoutMs));
}

int PollTimeoutMs(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const int64_t ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, 3600 * 1000));
}

bool WaitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = poll(&p, 1, PollTimeoutMs(deadline));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return true;  // let the caller's send/recv report the error
    if (rc == 0 && Clock::now() >= deadline) return false;
  }
}

absl::StatusOr<int> Listen(const std::string& host, int port) {
  AddrInfoList list;
  if (absl::Status s = Resolve(host, port, /*passive=*/true, &list); !s.ok()) {
    return Annotate(s, "rendezvous server");
  }
  absl::Status last = absl::NotFoundError(absl::StrCat("no address for '", host, "'"));
  for (const addrinfo* ai = list.head; ai != nullptr; ai = ai->ai_next) {
    const std::string address = FormatHostPort(host.empty() ? "0.0.0.0" : host, port);
    const int fd = NewSocket(*ai);
    if (fd < 0) {
      last = MOBIUS_ERRNO_ERROR(absl::StrCat("socket for ", address));
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      last = BindError(errno, address, port);
    } else if (listen(fd, SOMAXCONN) != 0) {
      last = BindError(errno, address, port);
    } else {
      return fd;
    }
    close(fd);
  }
  return Annotate(last, "rendezvous server");
}

absl::StatusOr<int> LocalPort(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return MOBIUS_ERRNO_ERROR("getsockname of the rendezvous socket");
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
}

absl::StatusOr<int> ConnectOnce(const std::string& host, int port, Clock::time_point deadline) {
  AddrInfoList list;
  if (absl::Status s = Resolve(host, port, /*passive=*/false, &list); !s.ok()) return s;
  absl::Status last = absl::NotFoundError(absl::StrCat("no address for '", host, "'"));
  for (const addrinfo* ai = list.head; ai != nullptr; ai = ai->ai_next) {
    const std::string address = AddressOf(*ai);
    const int fd = NewSocket(*ai);
    if (fd < 0) {
      last = MOBIUS_ERRNO_ERROR(absl::StrCat("socket for ", address));
      continue;
    }
    int error_number = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      error_number = errno;
      if (error_number == EINPROGRESS) {
        if (!WaitFor(fd, POLLOUT, deadline)) {
          error_number = ETIMEDOUT;
        } else {
          socklen_t length = sizeof(error_number);
          if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error_number, &length) != 0) {
            error_number = errno;
          }
        }
      }
    }
    if (error_number == 0) {
      SetNoDelay(fd);
      return fd;
    }
    last = ErrnoError(error_number, absl::StrCat("connect to ", address), __FILE__, __LINE__);
    close(fd);
  }
  return last;
}

std::string PeerName(const sockaddr_storage& address, socklen_t length) {
  char host[NI_MAXHOST];
  char service[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host, sizeof(host), service,
                  sizeof(service), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "(unknown peer)";
  }
  return FormatHostPort(host, std::atoi(service));
}

void SetNoDelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace mobius::runtime::rendezvous
