#include "server/metrics/metrics_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errors.h"

namespace mobius {
namespace {

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

std::string Response(int code, const char* reason, const std::string& type,
                     const std::string& body, bool head) {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ", type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n",
                      head ? "" : body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, std::function<std::string()> render) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics address \"", address,
                                                   "\" is not host:port"));
  }
  const std::string host = address.substr(0, colon);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), nullptr, &hints, &res) != 0 ||
      res == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("metrics address: cannot resolve \"", host,
                                                   "\""));
  }
  sockaddr_in sa = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  freeaddrinfo(res);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return MOBIUS_ERRNO_ERROR("metrics socket");
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(fd, 16) != 0) {
    const int e = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("metrics: cannot listen on ", address, ": ",
                                               strerror(e)));
  }
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  auto server = std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(fd, ntohs(sa.sin_port), std::move(render)));
  if (pipe2(server->wake_, O_CLOEXEC) != 0) return MOBIUS_ERRNO_ERROR("pipe");
  server->thread_ = std::thread([s = server.get()] { s->Loop(); });
  return server;
}

MetricsHttpServer::MetricsHttpServer(int fd, int port, std::function<std::string()> render)
    : fd_(fd), port_(port), render_(std::move(render)) {}

MetricsHttpServer::~MetricsHttpServer() {
  if (thread_.joinable()) {
    const char c = 'x';
    (void)!write(wake_[1], &c, 1);
    thread_.join();
  }
  close(fd_);
  for (int f : wake_) {
    if (f >= 0) close(f);
  }
}

void MetricsHttpServer::Loop() {
  for (;;) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    const int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    timeval tv{5, 0};
    setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    Serve(conn);
    close(conn);
  }
}

void MetricsHttpServer::Serve(int conn) {
  // Read the request head (up to 8 KiB; the body of a GET is ignored).
  std::string head;
  char buf[2048];
  while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
    const ssize_t n = recv(conn, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    head.append(buf, static_cast<size_t>(n));
    if (head.size() > 8192) break;
  }
  const std::string line = head.substr(0, head.find_first_of("\r\n"));
  std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (parts.size() != 3 || parts[2].rfind("HTTP/1.", 0) != 0) {
    WriteAll(conn, Response(400, "Bad Request", "text/plain", "bad request\n", false));
    return;
  }
  const bool head_only = parts[0] == "HEAD";
  if (parts[0] != "GET" && !head_only) {
    WriteAll(conn, Response(405, "Method Not Allowed", "text/plain", "GET /metrics\n", false));
    return;
  }
  const std::string path = parts[1].substr(0, parts[1].find('?'));
  if (path != "/metrics") {
    WriteAll(conn, Response(404, "Not Found", "text/plain", "mobiusd serves /metrics\n",
                            head_only));
    return;
  }
  WriteAll(conn, Response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", render_(),
                          head_only));
}

}  // namespace mobius
