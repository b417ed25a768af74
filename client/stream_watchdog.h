// StreamWatchdog: keeps a CLI stream (mobius watch, logs, submit --wait) from hanging on a daemon
// that stopped answering. mobiusd sends something on WatchJob and StreamLogs at least every 10 s
// (a heartbeat when there is no news: server/rpc/job_service.cc); the watchdog cancels the call
// when nothing arrived for `idle_limit`, and reports that it did (fired()), so the verb can say
// "mobiusd sent nothing for 30s" instead of waiting forever. It also cancels the call when
// `interrupt` returns true (Ctrl-C detaching from a watch).
//
// Ownership: borrows the call's ClientContext, which must outlive the watchdog.
// Thread-safety: Alive() may be called from the reading thread while the watchdog's own thread
// polls; construct and destroy on one thread.
#ifndef MOBIUS_CLIENT_STREAM_WATCHDOG_H_
#define MOBIUS_CLIENT_STREAM_WATCHDOG_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "absl/time/time.h"
#include "grpcpp/client_context.h"

namespace mobius::cli {

class StreamWatchdog {
 public:
  // idle_limit <= 0: never times out. `interrupt` may be empty.
  StreamWatchdog(grpc::ClientContext* context, absl::Duration idle_limit,
                 std::function<bool()> interrupt = {});
  ~StreamWatchdog();  // stops the watchdog thread (does not cancel the call)

  StreamWatchdog(const StreamWatchdog&) = delete;
  StreamWatchdog& operator=(const StreamWatchdog&) = delete;

  void Alive();                          // a message arrived
  bool fired() const { return fired_; }  // the idle limit cancelled the call
  absl::Duration idle_limit() const { return idle_limit_; }

 private:
  void Run();

  grpc::ClientContext* const context_;
  const absl::Duration idle_limit_;
  const std::function<bool()> interrupt_;
  std::atomic<int64_t> last_alive_ms_;  // steady clock
  std::atomic<bool> fired_{false};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_STREAM_WATCHDOG_H_
