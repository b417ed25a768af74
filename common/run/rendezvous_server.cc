// The rendezvous server (rendezvous.h): one thread, one poll() loop, which alone owns the store
// and the connections, so nothing here needs a lock. Each connection is served one request at a
// time: while its answer is unsent or its Get/Wait is held, its further bytes are only buffered
// (up to one frame), which bounds the memory a connection can take to about two frames.
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/run/rendezvous.h"
#include "common/run/rendezvous_socket.h"
#include "common/run/rendezvous_wire.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace mobius::runtime {

using rendezvous::Clock;
using rendezvous::Code;
using rendezvous::Op;
using rendezvous::Request;
using rendezvous::Response;

namespace {

constexpr size_t kReadChunkBytes = 256 * 1024;
constexpr size_t kKeepBufferBytes = 1024 * 1024;               // larger idle buffers are given back
constexpr auto kAcceptPause = std::chrono::milliseconds(100);  // after EMFILE/ENFILE

struct Connection {
  Connection(int fd, std::string peer) : fd(fd), peer(std::move(peer)) {}
  const int fd;
  const std::string peer;  // "10.0.0.2:51234", for logs
  std::string in;          // received bytes not yet decoded
  std::string out;         // the answer being sent
  size_t out_sent = 0;
  bool closed = false;  // swept at the end of the loop iteration
  // A Get/Wait held until its key is set or its deadline passes.
  bool waiting = false;
  Op wait_op = Op::kGet;
  std::string wait_key;
  Clock::time_point wait_deadline;
};

void GiveBackIfLarge(std::string& buffer) {
  if (buffer.empty() && buffer.capacity() > kKeepBufferBytes) std::string().swap(buffer);
}

}  // namespace

class RendezvousServer::Loop {
 public:
  Loop(int listen_fd, int wake_fd) : listen_fd_(listen_fd), wake_fd_(wake_fd) {}

