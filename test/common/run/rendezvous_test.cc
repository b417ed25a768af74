// rendezvous.h: a real server on a loopback port and real clients: values set and read, blocked
// Gets released by a Set or their timeout, counters under contention, a server that appears late
// or goes away, Shutdown(), and connections that break the protocol (closed, the server serving
// on); rendezvous_wire.h's frames; HOST:PORT parsing.
#include "common/run/rendezvous.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/run/rendezvous_wire.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"

namespace mobius::runtime {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class RendezvousTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RendezvousServer::Start("127.0.0.1", 0);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_GT(server_->port(), 0);
  }

  std::unique_ptr<RendezvousClient> NewClient() {
    auto client = RendezvousClient::Connect("127.0.0.1", server_->port(), absl::Seconds(5));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  // A plain TCP socket to the server, for speaking the protocol wrong.
  int RawSocket() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(server_->port());
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    return fd;
  }

  // True when the server closes `fd` within a second (recv sees end of file or a reset).
  static bool ClosedByServer(int fd) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 1000) != 1) return false;
    char buffer[64];
    return recv(fd, buffer, sizeof(buffer), 0) <= 0;
  }

  std::unique_ptr<RendezvousServer> server_;
};

TEST_F(RendezvousTest, SetThenGetTryGetAndOverwrite) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto missing = client->TryGet("a");
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_FALSE(missing->has_value());
  ASSERT_TRUE(client->Set("a", "1").ok());
  auto got = client->Get("a", absl::Seconds(1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "1");
  ASSERT_TRUE(client->Set("a", "two").ok());
  auto tried = client->TryGet("a");
  ASSERT_TRUE(tried.ok() && tried->has_value()) << tried.status();
  EXPECT_EQ(**tried, "two");
  ASSERT_TRUE(client->Set("empty", "").ok());
  EXPECT_EQ(*client->Get("empty", absl::ZeroDuration()), "");
}

TEST_F(RendezvousTest, BlockingGetIsReleasedByASetFromAnotherClient) {
  auto waiter = NewClient();
  auto setter = NewClient();
  ASSERT_TRUE(waiter && setter);
  auto got =
      std::async(std::launch::async, [&] { return waiter->Get("addr/3", absl::Seconds(10)); });
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(got.wait_for(milliseconds(0)), std::future_status::timeout);  // still blocked
  const auto set_at = Clock::now();
  ASSERT_TRUE(setter->Set("addr/3", "10.0.0.3:4000").ok());
  ASSERT_EQ(got.wait_for(milliseconds(1000)), std::future_status::ready);
  EXPECT_LT(SecondsSince(set_at), 0.5);
  auto value = got.get();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "10.0.0.3:4000");
}

