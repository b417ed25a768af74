// MetricsHttpServer: serves GET /metrics (Prometheus text format 0.0.4) on a TCP address.
//
// Why not prometheus-cpp's Exposer: it runs civetweb, whose threads are created with a fixed
// ~100 KiB stack, and glibc refuses to start a thread whose stack cannot hold the process's static
// TLS. mobiusd's static TLS is ~92 KiB (OpenBLAS, reached through COIN-OR CBC's LAPACK, plus glog),
// so every civetweb thread fails ("Cannot create first worker thread"). This server uses one thread
// with the default stack; the metrics themselves still come from prometheus-cpp (registry and text
// serializer).
//
// One scrape at a time (Prometheus scrapes sequentially); each connection gets a 5 s read timeout,
// so a stalled client cannot block the next scrape for long. GET/HEAD /metrics -> 200; other paths
// -> 404; other methods -> 405; malformed requests -> 400.
//
// Thread-safety: `render` is called on the server's thread.
#ifndef MOBIUS_SERVER_METRICS_METRICS_HTTP_H_
#define MOBIUS_SERVER_METRICS_METRICS_HTTP_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace mobius {

class MetricsHttpServer {
 public:
  // `address` is "host:port" (IPv4 dotted or a host name; port 0 picks a free port).
  // INVALID_ARGUMENT for a malformed address, UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& address, std::function<std::string()> render);
  ~MetricsHttpServer();  // stops the thread and closes the socket

  int port() const { return port_; }

 private:
  MetricsHttpServer(int fd, int port, std::function<std::string()> render);
  void Loop();
  void Serve(int conn);

  int fd_;
  int port_;
  int wake_[2] = {-1, -1};
  std::function<std::string()> render_;
  std::thread thread_;
};

}  // namespace mobius

#endif  // MOBIUS_SERVER_METRICS_METRICS_HTTP_H_
