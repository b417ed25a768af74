// NodeCollective (worker/runtime/node_collective.h): the cross-node all-reduce on Gloo over
// loopback, with "nodes" as threads of this process and a real rendezvous store on a real socket.
#include "worker/runtime/node_collective.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/run/rendezvous.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius::runtime {
namespace {

using ::testing::HasSubstr;

RunConfig NodeConfig(int nodes, int node, int port, const std::string& key) {
  RunConfig c;
  c.job_id = "j-1";
  c.num_workers = 1;
  c.training.batch = 8;
  c.training.microbatch = 2;
  c.nodes.count = nodes;
  c.nodes.rank = node;
  c.nodes.rendezvous = absl::StrCat("127.0.0.1:", port);
  c.nodes.job_key = key;
  c.nodes.timeout_seconds = 5;
  c.nodes.bucket_bytes = 64 << 10;  // 16 Ki floats: a 100 Ki-float array is 7 buckets
  return c;
}

// Each node's input: values whose float sums depend on the order of the additions.
std::vector<float> Input(int node, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = std::sin(0.37f * static_cast<float>(i) + node) * std::pow(10.0f, (i + node) % 7 - 3.0f);
  }
  return v;
}

// Runs `body(node)` on `nodes` threads, each with its own NodeCollective.
std::vector<absl::Status> OnNodes(int nodes, const std::function<RunConfig(int)>& config,
                                  const std::function<absl::Status(NodeCollective&, int)>& body) {
  std::vector<absl::Status> result(nodes);
  std::vector<std::thread> threads;
  for (int n = 0; n < nodes; ++n) {
    threads.emplace_back([&, n] {
      absl::StatusOr<std::unique_ptr<NodeCollective>> c =
          NodeCollective::Connect(config(n), /*rank=*/0, /*start_step=*/0, nullptr, nullptr);
      result[n] = c.ok() ? body(**c, n) : c.status();
    });
  }
  for (std::thread& t : threads) t.join();
  return result;
}

class NodeCollectiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RendezvousServer>> s = RendezvousServer::Start("127.0.0.1", 0);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }
  int port() const { return server_->port(); }
  std::unique_ptr<RendezvousServer> server_;
};

TEST_F(NodeCollectiveTest, SumsOverTwoAndThreeNodesWithTheSameBitsOnEveryNodeAndEveryRun) {
  const size_t n = 100 * 1024 + 3;
  for (int nodes : {2, 3}) {
    std::vector<std::vector<float>> first;
    for (int run = 0; run < 2; ++run) {
      std::vector<std::vector<float>> out(nodes);
      const std::string key = absl::StrCat("sum-", nodes, "-", run);
      std::vector<absl::Status> st = OnNodes(
          nodes, [&](int node) { return NodeConfig(nodes, node, port(), key); },
          [&](NodeCollective& c, int node) {
            out[node] = Input(node, n);
            EXPECT_EQ(c.nodes(), nodes);
            EXPECT_EQ(c.node(), node);
            absl::Status s = c.AllReduceSum(out[node].data(), n);
            EXPECT_EQ(c.sent_bytes(), [&] {  // the ring's 2(N-1)/N per bucket
              uint64_t sent = 0;
              for (size_t b = 0; b < n; b += 16384) {
                const uint64_t bytes = 4 * std::min<size_t>(16384, n - b);
                sent += 2 * (nodes - 1) * bytes / nodes;
              }
              return sent;
            }());
            return s;
          });
      for (int node = 0; node < nodes; ++node) ASSERT_TRUE(st[node].ok()) << st[node];
      // The sum, to float rounding of a few additions.
      for (size_t i = 0; i < n; i += 997) {
        double expect = 0;
        for (int node = 0; node < nodes; ++node) expect += Input(node, n)[i];
        EXPECT_NEAR(out[0][i], expect, 1e-6 * std::abs(expect) + 1e-30) << i;
      }
      // Every node holds the same bits.
      for (int node = 1; node < nodes; ++node) {
        ASSERT_EQ(std::memcmp(out[0].data(), out[node].data(), 4 * n), 0) << "node " << node;
      }
      if (run == 0) {
        first = out;
      } else {  // the same bits as the first run: a fixed reduction order
        ASSERT_EQ(std::memcmp(first[0].data(), out[0].data(), 4 * n), 0);
      }
    }
  }
}

TEST_F(NodeCollectiveTest, ControlSumAndMax) {
  std::vector<double> sums(3);
  std::vector<uint32_t> maxima(3);
  std::vector<absl::Status> st = OnNodes(
      3, [&](int node) { return NodeConfig(3, node, port(), "control"); },
      [&](NodeCollective& c, int node) -> absl::Status {
        absl::StatusOr<double> s = c.SumDouble(0.25 * (node + 1));
        if (!s.ok()) return s.status();
        sums[node] = *s;
        absl::StatusOr<uint32_t> m = c.MaxUint32(node == 1 ? 1u : 0u);
        if (!m.ok()) return m.status();
        maxima[node] = *m;
        return absl::OkStatus();
      });
  for (int node = 0; node < 3; ++node) {
    ASSERT_TRUE(st[node].ok()) << st[node];
    EXPECT_EQ(sums[node], 1.5);
    EXPECT_EQ(maxima[node], 1u);
  }
}

