// MetricsHttpServer over real TCP sockets: GET/HEAD /metrics, 404, 405, 400, port 0, bind errors,
// clients that hang up or send junk, and DaemonMetrics served through it.
#include "server/metrics/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics/daemon_metrics.h"
#include "test/server/metrics/exposition.h"

namespace mobius {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// Sends `request` as is and returns everything the server sends until it closes.
std::string Exchange(int port, const std::string& request) {
  const int fd = Connect(port);
  if (fd < 0) return "connect failed";
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) response.append(buf, static_cast<size_t>(n));
  close(fd);
  return response;
}

std::string Body(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

std::unique_ptr<MetricsHttpServer> Serve(std::function<std::string()> render) {
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> s =
      MetricsHttpServer::Start("127.0.0.1:0", std::move(render));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

constexpr char kMetrics[] = "# TYPE x_total counter\nx_total 7\n";

TEST(MetricsHttpTest, PortZeroPicksAFreePort) {
  auto a = Serve([] { return std::string(kMetrics); });
  auto b = Serve([] { return std::string(kMetrics); });
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_GT(a->port(), 0);
  EXPECT_GT(b->port(), 0);
  EXPECT_NE(a->port(), b->port());
}

TEST(MetricsHttpTest, GetMetricsIs200WithTheRenderedText) {
  std::atomic<int> renders{0};
  auto s = Serve([&] {
    ++renders;
    return std::string(kMetrics);
  });
  ASSERT_NE(s, nullptr);
  const std::string r = Exchange(s->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(r, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(r, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(r, HasSubstr("Content-Length: " + std::to_string(sizeof(kMetrics) - 1) + "\r\n"));
  EXPECT_EQ(Body(r), kMetrics);
  // A query string is ignored; HTTP/1.0 and bare-LF line ends (curl -0, netcat) work too.
  EXPECT_EQ(Body(Exchange(s->port(), "GET /metrics?foo=bar HTTP/1.0\r\n\r\n")), kMetrics);
  const std::string lf = Exchange(s->port(), "GET /metrics HTTP/1.1\n\n");
  EXPECT_THAT(lf, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_EQ(Body(lf), kMetrics);
  EXPECT_EQ(renders.load(), 3);
}

TEST(MetricsHttpTest, HeadHasTheHeadersButNoBody) {
  auto s = Serve([] { return std::string(kMetrics); });
  ASSERT_NE(s, nullptr);
  const std::string r = Exchange(s->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_THAT(r, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(r, HasSubstr("Content-Length: " + std::to_string(sizeof(kMetrics) - 1) + "\r\n"));
  EXPECT_EQ(Body(r), "");
}

TEST(MetricsHttpTest, OtherPathsAre404) {
  auto s = Serve([] { return std::string(kMetrics); });
  ASSERT_NE(s, nullptr);
  for (const char* path : {"/", "/metrics/", "/metricsx", "/health", "/../metrics"}) {
    const std::string r = Exchange(s->port(), std::string("GET ") + path + " HTTP/1.1\r\n\r\n");
    EXPECT_THAT(r, StartsWith("HTTP/1.1 404 Not Found\r\n")) << path;
    EXPECT_THAT(r, Not(HasSubstr("x_total"))) << path;
  }
}

TEST(MetricsHttpTest, OtherMethodsAre405) {
  auto s = Serve([] { return std::string(kMetrics); });
  ASSERT_NE(s, nullptr);
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS", "get"}) {
    const std::string r = Exchange(
        s->port(), std::string(method) + " /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
    EXPECT_THAT(r, StartsWith("HTTP/1.1 405 Method Not Allowed\r\n")) << method;
  }
}

TEST(MetricsHttpTest, GarbageIs400) {
  auto s = Serve([] { return std::string(kMetrics); });
  ASSERT_NE(s, nullptr);
  for (const std::string& junk :
       {std::string("garbage\r\n\r\n"), std::string("GET /metrics\r\n\r\n"),
        std::string("GET /metrics SPDY/3\r\n\r\n"), std::string("GET  /metrics  HTTP/1.1 x\r\n\r\n"),
        std::string("\r\n\r\n"), std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11)}) {
    EXPECT_THAT(Exchange(s->port(), junk), StartsWith("HTTP/1.1 400 Bad Request\r\n"))
        << "request: " << junk;
  }
  // A request line longer than the 8 KiB head limit: 400, or a reset when the server closes with
  // the rest of the request unread (TCP discards the answer then).
  const std::string huge =
      Exchange(s->port(), "GET /" + std::string(20000, 'a') + " HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(huge.empty() || huge.rfind("HTTP/1.1 400 Bad Request\r\n", 0) == 0) << huge;
  // Still serving.
  EXPECT_EQ(Body(Exchange(s->port(), "GET /metrics HTTP/1.1\r\n\r\n")), kMetrics);
}

TEST(MetricsHttpTest, RandomBytesAlwaysGetAnAnswerAndNeverStopTheServer) {
  auto s = Serve([] { return std::string(kMetrics); });
  ASSERT_NE(s, nullptr);
  std::mt19937 rng(7);
  const std::string seed = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
  for (int i = 0; i < 300; ++i) {
    std::string req = seed;
    const int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % req.size();
      switch (rng() % 3) {
        case 0: req[at] = static_cast<char>(rng()); break;
        case 1: req.erase(at, 1 + rng() % 4); break;
        default: req.insert(at, 1, static_cast<char>(rng())); break;
      }
      if (req.empty()) req = "x";
    }
    const std::string r = Exchange(s->port(), req);
    ASSERT_THAT(r, StartsWith("HTTP/1.1 ")) << "request " << i << ": " << req;
    const int code = std::stoi(r.substr(9, 3));
    EXPECT_TRUE(code == 200 || code == 400 || code == 404 || code == 405) << code;
  }
  EXPECT_EQ(Body(Exchange(s->port(), seed)), kMetrics);
}

TEST(MetricsHttpTest, AClientThatHangsUpDoesNotStopTheServer) {
  auto s = Serve([] { return std::string(kMetrics); });
  ASSERT_NE(s, nullptr);
  for (int i = 0; i < 5; ++i) {
    const int fd = Connect(s->port());
    ASSERT_GE(fd, 0);
    if (i % 2 == 1) (void)!write(fd, "GET /met", 8);
    close(fd);
  }
  EXPECT_EQ(Body(Exchange(s->port(), "GET /metrics HTTP/1.1\r\n\r\n")), kMetrics);
}

TEST(MetricsHttpTest, BadAddressesAreInvalidArgument) {
  for (const char* address : {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:-1",
                              "127.0.0.1:65536", "127.0.0.1:9464x", ":"}) {
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> s =
        MetricsHttpServer::Start(address, [] { return std::string(); });
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << address;
  }
}

TEST(MetricsHttpTest, ATakenPortIsUnavailable) {
  auto a = Serve([] { return std::string(kMetrics); });
  ASSERT_NE(a, nullptr);
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> b = MetricsHttpServer::Start(
      "127.0.0.1:" + std::to_string(a->port()), [] { return std::string(); });
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(b.status().message(), HasSubstr(std::to_string(a->port())));
}

TEST(MetricsHttpTest, StoppingFreesThePort) {
  int port = 0;
  {
    auto a = Serve([] { return std::string(kMetrics); });
    ASSERT_NE(a, nullptr);
    port = a->port();
  }
  EXPECT_EQ(Connect(port), -1);  // nothing listens any more
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> again =
      MetricsHttpServer::Start("127.0.0.1:" + std::to_string(port), [] { return std::string(); });
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST(MetricsHttpTest, DaemonMetricsAreServedOverHttp) {
  MetricsOptions o;
  o.address = "127.0.0.1:0";
  o.version = "9.9.9";
  o.gpu_memory_capacity_bytes = {1000};
  absl::StatusOr<std::unique_ptr<DaemonMetrics>> m = DaemonMetrics::Create(o);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_GT((*m)->port(), 0);
  (*m)->SubmitRejected("invalid_spec");
  const std::string r = Exchange((*m)->port(), "GET /metrics HTTP/1.1\r\n\r\n");
  ASSERT_THAT(r, StartsWith("HTTP/1.1 200 OK"));
  const testing::Exposition e = testing::ParseExposition(Body(r));
  EXPECT_EQ(e.error, "");
  EXPECT_EQ(e.Value("mobius_build_info", {{"version", "9.9.9"}}), 1.0);
  EXPECT_EQ(e.Value("mobius_gpu_memory_capacity_bytes", {{"gpu", "0"}}), 1000.0);
  EXPECT_EQ(e.Value("mobius_admission_rejections_total", {{"reason", "invalid_spec"}}), 1.0);

  // A second daemon on the same port cannot start.
  o.address = "127.0.0.1:" + std::to_string((*m)->port());
  EXPECT_EQ(DaemonMetrics::Create(o).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace mobius
