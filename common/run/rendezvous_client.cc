// The rendezvous client (rendezvous.h). The socket is non-blocking and every wait is a poll()
// with the request's deadline, so a call never hangs past it; shutdown(2) from Shutdown() wakes
// such a poll at once.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/run/rendezvous.h"
#include "common/run/rendezvous_socket.h"
#include "common/run/rendezvous_wire.h"
#include "common/status_macros.h"

namespace mobius::runtime {

using rendezvous::Clock;
using rendezvous::Code;
using rendezvous::Op;
using rendezvous::Request;
using rendezvous::Response;

namespace {

constexpr auto kRetryInterval = std::chrono::milliseconds(100);
constexpr auto kConnectAttempt = std::chrono::seconds(5);  // one address's SYN, at most
// How long past a request's own timeout the client waits for the server's answer (a 16 MiB
// value over a slow link included) before it gives the connection up.
constexpr int64_t kAnswerGraceMs = 30 * 1000;
constexpr size_t kReadChunkBytes = 256 * 1024;

std::string Seconds(absl::Duration d) { return absl::StrFormat("%g s", absl::ToDoubleSeconds(d)); }

absl::Status CheckKey(const std::string& key) {
  if (key.empty()) return absl::InvalidArgumentError("rendezvous: empty key");
  if (key.size() > rendezvous::kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous: key '", key.substr(0, 64),
                                                   "...' of ", key.size(), " bytes (the limit is ",
                                                   rendezvous::kMaxKeyBytes, ")"));
  }
  return absl::OkStatus();
}

// An answer the protocol does not give to this request (a server of another version?).
absl::Status Unexpected(absl::string_view address, const Response& answer, absl::string_view what) {
  return absl::InternalError(absl::StrCat("rendezvous ", address, ": unexpected answer code ",
                                          static_cast<int>(answer.code), " to ", what));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RendezvousClient>> RendezvousClient::Connect(
    const std::string& host, int port, absl::Duration timeout) {
  const std::string address = FormatHostPort(host, port);
  if (host.empty() || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous address '", address, "': needs a host and a port in 1..65535"));
  }
  const Clock::time_point deadline = rendezvous::DeadlineAfterMs(rendezvous::TimeoutMs(timeout));
  absl::Status last;
  for (;;) {
    const Clock::time_point attempt_deadline = std::min(deadline, Clock::now() + kConnectAttempt);
    absl::StatusOr<int> fd = rendezvous::ConnectOnce(host, port, attempt_deadline);
    if (fd.ok()) return std::unique_ptr<RendezvousClient>(new RendezvousClient(*fd, address));
    last = fd.status();
    const Clock::time_point now = Clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(kRetryInterval, deadline - now));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "no rendezvous at ", address, " after ", Seconds(timeout),
      " (is node 0 running `mobius run`, is MOBIUS_RENDEZVOUS the same on every node, is the port "
      "reachable through the firewall?); last error: ",
      last.message()));
}

RendezvousClient::RendezvousClient(int fd, std::string address)
    : fd_(fd), address_(std::move(address)) {}

RendezvousClient::~RendezvousClient() { close(fd_); }

void RendezvousClient::Shutdown() {
  shut_down_.store(true);
  shutdown(fd_, SHUT_RDWR);
}

absl::Status RendezvousClient::Lost(int error_number) const {
  if (shut_down_.load()) {
    return absl::CancelledError(absl::StrCat("rendezvous client of ", address_, " was shut down"));
  }
  std::string message = absl::StrCat("rendezvous ", address_, " closed the connection");
  if (error_number != 0) absl::StrAppend(&message, " (", strerror(error_number), ")");
  return absl::UnavailableError(message);
}

absl::Status RendezvousClient::SendFrame(const std::string& frame, Clock::time_point deadline,
                                         absl::string_view what) {
  size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t n = send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!rendezvous::WaitFor(fd_, POLLOUT, deadline)) {
        return absl::DeadlineExceededError(absl::StrCat(
            "rendezvous ", address_, " did not take the request (", what, ") in time"));
      }
      continue;
    }
    return Lost(errno);
  }
  return absl::OkStatus();
}

absl::StatusOr<Response> RendezvousClient::ReceiveAnswer(Clock::time_point deadline,
                                                         absl::string_view what) {
  for (;;) {
    size_t consumed = 0;
    absl::StatusOr<std::optional<Response>> answer =
        rendezvous::DecodeResponse(inbox_.data(), inbox_.size(), &consumed);
    if (!answer.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "rendezvous ", address_, " sent a malformed answer: ", answer.status().message()));
    }
    if (answer->has_value()) {
      inbox_.erase(0, consumed);
      return std::move(**answer);
    }
    if (!rendezvous::WaitFor(fd_, POLLIN, deadline)) {
      return absl::DeadlineExceededError(
          absl::StrCat("rendezvous ", address_, " did not answer (", what, ") in time"));
    }
    const size_t old_size = inbox_.size();
    inbox_.resize(old_size + kReadChunkBytes);
    const ssize_t n = recv(fd_, inbox_.data() + old_size, kReadChunkBytes, 0);
    const int error_number = errno;
    inbox_.resize(old_size + std::max<ssize_t>(n, 0));
    if (n > 0) continue;
    if (n < 0 && (error_number == EINTR || error_number == EAGAIN || error_number == EWOULDBLOCK)) {
      continue;
    }
    return Lost(n == 0 ? 0 : error_number);
  }
}