TEST_F(RendezvousTest, GetTimesOutNamingTheKeyAndTheClientStaysUsable) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  const auto start = Clock::now();
  auto got = client->Get("never/set", absl::Milliseconds(300));
  const double took = SecondsSince(start);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_NE(got.status().message().find("never/set"), std::string::npos) << got.status();
  EXPECT_GE(took, 0.29);
  EXPECT_LT(took, 2.0);
  EXPECT_EQ(client->Get("never/set", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(client->Set("k", "v").ok());
  EXPECT_EQ(*client->Get("k", absl::ZeroDuration()), "v");
}

TEST_F(RendezvousTest, AddFromEightThreadsCountsEveryIncrement) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      auto client = NewClient();
      ASSERT_NE(client, nullptr);
      for (int i = 0; i < 100; ++i) ASSERT_TRUE(client->Add("count", 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto total = client->Add("count", 0);
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(*total, 800);
  EXPECT_EQ(*client->Get("count", absl::ZeroDuration()), "800");
  EXPECT_EQ(*client->Add("count", -1000), -200);
}

TEST_F(RendezvousTest, AddRefusesANonCounterAndOverflow) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Set("text", "hello").ok());
  auto bad = client->Add("text", 1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition) << bad.status();
  EXPECT_NE(bad.status().message().find("text"), std::string::npos) << bad.status();
  ASSERT_TRUE(client->Add("big", INT64_MAX).ok());
  EXPECT_EQ(client->Add("big", 1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*client->Add("big", 0), INT64_MAX);  // the client is still in step
}

TEST_F(RendezvousTest, WaitReturnsOnceEveryKeyExistsAndNamesTheFirstMissingOne) {
  auto waiter = NewClient();
  auto setter = NewClient();
  ASSERT_TRUE(waiter && setter);
  ASSERT_TRUE(setter->Set("rank/0", "").ok());
  auto waited = std::async(std::launch::async, [&] {
    return waiter->Wait({"rank/0", "rank/1", "rank/2"}, absl::Seconds(10));
  });
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(setter->Set("rank/2", "").ok());
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(waited.wait_for(milliseconds(0)), std::future_status::timeout);
  ASSERT_TRUE(setter->Set("rank/1", "").ok());
  ASSERT_EQ(waited.wait_for(milliseconds(1000)), std::future_status::ready);
  EXPECT_TRUE(waited.get().ok());

  const auto start = Clock::now();
  absl::Status missing = waiter->Wait({"rank/0", "rank/7", "rank/8"}, absl::Milliseconds(200));
  EXPECT_EQ(missing.code(), absl::StatusCode::kDeadlineExceeded) << missing;
  EXPECT_NE(missing.message().find("rank/7"), std::string::npos) << missing;
  EXPECT_LT(SecondsSince(start), 2.0);
}

TEST(RendezvousConnectTest, ConnectsToAServerThatStartsLater) {
  int port = 0;
  {
    auto probe = RendezvousServer::Start("127.0.0.1", 0);  // a free port, released again
    ASSERT_TRUE(probe.ok()) << probe.status();
    port = (*probe)->port();
  }
  std::unique_ptr<RendezvousServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(300));
    auto started = RendezvousServer::Start("127.0.0.1", port);
    ASSERT_TRUE(started.ok()) << started.status();
    server = std::move(*started);
  });
  auto client = RendezvousClient::Connect("127.0.0.1", port, absl::Seconds(10));
  starter.join();
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("k", "v").ok());
}

