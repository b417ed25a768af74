// The rendezvous store of a multi-node job: a small TCP key-value store, like PyTorch's TCPStore.
// Node 0's `mobius run` hosts the RendezvousServer at MOBIUS_RENDEZVOUS=HOST:PORT; every worker
// process of every node (behind a gloo::rendezvous::Store adapter, for Gloo's address exchange)
// and every node's `mobius run` (spec checks, failure broadcast) reach it with a
// RendezvousClient. Keys are 1..1024 bytes, values 0..16 MiB (rendezvous_wire.h); keys are never
// deleted, so a key once seen stays.
//
// The store trusts its network: anyone who can reach the port can read and write every key. Bind
// it to the job's network and keep secrets out of it.
//
// Errors: a client whose server went away gets UNAVAILABLE "rendezvous HOST:PORT closed the
// connection" from that call and every later one, promptly; DEADLINE_EXCEEDED names the key that
// did not appear; a connection that breaks the protocol is closed by the other side (the server
// logs the peer at WARNING and keeps serving everyone else). A server that stops answering
// without closing (its host gone from the network) is given up 30 s past the call's own timeout:
// DEADLINE_EXCEEDED, and the client is broken from then on (every call returns that error).
#ifndef MOBIUS_COMMON_RUN_RENDEZVOUS_H_
#define MOBIUS_COMMON_RUN_RENDEZVOUS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace mobius::runtime {

namespace rendezvous {
struct Request;   // rendezvous_wire.h
struct Response;  // rendezvous_wire.h
}  // namespace rendezvous

// MOBIUS_RENDEZVOUS_TOKEN: an optional secret shared by a multi-node job's processes through their
// environment (never a file or the run config). Every key the job reads or writes lives under it
// (RendezvousKeyPrefix), and the store has no way to list keys, so another user who can reach the
// port but not the job's environment can neither read nor write the job's keys. 1..256 bytes of
// [A-Za-z0-9._-]; empty or unset: no secret (anyone who can reach the port can).
inline constexpr char kRendezvousTokenVariable[] = "MOBIUS_RENDEZVOUS_TOKEN";
// "<token>/<job_key>/" (or "<job_key>/" without a token); INVALID_ARGUMENT naming the variable for
// a token that is too long or has other characters.
absl::StatusOr<std::string> RendezvousKeyPrefix(absl::string_view token, absl::string_view job_key);

struct HostPort {
  std::string host;  // a name, an IPv4 address or an IPv6 address (without brackets)
  int port = 0;      // 1..65535
};

// Parses "node1:29560", "10.0.0.1:29560" or "[::1]:29560" (an IPv6 address needs its brackets).
// INVALID_ARGUMENT quoting the text and saying what is wrong: a missing port, a port that is not
// a number in 1..65535, an empty host, unbracketed IPv6.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text);

// "host:port", with brackets around an IPv6 host: what ParseHostPort reads back.
std::string FormatHostPort(absl::string_view host, int port);

// The server: one thread running a poll loop that owns the store and every connection. A blocked
// Get/Wait is held on the server (no polling over the network) until its key is set or its
// timeout passes. At most kMaxConnections connections; further ones are accepted, logged at
// WARNING and closed.
//
// Thread-safety: port() from any thread; the destructor from one thread, once.
class RendezvousServer {
 public:
  static constexpr int kMaxConnections = 1024;

  // Listens on host:port. Host "" or "0.0.0.0" = every IPv4 interface, "::" = every IPv6 one, a
  // name is resolved (the first address that binds; beware a node's own name resolving to
  // 127.0.1.1, as Debian's /etc/hosts does: "" is what node 0 wants); port 0 = any free port
  // (see port()).
  // SO_REUSEADDR. Errors name the address and the errno text: a port in use is UNAVAILABLE
  // "... port 29560 is in use ...", a name that does not resolve NOT_FOUND.
  static absl::StatusOr<std::unique_ptr<RendezvousServer>> Start(const std::string& host, int port);