absl::StatusOr<Response> RendezvousClient::Call(const Request& request, Clock::time_point deadline,
                                                absl::string_view what) {
  absl::MutexLock lock(&mu_);
  if (shut_down_.load()) return Lost(0);
  if (!broken_.ok()) return broken_;
  absl::Status sent = SendFrame(rendezvous::EncodeRequest(request), deadline, what);
  absl::StatusOr<Response> answer =
      sent.ok() ? ReceiveAnswer(deadline, what) : absl::StatusOr<Response>(sent);
  if (!answer.ok()) {
    // Lost, or out of step with the server (a late answer would be read as the next one's).
    broken_ = answer.status();
    return answer.status();
  }
  if (answer->code == Code::kError) {
    return absl::FailedPreconditionError(
        absl::StrCat("rendezvous ", address_, ": ", what, ": ", answer->value));
  }
  return answer;
}

absl::Status RendezvousClient::Set(const std::string& key, const std::string& value) {
  MOBIUS_RETURN_IF_ERROR(CheckKey(key));
  if (value.size() > rendezvous::kMaxValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous: value of key '", key, "' has ",
                                                   value.size(), " bytes (the limit is ",
                                                   rendezvous::kMaxValueBytes, ")"));
  }
  const std::string what = absl::StrCat("set '", key, "'");
  MOBIUS_ASSIGN_OR_RETURN(Response answer, Call({Op::kSet, key, value, 0},
                                                rendezvous::DeadlineAfterMs(kAnswerGraceMs), what));
  if (answer.code != Code::kOk) {
    return Unexpected(address_, answer, what);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RendezvousClient::Get(const std::string& key, absl::Duration timeout) {
  MOBIUS_RETURN_IF_ERROR(CheckKey(key));
  const int64_t timeout_ms = rendezvous::TimeoutMs(timeout);
  const std::string what = absl::StrCat("get '", key, "'");
  MOBIUS_ASSIGN_OR_RETURN(Response answer,
                          Call({Op::kGet, key, "", timeout_ms},
                               rendezvous::DeadlineAfterMs(timeout_ms + kAnswerGraceMs), what));
  if (answer.code == Code::kTimedOut) {
    return absl::DeadlineExceededError(absl::StrCat("rendezvous ", address_, ": key '", key,
                                                    "' was not set within ", Seconds(timeout)));
  }
  if (answer.code != Code::kOk) {
    return Unexpected(address_, answer, what);
  }
  return std::move(answer.value);
}

absl::StatusOr<std::optional<std::string>> RendezvousClient::TryGet(const std::string& key) {
  MOBIUS_RETURN_IF_ERROR(CheckKey(key));
  const std::string what = absl::StrCat("try-get '", key, "'");
  MOBIUS_ASSIGN_OR_RETURN(Response answer, Call({Op::kTryGet, key, "", 0},
                                                rendezvous::DeadlineAfterMs(kAnswerGraceMs), what));
  if (answer.code == Code::kNotFound) return std::optional<std::string>();
  if (answer.code != Code::kOk) {
    return Unexpected(address_, answer, what);
  }
  return std::optional<std::string>(std::move(answer.value));
}

absl::Status RendezvousClient::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  for (const std::string& key : keys) MOBIUS_RETURN_IF_ERROR(CheckKey(key));
  // Keys are never deleted, so waiting for them one after the other with what is left of the
  // timeout is waiting for all of them.
  const Clock::time_point deadline = rendezvous::DeadlineAfterMs(rendezvous::TimeoutMs(timeout));
  for (size_t i = 0; i < keys.size(); ++i) {
    const int64_t left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::max(deadline - Clock::now(), Clock::duration::zero()))
                                .count();
    const std::string what = absl::StrCat("wait '", keys[i], "'");
    MOBIUS_ASSIGN_OR_RETURN(Response answer,
                            Call({Op::kWait, keys[i], "", left_ms},
                                 rendezvous::DeadlineAfterMs(left_ms + kAnswerGraceMs), what));
    if (answer.code == Code::kTimedOut) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rendezvous ", address_, ": key '", keys[i], "' was not set within ", Seconds(timeout),
          " (waiting for ", keys.size(), " keys; the first ", i, " were there)"));
    }
    if (answer.code != Code::kOk) {
      return Unexpected(address_, answer, what);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> RendezvousClient::Add(const std::string& key, int64_t delta) {
  MOBIUS_RETURN_IF_ERROR(CheckKey(key));
  const std::string what = absl::StrCat("add to '", key, "'");
  MOBIUS_ASSIGN_OR_RETURN(Response answer, Call({Op::kAdd, key, "", delta},
                                                rendezvous::DeadlineAfterMs(kAnswerGraceMs), what));
  if (answer.code != Code::kOk) {
    return Unexpected(address_, answer, what);
  }
  return answer.number;
}

}  // namespace mobius::runtime