TEST(RendezvousConnectTest, NoServerIsDeadlineExceededNamingTheAddress) {
  int port = 0;
  {
    auto probe = RendezvousServer::Start("127.0.0.1", 0);
    ASSERT_TRUE(probe.ok()) << probe.status();
    port = (*probe)->port();
  }
  auto client = RendezvousClient::Connect("127.0.0.1", port, absl::Milliseconds(300));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kDeadlineExceeded) << client.status();
  EXPECT_NE(client.status().message().find("no rendezvous at 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << client.status();
}

TEST(RendezvousServerTest, APortInUseIsUnavailableSayingSo) {
  auto first = RendezvousServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  auto second = RendezvousServer::Start("127.0.0.1", port);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  EXPECT_NE(second.status().message().find("port " + std::to_string(port) + " is in use"),
            std::string::npos)
      << second.status();
}

TEST_F(RendezvousTest, ServerGoneWhileAClientBlocksIsUnavailableWithinASecond) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto got = std::async(std::launch::async, [&] { return client->Get("k", absl::Seconds(30)); });
  std::this_thread::sleep_for(milliseconds(200));
  const auto stop_at = Clock::now();
  server_.reset();
  ASSERT_EQ(got.wait_for(milliseconds(1000)), std::future_status::ready);
  EXPECT_LT(SecondsSince(stop_at), 1.0);
  const absl::Status status = got.get().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("closed the connection"), std::string::npos) << status;
  // Every later call says the same, at once.
  const auto later = Clock::now();
  EXPECT_EQ(client->Set("k", "v").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(client->TryGet("k").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(SecondsSince(later), 0.5);
}

TEST_F(RendezvousTest, ShutdownFromAnotherThreadCancelsABlockedGet) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto got = std::async(std::launch::async, [&] { return client->Get("k", absl::Seconds(30)); });
  std::this_thread::sleep_for(milliseconds(200));
  client->Shutdown();
  ASSERT_EQ(got.wait_for(milliseconds(1000)), std::future_status::ready);
  EXPECT_EQ(got.get().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(client->Set("k", "v").code(), absl::StatusCode::kCancelled);
  // The server is unaffected.
  auto other = NewClient();
  ASSERT_NE(other, nullptr);
  EXPECT_TRUE(other->Set("k", "v").ok());
}

TEST_F(RendezvousTest, GarbageAndOversizedFramesAreDisconnectedAndOthersServed) {
  auto good = NewClient();
  ASSERT_NE(good, nullptr);
  ASSERT_TRUE(good->Set("k", "v").ok());

  const int garbage = RawSocket();
  const std::string text = "GET / HTTP/1.1\r\nHost: node0\r\n\r\n";
  ASSERT_EQ(send(garbage, text.data(), text.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(text.size()));
  EXPECT_TRUE(ClosedByServer(garbage));
  close(garbage);

  // A valid Set header announcing a 2 GiB value: refused from the header, nothing allocated.
  const int oversized = RawSocket();
  std::string header = rendezvous::EncodeRequest({rendezvous::Op::kSet, "k", "", 0});
  header[5] = header[6] = header[7] = 0;
  header[8] = static_cast<char>(0x80);
  ASSERT_EQ(send(oversized, header.data(), header.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(header.size()));
  EXPECT_TRUE(ClosedByServer(oversized));
  close(oversized);

  // Half a frame and gone; a Get held and gone.
  const int half = RawSocket();
  ASSERT_EQ(send(half, header.data(), 5, MSG_NOSIGNAL), 5);
  close(half);
  const int vanished = RawSocket();
  const std::string get = rendezvous::EncodeRequest({rendezvous::Op::kGet, "later", "", 10000});
  ASSERT_EQ(send(vanished, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));
  std::this_thread::sleep_for(milliseconds(100));
  close(vanished);

  ASSERT_TRUE(good->Set("later", "x").ok());
  auto value = good->Get("k", absl::Seconds(1));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "v");
  auto fresh = NewClient();
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(*fresh->Get("later", absl::Seconds(1)), "x");
}

TEST_F(RendezvousTest, OneMebibyteValuesAndTheLimits) {
  auto waiter = NewClient();
  auto setter = NewClient();
  ASSERT_TRUE(waiter && setter);
  std::string big(1 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7919 % 251);
  auto got = std::async(std::launch::async, [&] { return waiter->Get("big", absl::Seconds(10)); });
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(setter->Set("big", big).ok());
  auto value = got.get();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_TRUE(*value == big);
  EXPECT_TRUE(*setter->Get("big", absl::ZeroDuration()) == big);

  EXPECT_TRUE(setter->Set(std::string(1024, 'k'), "v").ok());
  EXPECT_EQ(setter->Set(std::string(1025, 'k'), "v").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(setter->Set("", "v").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(setter->Set("k", std::string(rendezvous::kMaxValueBytes + 1, 'v')).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(setter->Set("k", "still in step").ok());
}

TEST(RendezvousWireTest, FramesRoundTripAndDecodeOnlyWhenComplete) {
  const rendezvous::Request request{rendezvous::Op::kAdd, "count", "", -5};
  const std::string frame = rendezvous::EncodeRequest(request);
  ASSERT_EQ(frame.size(), rendezvous::kRequestHeaderBytes + 5);
  size_t consumed = 1;
  for (size_t n = 0; n < frame.size(); ++n) {
    auto partial = rendezvous::DecodeRequest(frame.data(), n, &consumed);
    ASSERT_TRUE(partial.ok()) << partial.status();
    EXPECT_FALSE(partial->has_value());
    EXPECT_EQ(consumed, 0u);
  }
  const std::string two = frame + frame;
  auto decoded = rendezvous::DecodeRequest(two.data(), two.size(), &consumed);
  ASSERT_TRUE(decoded.ok() && decoded->has_value()) << decoded.status();
  EXPECT_EQ(consumed, frame.size());
  EXPECT_EQ((*decoded)->op, rendezvous::Op::kAdd);
  EXPECT_EQ((*decoded)->key, "count");
  EXPECT_EQ((*decoded)->number, -5);

  const std::string answer = rendezvous::EncodeResponse({rendezvous::Code::kOk, "value", 7});
  auto response = rendezvous::DecodeResponse(answer.data(), answer.size(), &consumed);
  ASSERT_TRUE(response.ok() && response->has_value()) << response.status();
  EXPECT_EQ((*response)->value, "value");
  EXPECT_EQ((*response)->number, 7);

  // Malformed headers are refused before their bodies arrive.
  std::string bad_op = frame;
  bad_op[0] = 9;
  EXPECT_FALSE(
      rendezvous::DecodeRequest(bad_op.data(), rendezvous::kRequestHeaderBytes, &consumed).ok());
  const std::string get_with_value = rendezvous::EncodeRequest({rendezvous::Op::kGet, "k", "v", 1});
  EXPECT_FALSE(
      rendezvous::DecodeRequest(get_with_value.data(), get_with_value.size(), &consumed).ok());
  const std::string negative_timeout =
      rendezvous::EncodeRequest({rendezvous::Op::kWait, "k", "", -1});
  EXPECT_FALSE(
      rendezvous::DecodeRequest(negative_timeout.data(), negative_timeout.size(), &consumed).ok());
}

// The fuzz corpus (test/data/rendezvous/make_frames.py, an encoder of its own) decodes whole.
TEST(RendezvousWireTest, TheFixturesAreValidFrameStreams) {
  int files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(testing::SourcePath("test/data/rendezvous"))) {
    const std::string ext = entry.path().extension();
    if (ext != ".req" && ext != ".resp") continue;
    ++files;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    const std::string data = bytes.str();
    size_t offset = 0;
    int frames = 0;
    while (offset < data.size()) {
      size_t consumed = 0;
      bool complete = false;
      if (ext == ".req") {
        auto r = rendezvous::DecodeRequest(data.data() + offset, data.size() - offset, &consumed);
        ASSERT_TRUE(r.ok()) << entry.path() << ": " << r.status();
        complete = r->has_value();
      } else {
        auto r = rendezvous::DecodeResponse(data.data() + offset, data.size() - offset, &consumed);
        ASSERT_TRUE(r.ok()) << entry.path() << ": " << r.status();
        complete = r->has_value();
      }
      ASSERT_TRUE(complete) << entry.path() << ": a truncated frame at byte " << offset;
      offset += consumed;
      ++frames;
    }
    EXPECT_GT(frames, 0) << entry.path();
  }
  EXPECT_GE(files, 4);
}

TEST(ParseHostPortTest, GoodAddresses) {
  auto a = ParseHostPort("node1:29560");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host, "node1");
  EXPECT_EQ(a->port, 29560);
  auto b = ParseHostPort("10.0.0.1:1");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->host, "10.0.0.1");
  EXPECT_EQ(b->port, 1);
  auto c = ParseHostPort("[::1]:65535");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 65535);
  EXPECT_EQ(FormatHostPort(c->host, c->port), "[::1]:65535");
  EXPECT_EQ(FormatHostPort("node1", 29560), "node1:29560");
}

TEST(ParseHostPortTest, BadAddressesSayWhatIsWrong) {
  const std::pair<const char*, const char*> cases[] = {
      {"node1", "missing port"},  {"node1:", "missing port"}, {":29560", "empty host"},
      {"[]:29560", "empty host"}, {"node1:0", "1..65535"},    {"node1:65536", "1..65535"},
      {"node1:-1", "1..65535"},   {"node1:http", "1..65535"}, {"node1: 80", "1..65535"},
      {"::1:29560", "brackets"},  {"[::1:29560", "']'"},      {"[::1]29560", "':PORT'"},
      {"", "empty host"},
  };
  for (const auto& [text, what] : cases) {
    auto parsed = ParseHostPort(text);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(parsed.status().message().find(std::string("'") + text + "'"), std::string::npos)
        << parsed.status();
    EXPECT_NE(parsed.status().message().find(what), std::string::npos) << parsed.status();
  }
}

}  // namespace
}  // namespace mobius::runtime
