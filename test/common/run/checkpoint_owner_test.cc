// checkpoint_owner.h: the first job to claim a checkpoint directory owns it; the same job may
// claim it again (a restart), another job is refused naming the owner; records are never
// followed through symlinks and a malformed one is an error that does not quote it.
#include "common/run/checkpoint_owner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace mobius::checkpoint {
namespace {

class CheckpointOwnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/checkpoint_owner_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(CheckpointOwnerTest, FirstJobClaimsItsRestartKeepsItAnotherIsRefused) {
  const std::string root = dir_ + "/a/checkpoints";
  ASSERT_TRUE(CheckCheckpointOwner(root, "j-000001").ok());  // nothing there yet
  ASSERT_TRUE(ClaimCheckpointDir(root, "j-000001").ok());
  auto owner = ReadCheckpointOwner(root);
  ASSERT_TRUE(owner.ok() && owner->has_value()) << owner.status();
  EXPECT_EQ((*owner)->job_id, "j-000001");
  EXPECT_EQ((*owner)->uid, getuid());
  EXPECT_TRUE(ClaimCheckpointDir(root, "j-000001").ok());
  absl::Status other = ClaimCheckpointDir(root, "j-000002");
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition) << other;
  EXPECT_NE(other.message().find("j-000001"), std::string::npos) << other;
  EXPECT_NE(other.message().find(root), std::string::npos) << other;
  EXPECT_EQ(CheckCheckpointOwner(root, "j-000002").code(), absl::StatusCode::kFailedPrecondition);
}

// With a group the process is in: the directory becomes the group's, setgid, 02750.
TEST_F(CheckpointOwnerTest, GroupClaimGivesTheDirectoryToTheGroup) {
  const std::string root = dir_ + "/shared";
  ASSERT_TRUE(ClaimCheckpointDir(root, "j-000004", std::to_string(getgid())).ok());
  struct stat st;
  ASSERT_EQ(stat(root.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, getgid());
  EXPECT_EQ(st.st_mode & 07777, 02750u);
  absl::Status unknown = ClaimCheckpointDir(dir_ + "/other", "j-000005", "no-such-group-xyz");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound) << unknown;
  EXPECT_NE(unknown.message().find("no-such-group-xyz"), std::string::npos) << unknown;
}

TEST_F(CheckpointOwnerTest, SymlinkedRecordIsNotFollowed) {
  const std::string secret = dir_ + "/secret";
  std::ofstream(secret) << "{\"job\": \"root-only\", \"uid\": 0}";
  std::filesystem::create_directories(dir_ + "/ck");
  std::filesystem::create_symlink(secret, dir_ + "/ck/" + kOwnerFile);
  EXPECT_FALSE(ReadCheckpointOwner(dir_ + "/ck").ok());
  EXPECT_FALSE(ClaimCheckpointDir(dir_ + "/ck", "j-000003").ok());
}

TEST_F(CheckpointOwnerTest, MalformedRecordIsAnErrorWithoutItsContents) {
  std::filesystem::create_directories(dir_ + "/ck");
  std::ofstream(dir_ + "/ck/" + kOwnerFile) << "root:$6$secret-hash:19000:0:99999:7:::";
  auto owner = ReadCheckpointOwner(dir_ + "/ck");
  ASSERT_FALSE(owner.ok());
  EXPECT_EQ(owner.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(owner.status().message().find("secret-hash"), std::string::npos) << owner.status();
}

}  // namespace
}  // namespace mobius::checkpoint