  // The port listened on (the chosen one when Start was given 0).
  int port() const { return port_; }

  // Stops accepting, closes every connection (blocked clients get UNAVAILABLE at once) and joins
  // the loop thread.
  ~RendezvousServer();

  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

 private:
  class Loop;  // rendezvous_server.cc
  RendezvousServer(int port, std::unique_ptr<Loop> loop);

  const int port_;
  std::unique_ptr<Loop> loop_;
};

// A connection to the server. Each call sends one request and waits for its answer.
//
// Thread-safety: any thread, one request at a time per client (an internal mutex serialises
// them), so a Get blocked in one thread delays every other call on the same client: use a second
// client for a watcher thread. Shutdown() may be called from any thread at any time; the
// destructor only when no call is in progress.
class RendezvousClient {
 public:
  // Connects to host:port, retrying every ~100 ms until `timeout` passes (the server may start
  // after its clients; a name that does not resolve yet is retried too). DEADLINE_EXCEEDED "no
  // rendezvous at HOST:PORT after N s (is node 0 running? ...)" with the last error;
  // INVALID_ARGUMENT for an empty host or a port outside 1..65535.
  static absl::StatusOr<std::unique_ptr<RendezvousClient>> Connect(const std::string& host,
                                                                   int port,
                                                                   absl::Duration timeout);
  ~RendezvousClient();

  RendezvousClient(const RendezvousClient&) = delete;
  RendezvousClient& operator=(const RendezvousClient&) = delete;

  // Sets `key` to `value`, overwriting it, and releases every Get/Wait blocked on it.
  // INVALID_ARGUMENT for an empty or oversized key or an oversized value (nothing is sent).
  absl::Status Set(const std::string& key, const std::string& value);

  // The value of `key`, blocking until it exists; DEADLINE_EXCEEDED naming the key after
  // `timeout` (InfiniteDuration() waits forever; a timeout is capped at 365 days).
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout);

  // The value of `key` now, or std::nullopt when it does not exist.
  absl::StatusOr<std::optional<std::string>> TryGet(const std::string& key);

  // Blocks until every key exists; DEADLINE_EXCEEDED naming the first missing key (in the order
  // given) when `timeout` passes first.
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout);

  // Atomically adds `delta` to the integer counter `key` (missing = 0; stored as decimal text,
  // so Get returns e.g. "800") and returns the new value. FAILED_PRECONDITION when the key holds
  // something else than an int64 or the sum would overflow.
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);

  // Makes a call blocked in another thread return CANCELLED promptly (shutdown(2) of the
  // socket), and every later call too: the client is unusable afterwards.
  void Shutdown();

 private:
  RendezvousClient(int fd, std::string address);

  // Sends `request` and reads its answer, both before `deadline`. An error here (the connection
  // lost, or no answer in time so that a late one would be taken for the next) breaks the client:
  // every later call returns the same error. `what` names the request in errors ("get 'k'").
  absl::StatusOr<rendezvous::Response> Call(const rendezvous::Request& request,
                                            std::chrono::steady_clock::time_point deadline,
                                            absl::string_view what);
  absl::Status SendFrame(const std::string& frame, std::chrono::steady_clock::time_point deadline,
                         absl::string_view what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<rendezvous::Response> ReceiveAnswer(std::chrono::steady_clock::time_point deadline,
                                                     absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The error for a connection that ended (errno `error_number`, or 0 for an orderly close):
  // CANCELLED after Shutdown(), UNAVAILABLE otherwise.
  absl::Status Lost(int error_number) const;

  const int fd_;
  const std::string address_;  // HOST:PORT, for messages
  std::atomic<bool> shut_down_{false};
  absl::Mutex mu_;
  std::string inbox_ ABSL_GUARDED_BY(mu_);    // bytes received past the last answer (none expected)
  absl::Status broken_ ABSL_GUARDED_BY(mu_);  // set once the connection is lost or out of step
};

}  // namespace mobius::runtime

#endif  // MOBIUS_COMMON_RUN_RENDEZVOUS_H_
