#include "client/daemon_endpoint.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius::cli {
namespace {

using ::testing::HasSubstr;

class DaemonEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("MOBIUS_DAEMON");
    unsetenv("MOBIUS_SOCKET");
    unsetenv("MOBIUS_TOKEN");
  }
  std::string Write(const std::string& name, const std::string& text, mode_t mode) {
    const std::string p = ::testing::TempDir() + "/" + name;
    std::ofstream(p) << text;
    chmod(p.c_str(), mode);
    return p;
  }
};

TEST_F(DaemonEndpointTest, FlagsBeatEnvironmentAndDefaultIsTheSocket) {
  auto e = ResolveDaemonEndpoint({});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->address, "/run/mobius/mobiusd.sock");
  EXPECT_FALSE(e->is_tcp());
  setenv("MOBIUS_SOCKET", "/tmp/s.sock", 1);
  EXPECT_EQ(ResolveDaemonEndpoint({})->address, "/tmp/s.sock");
  setenv("MOBIUS_DAEMON", "tcp://gpu7:7465", 1);
  setenv("MOBIUS_TOKEN", " tok-0123456789abcdef \n", 1);
  e = ResolveDaemonEndpoint({});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(e->is_tcp());
  EXPECT_EQ(e->target(), "gpu7:7465");
  EXPECT_EQ(e->token, "tok-0123456789abcdef");
  EndpointFlags f;
  f.socket = "/tmp/flag.sock";
  e = ResolveDaemonEndpoint(f);
  EXPECT_EQ(e->address, "/tmp/flag.sock");
  EXPECT_TRUE(e->token.empty());  // unix: no token
  f = {};
  f.daemon = "unix:/tmp/u.sock";
  EXPECT_EQ(ResolveDaemonEndpoint(f)->address, "/tmp/u.sock");
}

TEST_F(DaemonEndpointTest, RefusesBadInput) {
  EndpointFlags f;
  f.daemon = "tcp://h:1";
  f.socket = "/s";
  EXPECT_THAT(ResolveDaemonEndpoint(f).status().message(), HasSubstr("not both"));
  f = {};
  for (const char* bad : {"tcp://host", "tcp://:7465", "tcp://host:0", "tcp://host:99999",
                          "tcp://::1:7465"}) {
    f.daemon = bad;
    EXPECT_THAT(ResolveDaemonEndpoint(f).status().message(), HasSubstr("is not tcp://HOST:PORT"))
        << bad;
  }
  f.daemon = "tcp://[::1]:7465";
  EXPECT_TRUE(ResolveDaemonEndpoint(f).ok());
  f.daemon = "http://host:80";
  EXPECT_THAT(ResolveDaemonEndpoint(f).status().message(), HasSubstr("only schemes"));
  f.socket = "tcp://host:1";
  f.daemon.clear();
  EXPECT_THAT(ResolveDaemonEndpoint(f).status().message(), HasSubstr("names a unix socket"));
  f = {};
  f.daemon = "tcp://host:1";
  f.tls_cert = "c.pem";
  EXPECT_THAT(ResolveDaemonEndpoint(f).status().message(), HasSubstr("go together"));
}

TEST_F(DaemonEndpointTest, ReadsPrivateTokenFilesOnly) {
  EndpointFlags f;
  f.daemon = "tcp://host:7465";
  f.token_file = Write("tok", "# mine\nsecret-token-0123456789\n", 0600);
  auto e = ResolveDaemonEndpoint(f);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->token, "secret-token-0123456789");
  f.token_file = Write("tok-open", "secret-token-0123456789\n", 0644);
  e = ResolveDaemonEndpoint(f);
  EXPECT_THAT(e.status().message(), HasSubstr("chmod 600"));
  EXPECT_THAT(e.status().message(), ::testing::Not(HasSubstr("secret-token")));
  f.token_file = ::testing::TempDir() + "/missing-token";
  EXPECT_THAT(ResolveDaemonEndpoint(f).status().message(), HasSubstr("cannot open"));
  f.token_file = Write("tok-empty", "# nothing\n", 0600);
  EXPECT_THAT(ResolveDaemonEndpoint(f).status().message(), HasSubstr("no token"));
}

}  // namespace
}  // namespace mobius::cli
