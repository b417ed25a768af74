// Internal to the rendezvous store (rendezvous.h): the POSIX socket calls its server and client
// share, with errno turned into absl::Status naming the address, and monotonic deadlines.
// Every socket made here is non-blocking and close-on-exec; callers wait with poll().
//
// Thread-safety: functions of their arguments.
#ifndef MOBIUS_COMMON_RUN_RENDEZVOUS_SOCKET_H_
#define MOBIUS_COMMON_RUN_RENDEZVOUS_SOCKET_H_

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mobius::runtime::rendezvous {

using Clock = std::chrono::steady_clock;

// Longer timeouts are cut to this (a year: longer than any job, far from clock overflow).
inline constexpr int64_t kMaxTimeoutMs = int64_t{365} * 24 * 3600 * 1000;

// `timeout` in whole milliseconds, clamped to 0..kMaxTimeoutMs (InfiniteDuration() = the max).
int64_t TimeoutMs(absl::Duration timeout);

// Now + timeout_ms (clamped as above) on the monotonic clock.
Clock::time_point DeadlineAfterMs(int64_t timeout_ms);

// Milliseconds from now to `deadline` for poll(): 0 when it has passed, rounded up, at most an
// hour (callers loop).
int PollTimeoutMs(Clock::time_point deadline);

// Waits until `fd` has any of `events` (POLLIN/POLLOUT) or an error/hang-up, or until `deadline`.
// Returns false on timeout; EINTR is retried.
bool WaitFor(int fd, short events, Clock::time_point deadline);

// A listening socket on host:port ("" = every IPv4 interface; SO_REUSEADDR). Errors name the
// address: UNAVAILABLE "port N is in use", NOT_FOUND for a name that does not resolve.
absl::StatusOr<int> Listen(const std::string& host, int port);

// The local port of a bound socket.
absl::StatusOr<int> LocalPort(int fd);

// One attempt to connect to each address of host:port in turn, each before `deadline`; the
// connected socket (TCP_NODELAY) or the last error (naming the address).
absl::StatusOr<int> ConnectOnce(const std::string& host, int port, Clock::time_point deadline);

// "10.0.0.2:51234" / "[::1]:51234" for logs.
std::string PeerName(const sockaddr_storage& address, socklen_t length);

// Disables Nagle's algorithm: every frame is one request or one answer, sent whole.
void SetNoDelay(int fd);

}  // namespace mobius::runtime::rendezvous

#endif  // MOBIUS_COMMON_RUN_RENDEZVOUS_SOCKET_H_
