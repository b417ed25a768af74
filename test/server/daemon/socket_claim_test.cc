#include "server/daemon/socket_claim.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius {
namespace {

using ::testing::HasSubstr;

class SocketClaimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mobius-claim-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/d.sock";
  }
  void TearDown() override {
    unlink(path_.c_str());
    unlink((path_ + ".lock").c_str());
    rmdir(dir_.c_str());
  }

  // A listening unix socket at path_, as a live server would have.
  int Listen() {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd, 1), 0);
    return fd;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(SocketClaimTest, FreshPathIsClaimedAndReleasedCleanly) {
  auto claim = SocketClaim::Acquire(path_);
  ASSERT_TRUE(claim.ok()) << claim.status();
  struct stat st;
  EXPECT_EQ(stat((path_ + ".lock").c_str(), &st), 0);
  (*claim)->Release();
  EXPECT_NE(stat((path_ + ".lock").c_str(), &st), 0);
}

TEST_F(SocketClaimTest, SecondClaimWhileHeldIsRefusedWithPid) {
  auto first = SocketClaim::Acquire(path_);
  ASSERT_TRUE(first.ok());
  auto second = SocketClaim::Acquire(path_);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("another mobiusd (pid " + std::to_string(getpid())));
}

TEST_F(SocketClaimTest, StaleSocketIsReplaced) {
  int fd = Listen();
  close(fd);  // the socket file stays, nobody listens: a crashed daemon's leftover
  ASSERT_FALSE(UnixSocketIsLive(path_));
  auto claim = SocketClaim::Acquire(path_);
  ASSERT_TRUE(claim.ok()) << claim.status();
  struct stat st;
  EXPECT_NE(lstat(path_.c_str(), &st), 0) << "stale socket should have been removed";
}

TEST_F(SocketClaimTest, LiveForeignServerIsNotTouched) {
  int fd = Listen();
  ASSERT_TRUE(UnixSocketIsLive(path_));
  auto claim = SocketClaim::Acquire(path_);
  EXPECT_EQ(claim.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(claim.status().message(), HasSubstr("live server already answers"));
  EXPECT_TRUE(UnixSocketIsLive(path_));
  close(fd);
}

TEST_F(SocketClaimTest, RegularFileIsNotReplaced) {
  std::ofstream(path_) << "precious";
  auto claim = SocketClaim::Acquire(path_);
  EXPECT_EQ(claim.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(claim.status().message(), HasSubstr("is not a socket"));
  std::ifstream in(path_);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious");
}

TEST_F(SocketClaimTest, MissingDirectoryIsAClearError) {
  auto claim = SocketClaim::Acquire(dir_ + "/no/such/dir/d.sock");
  EXPECT_EQ(claim.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(claim.status().message(), HasSubstr("socket directory " + dir_ + "/no/such/dir does not exist"));
}

TEST_F(SocketClaimTest, DirectoryThatIsAFile) {
  std::string file = dir_ + "/plain";
  std::ofstream(file) << "x";
  auto claim = SocketClaim::Acquire(file + "/d.sock");
  EXPECT_EQ(claim.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(claim.status().message(), HasSubstr("is not a directory"));
  unlink(file.c_str());
}

TEST_F(SocketClaimTest, UnwritableDirectory) {
  if (geteuid() == 0) GTEST_SKIP() << "root can write any directory";
  std::string ro = dir_ + "/ro";
  mkdir(ro.c_str(), 0500);
  auto claim = SocketClaim::Acquire(ro + "/d.sock");
  EXPECT_EQ(claim.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(claim.status().message(), HasSubstr("not writable"));
  rmdir(ro.c_str());
}

TEST_F(SocketClaimTest, OverlongPath) {
  auto claim = SocketClaim::Acquire(dir_ + "/" + std::string(200, 'x'));
  EXPECT_EQ(claim.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mobius
