#include "server/rpc/tcp_auth.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kAlice[] = "alice-token-0123456789abcdef";
constexpr char kBob[] = "bob-token-0123456789abcdef";

class TcpAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/tcp_auth_test_" + std::to_string(getpid());
    ASSERT_EQ(std::system(("rm -rf " + dir_ + " && mkdir -p " + dir_).c_str()), 0);
  }
  void TearDown() override { (void)!std::system(("rm -rf " + dir_).c_str()); }

  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const std::string p = dir_ + "/" + name;
    std::ofstream(p) << text;
    chmod(p.c_str(), mode);
    return p;
  }

  // A self-signed certificate and key made with the openssl tool; false when it is missing.
  bool MakeCert(const std::string& name) {
    const std::string cmd = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
                            "-nodes -days 1 -subj /CN=localhost -keyout " + dir_ + "/" + name +
                            ".key -out " + dir_ + "/" + name + ".pem >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;
  }

  std::string dir_;
};

TEST_F(TcpAuthTest, ReadsTokenFile) {
  const std::string p = Write("tokens", std::string("# comment\n\n") + kAlice + "  root\n" + kBob +
                                            "\t65534\n");
  auto tokens = ReadTokenFile(p);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].first, kAlice);
  EXPECT_EQ((*tokens)[0].second.uid, 0u);
  EXPECT_EQ((*tokens)[0].second.user, "root");
  EXPECT_EQ((*tokens)[1].second.uid, 65534u);
}

TEST_F(TcpAuthTest, RefusesBadTokenFiles) {
  struct Case {
    std::string text;
    mode_t mode;
    std::string want;
  };
  const std::vector<Case> cases = {
      {std::string(kAlice) + " root\n", 0644, "(mode 0644); it holds secrets: chmod 600"},
      {std::string(kAlice) + " root\n", 0620, "readable or writable by group or others"},
      {std::string("# x\n") + kAlice + "\n", 0600, "tokens:2: expected 'TOKEN USER'"},
      {std::string(kAlice) + " root extra\n", 0600, "tokens:1: expected 'TOKEN USER'"},
      {"short root\n", 0600, "tokens:1: the token must be at least 16"},
      {std::string(kAlice) + " root\n" + kAlice + " 65534\n", 0600,
       "tokens:2: the same token as line 1"},
      {std::string(kAlice) + " no-such-user-xyz\n", 0600, "tokens:1: no user named"},
      {"# nothing\n", 0600, "no tokens"},
  };
  for (const Case& c : cases) {
    const std::string p = Write("tokens", c.text, c.mode);
    auto tokens = ReadTokenFile(p);
    ASSERT_FALSE(tokens.ok()) << c.text;
    EXPECT_EQ(tokens.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(tokens.status().message(), HasSubstr(c.want));
    EXPECT_THAT(tokens.status().message(), HasSubstr("--token_file"));
    EXPECT_THAT(tokens.status().message(), Not(HasSubstr(kAlice)));
  }
  auto missing = ReadTokenFile(dir_ + "/nope");
  EXPECT_THAT(missing.status().message(), HasSubstr("cannot open"));
}

TEST_F(TcpAuthTest, CreateNeedsTlsAndAnAuthenticationMethod) {
  TcpSecurityOptions o;
  o.token_file = Write("tokens", std::string(kAlice) + " root\n");
  EXPECT_THAT(TcpAuthenticator::Create(o).status().message(),
              HasSubstr("needs --tls_cert and --tls_key"));
  if (!MakeCert("server") || !MakeCert("other")) GTEST_SKIP() << "no openssl tool";
  o.cert_file = dir_ + "/server.pem";
  o.key_file = dir_ + "/server.key";
  o.token_file.clear();
  EXPECT_THAT(TcpAuthenticator::Create(o).status().message(),
              HasSubstr("must authenticate"));
  o.client_ca_file = dir_ + "/tokens-missing.pem";
  EXPECT_THAT(TcpAuthenticator::Create(o).status().message(),
              HasSubstr("--tls_client_ca " + dir_ + "/tokens-missing.pem: cannot open"));
  o.client_ca_file = Write("junk.pem", "not pem\n", 0644);
  EXPECT_THAT(TcpAuthenticator::Create(o).status().message(), HasSubstr("not a PEM certificate"));
  o.client_ca_file = dir_ + "/other.pem";
  o.key_file = dir_ + "/other.key";
  EXPECT_THAT(TcpAuthenticator::Create(o).status().message(),
              HasSubstr("does not match the certificate"));
  o.key_file = dir_ + "/server.key";
  EXPECT_TRUE(TcpAuthenticator::Create(o).ok());
}

TEST_F(TcpAuthTest, AuthenticatesTokensAndCertificates) {
  if (!MakeCert("server")) GTEST_SKIP() << "no openssl tool";
  TcpSecurityOptions o;
  o.cert_file = dir_ + "/server.pem";
  o.key_file = dir_ + "/server.key";
  o.token_file = Write("tokens", std::string(kAlice) + " root\n" + kBob + " 65534\n");
  auto auth = TcpAuthenticator::Create(o);
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ((*auth)->token_count(), 2u);

  const std::string bearer_bob = std::string("Bearer ") + kBob;
  std::vector<absl::string_view> md = {bearer_bob};
  auto who = (*auth)->Authenticate(md, {});
  ASSERT_TRUE(who.ok()) << who.status();
  EXPECT_EQ(who->uid, 65534u);
  EXPECT_EQ(who->method, "token");

  const std::string wrong = "Bearer wrong-token-0123456789abcdef";
  md = {wrong};
  who = (*auth)->Authenticate(md, {});
  EXPECT_EQ(who.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(who.status().message(), Not(HasSubstr("wrong-token")));
  const std::string basic = "Basic dXNlcjpwYXNz";
  md = {basic};
  EXPECT_EQ((*auth)->Authenticate(md, {}).status().code(), absl::StatusCode::kUnauthenticated);
  md = {bearer_bob, bearer_bob};
  EXPECT_EQ((*auth)->Authenticate(md, {}).status().code(), absl::StatusCode::kUnauthenticated);

  // No client CA configured: a certificate CN identifies nobody.
  std::vector<absl::string_view> cn = {"root"};
  who = (*auth)->Authenticate({}, cn);
  EXPECT_EQ(who.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(who.status().message(), HasSubstr("no credentials"));

  o.client_ca_file = dir_ + "/server.pem";
  auth = TcpAuthenticator::Create(o);
  ASSERT_TRUE(auth.ok()) << auth.status();
  who = (*auth)->Authenticate({}, cn);
  ASSERT_TRUE(who.ok()) << who.status();
  EXPECT_EQ(who->uid, 0u);
  EXPECT_EQ(who->method, "certificate");
  // A token, when present, decides: a wrong one is refused even with a good certificate.
  md = {wrong};
  EXPECT_EQ((*auth)->Authenticate(md, cn).status().code(), absl::StatusCode::kUnauthenticated);
  std::vector<absl::string_view> stranger = {"no-such-user-xyz"};
  EXPECT_THAT((*auth)->Authenticate({}, stranger).status().message(), HasSubstr("no user named"));
  EXPECT_THAT((*auth)->Describe(), HasSubstr("client certificates"));
  EXPECT_THAT((*auth)->Describe(), HasSubstr("2 bearer token(s)"));
}

}  // namespace
}  // namespace mobius
