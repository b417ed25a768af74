// NodeRun (client/node_run.h): node 0's rendezvous store, the failure broadcast, the silent-node
// diagnosis and node 0's disappearance, with "nodes" as objects of this process on loopback.
#include "client/node_run.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius::cli {
namespace {

using ::testing::HasSubstr;

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

NodeRunOptions Options(int nodes, int rank, int port, const std::string& key) {
  return {.nodes = nodes,
          .node_rank = rank,
          .rendezvous_host = "127.0.0.1",
          .rendezvous_port = port,
          .job_key = key,
          .timeout = absl::Seconds(5)};
}

// What a node's on_peer_failure saw.
struct Seen {
  std::mutex mu;
  std::string why;
  std::atomic<bool> called{false};
  std::function<void(const std::string&)> Callback() {
    return [this](const std::string& w) {
      std::lock_guard<std::mutex> lock(mu);
      why = w;
      called = true;
    };
  }
  bool WaitFor(std::chrono::milliseconds d) {
    const auto end = std::chrono::steady_clock::now() + d;
    while (!called && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return called;
  }
};

TEST(NodeRun, AFailureIsBroadcastToTheOtherNodesAndNamesTheSilentOne) {
  const int port = FreePort();
  Seen s0, s1, s2;
  absl::StatusOr<std::unique_ptr<NodeRun>> n0 =
      NodeRun::Start(Options(3, 0, port, "j"), s0.Callback());
  ASSERT_TRUE(n0.ok()) << n0.status();
  EXPECT_EQ((*n0)->port(), port);
  absl::StatusOr<std::unique_ptr<NodeRun>> n1 =
      NodeRun::Start(Options(3, 1, port, "j"), s1.Callback());
  absl::StatusOr<std::unique_ptr<NodeRun>> n2 =
      NodeRun::Start(Options(3, 2, port, "j"), s2.Callback());
  ASSERT_TRUE(n1.ok() && n2.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // everyone has beaten
  n2->reset();  // node 2 "dies": no outcome, no more heartbeats
  const std::string silent = (*n1)->Finish(absl::InternalError("rank 0: the all-reduce failed"));
  EXPECT_THAT(silent, HasSubstr("node 2 stopped responding"));
  EXPECT_THAT(silent, ::testing::Not(HasSubstr("node 0")));  // alive: it beats
  ASSERT_TRUE(s0.WaitFor(std::chrono::seconds(5)));
  {
    std::lock_guard<std::mutex> lock(s0.mu);
    EXPECT_THAT(s0.why, HasSubstr("node 1 failed (node 2 stopped responding"));
    EXPECT_THAT(s0.why, HasSubstr("rank 0: the all-reduce failed"));
  }
  EXPECT_FALSE(s1.called);  // its own failure is not a peer's
  EXPECT_EQ((*n0)->Finish(absl::CancelledError("stopped")),
            "node 2 stopped responding (no heartbeat for 2.5s and no outcome): the likely cause");
}

TEST(NodeRun, Node0GoingAwayStopsTheOthers) {
  const int port = FreePort();
  Seen s0, s1;
  absl::StatusOr<std::unique_ptr<NodeRun>> n0 =
      NodeRun::Start(Options(2, 0, port, "k"), s0.Callback());
  absl::StatusOr<std::unique_ptr<NodeRun>> n1 =
      NodeRun::Start(Options(2, 1, port, "k"), s1.Callback());
  ASSERT_TRUE(n0.ok() && n1.ok());
  n0->reset();  // node 0's process (and its store) is gone
  ASSERT_TRUE(s1.WaitFor(std::chrono::seconds(5)));
  std::lock_guard<std::mutex> lock(s1.mu);
  EXPECT_THAT(s1.why, HasSubstr("node 0 (the rendezvous host 127.0.0.1:"));
  EXPECT_THAT(s1.why, HasSubstr("is gone"));
}

TEST(NodeRun, SuccessEverywhereReportsNothing) {
  const int port = FreePort();
  Seen s0, s1;
  absl::StatusOr<std::unique_ptr<NodeRun>> n0 =
      NodeRun::Start(Options(2, 0, port, "m"), s0.Callback());
  absl::StatusOr<std::unique_ptr<NodeRun>> n1 =
      NodeRun::Start(Options(2, 1, port, "m"), s1.Callback());
  ASSERT_TRUE(n0.ok() && n1.ok());
  std::thread later([&] { EXPECT_EQ((*n1)->Finish(absl::OkStatus()), ""); });
  EXPECT_EQ((*n0)->Finish(absl::OkStatus()), "");  // waits for node 1's outcome
  later.join();
  n0->reset();  // node 1 finished: the store going away is not a failure
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_FALSE(s0.called);
  EXPECT_FALSE(s1.called);
}

TEST(NodeRun, ATakenPortAndAMissingNode0AreClearErrors) {
  const int port = FreePort();
  Seen s;
  absl::StatusOr<std::unique_ptr<NodeRun>> n0 =
      NodeRun::Start(Options(2, 0, port, "p"), s.Callback());
  ASSERT_TRUE(n0.ok());
  absl::StatusOr<std::unique_ptr<NodeRun>> again =
      NodeRun::Start(Options(2, 0, port, "p"), s.Callback());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(again.status().message(), HasSubstr("node 0 cannot host the rendezvous on port"));
  NodeRunOptions o = Options(2, 1, FreePort(), "q");
  o.timeout = absl::Milliseconds(500);
  absl::StatusOr<std::unique_ptr<NodeRun>> lonely = NodeRun::Start(o, s.Callback());
  EXPECT_EQ(lonely.status().code(), absl::StatusCode::kDeadlineExceeded) << lonely.status();
  EXPECT_THAT(lonely.status().message(), HasSubstr("node 1: no rendezvous at"));
}

}  // namespace
}  // namespace mobius::cli