TEST_F(NodeCollectiveTest, ADifferentRunConfigOnAnotherNodeIsRefusedNamingBothNodes) {
  std::vector<absl::Status> st = OnNodes(
      2,
      [&](int node) {
        RunConfig c = NodeConfig(2, node, port(), "differ");
        if (node == 1) c.training.lr = 2e-4;  // another spec
        return c;
      },
      [](NodeCollective&, int) { return absl::OkStatus(); });
  for (int node = 0; node < 2; ++node) {
    EXPECT_EQ(st[node].code(), absl::StatusCode::kFailedPrecondition) << st[node];
    EXPECT_THAT(st[node].message(), HasSubstr(node == 0 ? "node 0 and node 1 run different jobs"
                                                        : "node 1 and node 0 run different jobs"));
  }
}

TEST_F(NodeCollectiveTest, ANodeThatNeverComesIsADeadlineNamingIt) {
  RunConfig c = NodeConfig(2, 0, port(), "alone");
  c.nodes.timeout_seconds = 1;
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<NodeCollective>> made =
      NodeCollective::Connect(c, 0, 0, nullptr, nullptr);
  EXPECT_EQ(made.status().code(), absl::StatusCode::kDeadlineExceeded) << made.status();
  EXPECT_THAT(made.status().message(), HasSubstr("node 1 did not join the rendezvous"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST_F(NodeCollectiveTest, APeerThatGoesAwayFailsTheAllReduceQuickly) {
  std::vector<absl::Status> st = OnNodes(
      2, [&](int node) { return NodeConfig(2, node, port(), "gone"); },
      [](NodeCollective& c, int node) -> absl::Status {
        std::vector<float> v(1 << 16, 1.0f);
        if (absl::Status s = c.AllReduceSum(v.data(), v.size()); !s.ok()) return s;
        if (node == 1) return absl::OkStatus();  // node 1 leaves: its sockets close
        const auto t0 = std::chrono::steady_clock::now();
        absl::Status s = absl::OkStatus();
        // Node 0 goes on alone; its next all-reduce cannot complete.
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        s = c.AllReduceSum(v.data(), v.size());
        EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
        return s.ok() ? absl::InternalError("the all-reduce without a peer succeeded") : s;
      });
  EXPECT_TRUE(st[1].ok()) << st[1];
  EXPECT_TRUE(absl::IsUnavailable(st[0]) || absl::IsDeadlineExceeded(st[0])) << st[0];
  EXPECT_THAT(st[0].message(), HasSubstr("node 0: the gradient all-reduce across nodes failed"));
}

// The job's secret (MOBIUS_RENDEZVOUS_TOKEN, from the environment) is a namespace nobody without
// it can read or write: a process without the token, or with another, does not meet the job; the
// job's keys are not where a reader without the token looks.
TEST_F(NodeCollectiveTest, TheRendezvousTokenKeepsOthersOutOfTheJobsKeys) {
  ASSERT_EQ(setenv(kRendezvousTokenVariable, "s3cret-token", 1), 0);
  std::vector<absl::Status> st = OnNodes(
      2, [&](int node) { return NodeConfig(2, node, port(), "tok"); },
      [](NodeCollective& c, int node) -> absl::Status {
        std::vector<float> v(8, 1.0f + node);
        if (absl::Status s = c.AllReduceSum(v.data(), v.size()); !s.ok()) return s;
        return v[7] == 3.0f ? absl::OkStatus() : absl::InternalError("wrong sum");
      });
  EXPECT_TRUE(st[0].ok()) << st[0];
  EXPECT_TRUE(st[1].ok()) << st[1];
  // Another user's view: the job's key without the token does not exist.
  absl::StatusOr<std::unique_ptr<RendezvousClient>> other =
      RendezvousClient::Connect("127.0.0.1", port(), absl::Seconds(2));
  ASSERT_TRUE(other.ok());
  absl::StatusOr<std::optional<std::string>> seen = (*other)->TryGet("tok/rank0/config/0");
  ASSERT_TRUE(seen.ok());
  EXPECT_FALSE(seen->has_value());
  seen = (*other)->TryGet("s3cret-token/tok/rank0/config/0");
  EXPECT_TRUE(seen.ok() && seen->has_value());  // the token is the capability
  // A node with another token waits in vain for its peer.
  RunConfig c = NodeConfig(2, 0, port(), "tok2");
  c.nodes.timeout_seconds = 1;
  ASSERT_EQ(setenv(kRendezvousTokenVariable, "wrong", 1), 0);
  absl::StatusOr<std::unique_ptr<NodeCollective>> alone =
      NodeCollective::Connect(c, 0, 0, nullptr, nullptr);
  EXPECT_EQ(alone.status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_EQ(setenv(kRendezvousTokenVariable, "bad token!", 1), 0);
  alone = NodeCollective::Connect(c, 0, 0, nullptr, nullptr);
  EXPECT_EQ(alone.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(alone.status().message(), HasSubstr("MOBIUS_RENDEZVOUS_TOKEN may hold only"));
  unsetenv(kRendezvousTokenVariable);
}

TEST(NodeGroupFingerprintTest, IgnoresTheNodesOwnFieldsOnly) {
  RunConfig a = NodeConfig(2, 0, 1234, "k");
  RunConfig b = NodeConfig(2, 1, 1234, "k");
  b.store_fd = 7;
  b.store_path = "memfd:other";
  b.rank_cpus = {{1, 2}};
  b.training.model_dir = "/node1/local/model";  // each node's own copy
  b.training.data_path = "/node1/cache/data.tok";
  EXPECT_EQ(NodeGroupFingerprint(a), NodeGroupFingerprint(b));
  b.training.seed = 5;
  EXPECT_NE(NodeGroupFingerprint(a), NodeGroupFingerprint(b));
}

}  // namespace
}  // namespace mobius::runtime
