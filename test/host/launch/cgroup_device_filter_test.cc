// The cgroup v2 device program: its description, the NVIDIA minor lookup, and, where this process
// may load and attach BPF device programs and make a cgroup v2 (a root test run on a host or a
// privileged container), the real thing: a child moved into a cgroup with a rule is refused the
// denied device node and given the others. /dev/null (char 1:3) and /dev/zero (1:5) stand in for
// GPUs (/dev/nvidia<N> is 195:N): the program only differs in the numbers.
#include "host/launch/cgroup_device_filter.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/launch/cgroup_fs.h"
#include "host/launch/job_cgroup.h"

namespace mobius::launch {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(DeviceRuleTest, NvidiaRuleAndDescription) {
  DeviceDenyRule rule = NvidiaGpuRule({2, 0});
  EXPECT_EQ(rule.major, 195u);
  EXPECT_EQ(rule.first_minor, 0u);
  EXPECT_EQ(rule.last_minor, 253u);  // 254 nvidia-modeset and 255 nvidiactl stay allowed
  EXPECT_EQ(DescribeRule(rule), "char 195:[0-253] denied except 0, 2");
  EXPECT_EQ(DescribeRule(NvidiaGpuRule({})), "char 195:[0-253] denied");
  EXPECT_EQ(DescribeRule(DeviceDenyRule{}), "no device denied");
}

TEST(NvidiaDeviceMinorTest, ReadsTheDriversInformationFile) {
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("nvidia_minor_test-", getpid());
  fs::create_directories(dir / "0000:3b:00.0");
  std::ofstream(dir / "0000:3b:00.0/information")
      << "Model: \t\t NVIDIA H200\nIRQ:   \t\t 42\nGPU UUID: \t GPU-0d3c\n"
      << "Video BIOS: \t 96.00.a5.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
      << "Device Minor: \t 3\nGPU Excluded:\t No\n";
  absl::StatusOr<uint32_t> minor = NvidiaDeviceMinor("0000:3B:00.0", dir.string());
  ASSERT_TRUE(minor.ok()) << minor.status();
  EXPECT_EQ(*minor, 3u);
  absl::StatusOr<uint32_t> missing = NvidiaDeviceMinor("0000:af:00.0", dir.string());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("the NVIDIA driver lists no"));
  fs::remove_all(dir);
}

// In the child: move into the cgroup, then open `path`. Exit code: 0 opened, 1 EPERM, 2 other
// error, 3 could not enter the cgroup.
int OpenInCgroup(const std::string& cgroup_dir, const char* path) {
  const int procs = open((cgroup_dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  const pid_t child = fork();
  if (child == 0) {
    if (procs < 0 || write(procs, "0", 1) != 1) _exit(3);
    const int fd = open(path, O_RDWR | O_CLOEXEC);
    _exit(fd >= 0 ? 0 : errno == EPERM ? 1 : 2);
  }
  if (procs >= 0) close(procs);
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 100 + WTERMSIG(wstatus);
}

class RealDeviceFilterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status st = ProbeDeviceFilter(); !st.ok()) {
      GTEST_SKIP() << "cannot load a BPF device program here: " << st;
    }
    RealCgroupFs real;
    absl::StatusOr<std::string> own = FindOwnCgroupDir(real);
    if (!own.ok()) GTEST_SKIP() << "no cgroup v2: " << own.status();
    // A child cgroup needs no controller: device programs attach to any cgroup v2.
    base_ = absl::StrCat(*own, "/mobius-device-test-", getpid());
    if (absl::Status st = real.MakeDir(base_); !st.ok()) {
      base_.clear();
      GTEST_SKIP() << "cannot make a cgroup below " << *own << ": " << st;
    }
  }
  void TearDown() override {
    if (base_.empty()) return;
    RealCgroupFs real;
    for (const std::string& name : made_) (void)real.RemoveDir(base_ + "/" + name);
    (void)real.RemoveDir(base_);
  }
  std::string MakeCgroup(const std::string& name) {
    RealCgroupFs real;
    absl::Status st = real.MakeDir(base_ + "/" + name);
    EXPECT_TRUE(st.ok()) << st;
    made_.push_back(name);
    return base_ + "/" + name;
  }

  std::string base_;
  std::vector<std::string> made_;
};

TEST_F(RealDeviceFilterTest, DeniedNodeIsRefusedOthersOpen) {
  const std::string cg = MakeCgroup("deny-null");
  DeviceDenyRule rule;  // char 1:[3-3]: /dev/null only
  rule.major = 1;
  rule.first_minor = 3;
  rule.last_minor = 3;
  absl::Status st = AttachDeviceFilter(cg, rule);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(OpenInCgroup(cg, "/dev/null"), 1);     // EPERM
  EXPECT_EQ(OpenInCgroup(cg, "/dev/zero"), 0);     // 1:5, outside the range
  EXPECT_EQ(OpenInCgroup(base_, "/dev/null"), 0);  // the parent has no program
}

TEST_F(RealDeviceFilterTest, AllowedMinorInsideTheRangeOpens) {
  const std::string cg = MakeCgroup("allow-null");
  DeviceDenyRule rule;  // char 1:[0-9] denied except 3 (/dev/null)
  rule.major = 1;
  rule.first_minor = 0;
  rule.last_minor = 9;
  rule.allowed_minors = {3};
  absl::Status st = AttachDeviceFilter(cg, rule);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(OpenInCgroup(cg, "/dev/null"), 0);
  EXPECT_EQ(OpenInCgroup(cg, "/dev/zero"), 1);  // 1:5 denied
}

TEST_F(RealDeviceFilterTest, NvidiaRuleLeavesOtherDevicesAlone) {
  const std::string cg = MakeCgroup("nvidia");
  absl::Status st = AttachDeviceFilter(cg, NvidiaGpuRule({0, 1, 2, 3, 4, 5, 6, 7}));
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(OpenInCgroup(cg, "/dev/null"), 0);
  EXPECT_EQ(OpenInCgroup(cg, "/dev/zero"), 0);
  if (access("/dev/nvidiactl", F_OK) == 0) EXPECT_EQ(OpenInCgroup(cg, "/dev/nvidiactl"), 0);
}

TEST_F(RealDeviceFilterTest, NvidiaGpusNotGrantedAreRefused) {
  if (access("/dev/nvidia0", F_OK) != 0) GTEST_SKIP() << "no /dev/nvidia0 here";
  const std::string cg = MakeCgroup("nvidia-none");
  absl::Status st = AttachDeviceFilter(cg, NvidiaGpuRule({}));
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(OpenInCgroup(cg, "/dev/nvidia0"), 1);
  EXPECT_EQ(OpenInCgroup(cg, "/dev/nvidiactl"), 0);
}

}  // namespace
}  // namespace mobius::launch