  ~Loop() {
    stop_.store(true);
    const uint64_t one = 1;
    if (write(wake_fd_, &one, sizeof(one)) < 0) PLOG(ERROR) << "rendezvous server: wake-up";
    if (thread_.joinable()) thread_.join();
    for (auto& c : connections_) close(c->fd);
    close(listen_fd_);
    close(wake_fd_);
  }

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }

 private:
  void Run() {
    std::vector<pollfd> fds;
    while (!stop_.load()) {
      fds.clear();
      const bool accepting = Clock::now() >= accept_paused_until_;
      fds.push_back({wake_fd_, POLLIN, 0});
      fds.push_back({listen_fd_, static_cast<short>(accepting ? POLLIN : 0), 0});
      for (const auto& c : connections_) {
        short events = POLLRDHUP;
        if (c->in.size() < rendezvous::kMaxRequestFrameBytes) events |= POLLIN;
        if (c->out_sent < c->out.size()) events |= POLLOUT;
        fds.push_back({c->fd, events, 0});
      }
      const int rc = poll(fds.data(), fds.size(), rendezvous::PollTimeoutMs(NextDeadline()));
      if (rc < 0 && errno != EINTR) {
        PLOG(ERROR) << "rendezvous server: poll";
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      if (stop_.load()) break;
      if (rc > 0) {
        if (fds[0].revents != 0) {
          uint64_t count;
          (void)!read(wake_fd_, &count, sizeof(count));
        }
        // connections_ still matches fds[2..] here: Accept() below only appends.
        for (size_t i = 0; i < connections_.size(); ++i) {
          const short revents = fds[i + 2].revents;
          if (revents & POLLIN) {
            Receive(*connections_[i]);
          } else if (revents & (POLLERR | POLLHUP | POLLRDHUP)) {
            connections_[i]->closed = true;
          }
        }
        if (fds[1].revents & POLLIN) Accept();
      }
      ExpireWaits();
      for (auto& c : connections_) Serve(*c);
      Sweep();
    }
  }

  Clock::time_point NextDeadline() const {
    Clock::time_point next = Clock::now() + std::chrono::hours(1);
    if (Clock::now() < accept_paused_until_) next = std::min(next, accept_paused_until_);
    for (const auto& c : connections_) {
      if (c->waiting) next = std::min(next, c->wait_deadline);
    }
    return next;
  }

  void Accept() {
    for (;;) {
      sockaddr_storage address{};
      socklen_t length = sizeof(address);
      const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          // Out of descriptors: the connection stays queued and the socket readable, so stop
          // polling it for a moment rather than spin.
          PLOG(WARNING) << "rendezvous server: accept";
          accept_paused_until_ = Clock::now() + kAcceptPause;
        }
        return;
      }
      std::string peer = rendezvous::PeerName(address, length);
      if (connections_.size() >= static_cast<size_t>(kMaxConnections)) {
        LOG(WARNING) << "rendezvous server: refusing the connection from " << peer << ": "
                     << kMaxConnections << " connections are open already";
        close(fd);
        continue;
      }
      rendezvous::SetNoDelay(fd);
      VLOG(1) << "rendezvous server: connection from " << peer;
      connections_.push_back(std::make_unique<Connection>(fd, std::move(peer)));
    }
  }

  // Reads what has arrived, up to one frame beyond what is buffered.
  void Receive(Connection& c) {
    while (c.in.size() < rendezvous::kMaxRequestFrameBytes) {
      const size_t old_size = c.in.size();
      c.in.resize(old_size + kReadChunkBytes);
      const ssize_t n = recv(c.fd, c.in.data() + old_size, kReadChunkBytes, 0);
      c.in.resize(old_size + std::max<ssize_t>(n, 0));
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.closed = true;  // closed by the peer (n == 0) or reset: nothing to say
      return;
    }
  }

  // Sends the pending answer, then handles buffered requests one at a time while the connection
  // is idle (no answer unsent, no Get/Wait held).
  void Serve(Connection& c) {
    while (!c.closed) {
      if (c.out_sent < c.out.size()) {
        const ssize_t n =
            send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
        if (n > 0) {
          c.out_sent += n;
          continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        c.closed = true;  // the peer went away mid-answer
        return;
      }
      c.out.clear();
      c.out_sent = 0;
      GiveBackIfLarge(c.out);
      if (c.waiting) return;
      size_t consumed = 0;
      absl::StatusOr<std::optional<Request>> request =
          rendezvous::DecodeRequest(c.in.data(), c.in.size(), &consumed);
      if (!request.ok()) {
        LOG(WARNING) << "rendezvous server: closing the connection from " << c.peer << ": "
                     << request.status().message();
        c.closed = true;
        return;
      }
      if (!request->has_value()) return;
      c.in.erase(0, consumed);
      GiveBackIfLarge(c.in);
      Handle(c, std::move(**request));
    }
  }

  void Handle(Connection& c, Request request) {
    auto found = store_.find(request.key);
    switch (request.op) {
      case Op::kSet:
        store_[request.key] = std::move(request.value);
        Answer(c, {Code::kOk, "", 0});
        Release(request.key);
        return;
      case Op::kTryGet:
        if (found == store_.end()) return Answer(c, {Code::kNotFound, "", 0});
        return Answer(c, {Code::kOk, found->second, 0});
      case Op::kGet:
      case Op::kWait:
        if (found != store_.end()) {
          return Answer(c, {Code::kOk, request.op == Op::kGet ? found->second : "", 0});
        }
        if (request.number == 0) return Answer(c, {Code::kTimedOut, "", 0});
        c.waiting = true;
        c.wait_op = request.op;
        c.wait_key = std::move(request.key);
        c.wait_deadline = rendezvous::DeadlineAfterMs(request.number);
        return;
      case Op::kAdd:
        return Add(c, request.key, request.number);
    }
  }

  void Add(Connection& c, const std::string& key, int64_t delta) {
    int64_t count = 0;
    auto found = store_.find(key);
    if (found != store_.end() && !absl::SimpleAtoi(found->second, &count)) {
      return Answer(c, {Code::kError,
                        absl::StrCat("key '", key, "' holds ", found->second.size(),
                                     " bytes that are not an integer counter"),
                        0});
    }
    if (__builtin_add_overflow(count, delta, &count)) {
      return Answer(c,
                    {Code::kError,
                     absl::StrCat("adding ", delta, " to counter '", key, "' overflows int64"), 0});
    }
    store_[key] = absl::StrCat(count);
    Answer(c, {Code::kOk, "", count});
    Release(key);
  }

  // Answers every Get/Wait held for `key` (its value is in the store now).
  void Release(const std::string& key) {
    const std::string& value = store_.at(key);
    for (auto& w : connections_) {
      if (w->closed || !w->waiting || w->wait_key != key) continue;
      w->waiting = false;
      Answer(*w, {Code::kOk, w->wait_op == Op::kGet ? value : "", 0});
    }
  }

  void ExpireWaits() {
    const Clock::time_point now = Clock::now();
    for (auto& c : connections_) {
      if (c->closed || !c->waiting || now < c->wait_deadline) continue;
      c->waiting = false;
      Answer(*c, {Code::kTimedOut, "", 0});
    }
  }

  // REQUIRES: no answer pending on `c` (one request at a time).
  static void Answer(Connection& c, const Response& response) {
    c.out = rendezvous::EncodeResponse(response);
    c.out_sent = 0;
  }

  void Sweep() {
    auto gone = std::remove_if(connections_.begin(), connections_.end(), [](const auto& c) {
      if (!c->closed) return false;
      VLOG(1) << "rendezvous server: connection from " << c->peer << " closed";
      close(c->fd);
      return true;
    });
    connections_.erase(gone, connections_.end());
  }

  const int listen_fd_;
  const int wake_fd_;  // an eventfd: the destructor's wake-up
  std::atomic<bool> stop_{false};
  std::thread thread_;
  // Owned by the loop thread (the destructor touches them only after joining it).
  std::vector<std::unique_ptr<Connection>> connections_;
  absl::flat_hash_map<std::string, std::string> store_;
  Clock::time_point accept_paused_until_;
};

absl::StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(const std::string& host,
                                                                          int port) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous server: port ", port, " is not in 0..65535"));
  }
  MOBIUS_ASSIGN_OR_RETURN(const int listen_fd, rendezvous::Listen(host, port));
  absl::StatusOr<int> bound = rendezvous::LocalPort(listen_fd);
  const int wake_fd = bound.ok() ? eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) : -1;
  if (!bound.ok() || wake_fd < 0) {
    absl::Status error =
        bound.ok() ? MOBIUS_ERRNO_ERROR("rendezvous server: eventfd") : bound.status();
    close(listen_fd);
    return error;
  }
  auto loop = std::make_unique<Loop>(listen_fd, wake_fd);
  loop->Start();
  LOG(INFO) << "rendezvous server listening on "
            << FormatHostPort(host.empty() ? "0.0.0.0" : host, *bound);
  return std::unique_ptr<RendezvousServer>(new RendezvousServer(*bound, std::move(loop)));
}

RendezvousServer::RendezvousServer(int port, std::unique_ptr<Loop> loop)
    : port_(port), loop_(std::move(loop)) {}

RendezvousServer::~RendezvousServer() = default;

}  // namespace mobius::runtime
