// JobCgroupRoot / JobCgroup against a fake cgroup tree in a temp directory (fake_cgroup_fs.h):
// detection and its failure reasons, the files written, leftovers, names, the limit policy, the
// daemon's setup. Then, only where this process has a delegated cgroup v2 subtree with the memory
// controller, the real thing: a child over its memory.max is OOM-killed and Stats() says so.
#include "host/launch/job_cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/host/launch/fake_cgroup_fs.h"

namespace mobius::launch {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using testing::FakeCgroupFs;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr int64_t kGiB = int64_t{1} << 30;
const std::vector<std::string> kAllControllers = {"cpuset", "cpu", "io", "memory", "pids"};

std::vector<std::string> WordsOf(const std::string& text) {
  return absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
}

class JobCgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / absl::StrCat("job_cgroup_test-", getpid());
    fs::remove_all(dir_);
    mount_ = (dir_ / "sys/fs/cgroup").string();
    own_ = mount_ + "/system.slice/mobiusd.service";
    fake_ = std::make_shared<FakeCgroupFs>(mount_);
    fake_->MakeCgroup(mount_, kAllControllers);
    fs::remove(mount_ + "/cgroup.type");  // the hierarchy's root has none
    FakeCgroupFs::Put(mount_ + "/cgroup.subtree_control", "cpu io memory pids\n");
    fake_->MakeCgroup(mount_ + "/system.slice", kAllControllers);
    FakeCgroupFs::Put(mount_ + "/system.slice/cgroup.subtree_control", "cpu io memory pids\n");
    fake_->MakeCgroup(own_, kAllControllers, {100, 101});
    WriteMountinfo(mount_, "/");
    WriteSelfCgroup("/system.slice/mobiusd.service");
    options_.fs = fake_;
    options_.paths.mountinfo = (dir_ / "mountinfo").string();
    options_.paths.self_cgroup = (dir_ / "cgroup").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A hybrid-looking mountinfo: cgroup v1 mounts first, then the cgroup2 one at `cgroup2_at`.
  void WriteMountinfo(const std::string& cgroup2_at, const std::string& mount_root) {
    std::ofstream(dir_ / "mountinfo", std::ios::trunc)
        << "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
        << "31 22 0:28 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        << "41 22 0:38 " << mount_root << " " << cgroup2_at
        << " rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n";
  }
  void WriteSelfCgroup(const std::string& path) {
    std::ofstream(dir_ / "cgroup", std::ios::trunc)
        << "4:memory:/x\n1:name=systemd:/x\n0::" << path << "\n";
  }
  std::unique_ptr<JobCgroupRoot> DetectOrDie() {
    absl::StatusOr<std::unique_ptr<JobCgroupRoot>> root = JobCgroupRoot::Detect(options_);
    EXPECT_TRUE(root.ok()) << root.status();
    return root.ok() ? std::move(*root) : nullptr;
  }
  std::string Read(const std::string& path) { return FakeCgroupFs::Get(path); }

  fs::path dir_;
  std::string mount_, own_;
  std::shared_ptr<FakeCgroupFs> fake_;
  JobCgroupOptions options_;
};

// ---- detection
// -----------------------------------------------------------------------------------

TEST_F(JobCgroupTest, DetectMovesTheDaemonIntoALeafAndEnablesControllers) {
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  const CgroupSupport& sup = root->support();
  EXPECT_EQ(sup.root, own_);
  EXPECT_EQ(sup.daemon_leaf, own_ + "/mobiusd");
  EXPECT_EQ(sup.moved_processes, 2);
  EXPECT_THAT(WordsOf(Read(own_ + "/cgroup.procs")), ::testing::IsEmpty());
  EXPECT_THAT(WordsOf(Read(own_ + "/mobiusd/cgroup.procs")), ElementsAre("100", "101"));
  EXPECT_THAT(WordsOf(Read(own_ + "/cgroup.subtree_control")), ElementsAre("memory", "cpu"));
  EXPECT_TRUE(sup.cpu);
  EXPECT_TRUE(sup.swap);
  EXPECT_TRUE(sup.kill);
  EXPECT_TRUE(sup.peak);
  EXPECT_FALSE(sup.devices);
  EXPECT_THAT(sup.devices_off, HasSubstr("no CAP_BPF"));
  EXPECT_THAT(sup.Describe(), HasSubstr("root " + own_ + " (daemon in " + own_ +
                                        "/mobiusd, 2 processes moved); memory, cpu, swap limit, "
                                        "cgroup.kill, memory.peak; GPU device filter: off ("));
  EXPECT_FALSE(fs::exists(own_ + "/mobius-device-probe"));
}

TEST_F(JobCgroupTest, DetectTwiceFromTheLeafKeepsTheSameRoot) {
  ASSERT_NE(DetectOrDie(), nullptr);
  WriteSelfCgroup("/system.slice/mobiusd.service/mobiusd");  // where the first one put us
  std::unique_ptr<JobCgroupRoot> again = DetectOrDie();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->support().root, own_);
  EXPECT_EQ(again->support().moved_processes, 0);
  EXPECT_FALSE(fs::exists(own_ + "/mobiusd/mobiusd"));
}

TEST_F(JobCgroupTest, NoCgroup2MountIsAPrecondition) {
  std::ofstream(dir_ / "mountinfo", std::ios::trunc)
      << "31 22 0:28 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";
  absl::StatusOr<std::unique_ptr<JobCgroupRoot>> root = JobCgroupRoot::Detect(options_);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(root.status().message(), HasSubstr("no cgroup2 file system is mounted"));
  EXPECT_THAT(root.status().message(), HasSubstr("cgroup v1 only"));
}

TEST_F(JobCgroupTest, NoV2LineInProcSelfCgroup) {
  std::ofstream(dir_ / "cgroup", std::ios::trunc) << "4:memory:/x\n";
  absl::StatusOr<std::unique_ptr<JobCgroupRoot>> root = JobCgroupRoot::Detect(options_);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(root.status().message(), HasSubstr("has no \"0::/...\" line"));
}

// This machine's layout: cgroup2 at /sys/fs/cgroup/unified, the process in its root cgroup.
TEST_F(JobCgroupTest, HybridHostRootCgroupIsRefused) {
  const std::string unified = mount_ + "/unified";
  fake_->MakeCgroup(unified, {"hugetlb"});
  fs::remove(unified + "/cgroup.type");
  WriteMountinfo(unified, "/");
  WriteSelfCgroup("/");
  absl::StatusOr<std::string> own = FindOwnCgroupDir(*fake_, options_.paths);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(*own, unified);
  absl::StatusOr<std::unique_ptr<JobCgroupRoot>> root = JobCgroupRoot::Detect(options_);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(root.status().message(), HasSubstr("is in the root cgroup " + unified));
}

TEST_F(JobCgroupTest, BindMountedSubtreeIsResolvedBelowTheMount) {
  WriteMountinfo(mount_, "/docker/abc");
  WriteSelfCgroup("/docker/abc/init");
  absl::StatusOr<std::string> own = FindOwnCgroupDir(*fake_, options_.paths);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(*own, mount_ + "/init");
  WriteSelfCgroup("/docker/abc");
  EXPECT_EQ(FindOwnCgroupDir(*fake_, options_.paths).value(), mount_);
  WriteSelfCgroup("/docker/other");
  EXPECT_THAT(FindOwnCgroupDir(*fake_, options_.paths).status().message(),
              HasSubstr("is not below the cgroup2 mount"));
  WriteSelfCgroup("/../../escaped");
  EXPECT_THAT(FindOwnCgroupDir(*fake_, options_.paths).status().message(),
              HasSubstr("outside its cgroup namespace"));
}

TEST_F(JobCgroupTest, EscapedMountPoint) {
  const std::string spaced = dir_.string() + "/with space";
  fake_->MakeCgroup(spaced, kAllControllers);
  std::string escaped = dir_.string() + "/with\\040space";
  WriteMountinfo(escaped, "/");
  WriteSelfCgroup("/");
  EXPECT_EQ(FindOwnCgroupDir(*fake_, options_.paths).value(), spaced);
}

TEST_F(JobCgroupTest, NoMemoryControllerNamesWhatThereIs) {
  FakeCgroupFs::Put(own_ + "/cgroup.controllers", "cpu pids\n");
  absl::StatusOr<std::unique_ptr<JobCgroupRoot>> root = JobCgroupRoot::Detect(options_);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(root.status().message(),
              HasSubstr("the memory controller is not available in " + own_ + " (" + own_ +
                        "/cgroup.controllers has: cpu pids)"));
  EXPECT_THAT(root.status().message(), HasSubstr("Delegate=yes"));
  EXPECT_FALSE(fs::exists(own_ + "/mobiusd"));  // nothing touched
}

TEST_F(JobCgroupTest, NotWritableNamesTheFileAndErrno) {
  fake_->not_writable[own_ + "/cgroup.subtree_control"] = EROFS;
  absl::StatusOr<std::unique_ptr<JobCgroupRoot>> root = JobCgroupRoot::Detect(options_);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(root.status().message(), HasSubstr("not delegated to this process"));
  EXPECT_THAT(root.status().message(),
              HasSubstr(own_ + "/cgroup.subtree_control is not writable: Read-only file system"));

  fake_->not_writable = {{own_, EACCES}};
  root = JobCgroupRoot::Detect(options_);
  EXPECT_THAT(root.status().message(), HasSubstr(own_ + " is not writable: Permission denied"));
}

TEST_F(JobCgroupTest, ThreadedCgroupIsRefused) {
  FakeCgroupFs::Put(own_ + "/cgroup.type", "threaded\n");
  absl::StatusOr<std::unique_ptr<JobCgroupRoot>> root = JobCgroupRoot::Detect(options_);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(root.status().message(), HasSubstr("of type \"threaded\""));
}

TEST_F(JobCgroupTest, AProcessThatCannotMoveIsNamed) {
  fake_->fail_write[own_ + "/mobiusd/cgroup.procs"] = EACCES;
  absl::StatusOr<std::unique_ptr<JobCgroupRoot>> root = JobCgroupRoot::Detect(options_);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(root.status().message(), HasSubstr("cannot move process 100 from " + own_));
  EXPECT_THAT(root.status().message(), HasSubstr("Permission denied"));
}

TEST_F(JobCgroupTest, MemoryThatWillNotEnableIsAPrecondition) {
  fake_->fail_write[own_ + "/cgroup.subtree_control"] = EBUSY;
  absl::StatusOr<std::unique_ptr<JobCgroupRoot>> root = JobCgroupRoot::Detect(options_);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(root.status().message(),
              HasSubstr("cannot enable the memory controller for " + own_ + "'s children (EBUSY"))
      << root.status();
}

TEST_F(JobCgroupTest, WithoutCpuControllerJobsGetNoWeight) {
  FakeCgroupFs::Put(own_ + "/cgroup.controllers", "memory pids\n");
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  EXPECT_FALSE(root->support().cpu);
  EXPECT_THAT(root->support().cpu_off, HasSubstr("has no cpu controller"));
  EXPECT_THAT(root->support().Describe(), HasSubstr("cpu.weight: off ("));
  EXPECT_EQ(JobLimitsFor(root->support(), 4 * kGiB, 2, std::nullopt).cpu_weight, 0);
  JobLimits limits;
  limits.cpu_weight = 200;
  EXPECT_EQ(root->CreateJob("j-1", limits).status().code(), absl::StatusCode::kFailedPrecondition);
  limits.cpu_weight = 0;
  absl::StatusOr<std::unique_ptr<JobCgroup>> job = root->CreateJob("j-1", limits);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(fs::exists((*job)->path() + "/cpu.weight"));
}

// ---- job cgroups
// ---------------------------------------------------------------------------------

TEST_F(JobCgroupTest, CreateJobWritesTheLimitsAndRemoveCleansUp) {
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  JobLimits limits;
  limits.memory_max_bytes = 8 * kGiB;
  limits.cpu_weight = 400;
  absl::StatusOr<std::unique_ptr<JobCgroup>> job = root->CreateJob("j-000123", limits);
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string dir = own_ + "/job-j-000123";
  EXPECT_EQ((*job)->path(), dir);
  EXPECT_EQ(Read(dir + "/memory.max"), "8589934592");
  EXPECT_EQ(Read(dir + "/memory.swap.max"), "0");
  EXPECT_EQ(Read(dir + "/memory.oom.group"), "1");
  EXPECT_EQ(Read(dir + "/cpu.weight"), "400");
  EXPECT_TRUE(fake_->attached.empty());

  // procs_fd() is the job's cgroup.procs, write-only.
  struct stat by_fd, by_path;
  ASSERT_GE((*job)->procs_fd(), 0);
  ASSERT_EQ(fstat((*job)->procs_fd(), &by_fd), 0);
  ASSERT_EQ(stat((dir + "/cgroup.procs").c_str(), &by_path), 0);
  EXPECT_EQ(by_fd.st_ino, by_path.st_ino);
  EXPECT_EQ(fcntl((*job)->procs_fd(), F_GETFL) & O_ACCMODE, O_WRONLY);
  EXPECT_TRUE(fcntl((*job)->procs_fd(), F_GETFD) & FD_CLOEXEC);

  ASSERT_TRUE((*job)->AddProcess(777).ok());
  EXPECT_THAT(WordsOf(Read(dir + "/cgroup.procs")), ElementsAre("777"));
  ASSERT_TRUE((*job)->Remove().ok());  // kills 777 (cgroup.kill), then rmdir
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_EQ((*job)->procs_fd(), -1);
  EXPECT_TRUE((*job)->Remove().ok());
  EXPECT_EQ((*job)->Stats().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(JobCgroupTest, NoLimitIsMaxAndNoSwapAccountingWritesNoSwapLimit) {
  fake_->no_swap = true;
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  EXPECT_FALSE(root->support().swap);
  absl::StatusOr<std::unique_ptr<JobCgroup>> job = root->CreateJob("j-2", JobLimits{});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(Read((*job)->path() + "/memory.max"), "max");
  EXPECT_FALSE(fs::exists((*job)->path() + "/memory.swap.max"));
  EXPECT_EQ(Read((*job)->path() + "/cpu.weight"), "100\n");  // untouched
}

TEST_F(JobCgroupTest, BadLimitsAreInvalid) {
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  JobLimits limits;
  limits.memory_max_bytes = -1;
  EXPECT_EQ(root->CreateJob("j", limits).status().code(), absl::StatusCode::kInvalidArgument);
  limits.memory_max_bytes = 0;
  limits.cpu_weight = 10001;
  EXPECT_EQ(root->CreateJob("j", limits).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(root->CreateJob("", JobLimits{}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(own_ + "/job-j"));
}

TEST_F(JobCgroupTest, AFailedWriteLeavesNothingBehind) {
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  fake_->fail_write[own_ + "/job-j-9/memory.oom.group"] = EINVAL;
  absl::StatusOr<std::unique_ptr<JobCgroup>> job = root->CreateJob("j-9", JobLimits{});
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(),
              HasSubstr("job cgroup " + own_ + "/job-j-9: setting memory.oom.group to 1"));
  EXPECT_FALSE(fs::exists(own_ + "/job-j-9"));
  fake_->fail_write.clear();
  EXPECT_TRUE(root->CreateJob("j-9", JobLimits{}).ok());  // the name is free again
}

TEST_F(JobCgroupTest, TheSameJobIdTwiceWhileLiveIsRefused) {
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  absl::StatusOr<std::unique_ptr<JobCgroup>> first = root->CreateJob("j-5", JobLimits{});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE((*first)->AddProcess(555).ok());
  absl::StatusOr<std::unique_ptr<JobCgroup>> second = root->CreateJob("j-5", JobLimits{});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(second.status().message(), HasSubstr("in use by a running job of this daemon"));
  EXPECT_THAT(WordsOf(Read(own_ + "/job-j-5/cgroup.procs")), ElementsAre("555"));  // untouched
  first->reset();
  EXPECT_FALSE(fs::exists(own_ + "/job-j-5"));
  EXPECT_TRUE(root->CreateJob("j-5", JobLimits{}).ok());
}

TEST_F(JobCgroupTest, JobsOutliveTheirRoot) {
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  absl::StatusOr<std::unique_ptr<JobCgroup>> job = root->CreateJob("j-6", JobLimits{});
  ASSERT_TRUE(job.ok()) << job.status();
  root.reset();
  EXPECT_TRUE((*job)->Remove().ok());
  EXPECT_FALSE(fs::exists(own_ + "/job-j-6"));
}

TEST_F(JobCgroupTest, ALeftoverIsKilledAndReplaced) {
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  const std::string dir = own_ + "/job-j-7";
  ASSERT_TRUE(fake_->MakeDir(dir).ok());
  ASSERT_TRUE(fake_->MakeDir(dir + "/inner").ok());  // a cgroup the old job made itself
  FakeCgroupFs::Put(dir + "/cgroup.procs", "900\n");
  FakeCgroupFs::Put(dir + "/inner/cgroup.procs", "901\n");
  FakeCgroupFs::Put(dir + "/memory.max", "1\n");
  JobLimits limits;
  limits.memory_max_bytes = 2 * kGiB;
  absl::StatusOr<std::unique_ptr<JobCgroup>> job = root->CreateJob("j-7", limits);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_THAT(WordsOf(Read(dir + "/cgroup.procs")), ::testing::IsEmpty());
  EXPECT_FALSE(fs::exists(dir + "/inner"));
  EXPECT_EQ(Read(dir + "/memory.max"), "2147483648");
}

TEST_F(JobCgroupTest, WithoutCgroupKillEachProcessIsSigkilled) {
  fake_->no_kill_file = true;
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  EXPECT_FALSE(root->support().kill);
  const std::string dir = own_ + "/job-j-8";
  ASSERT_TRUE(fake_->MakeDir(dir).ok());
  FakeCgroupFs::Put(dir + "/cgroup.procs", "900\n901\n");
  absl::StatusOr<std::unique_ptr<JobCgroup>> job = root->CreateJob("j-8", JobLimits{});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_THAT(fake_->kills, UnorderedElementsAre(std::pair<pid_t, int>(900, SIGKILL),
                                                 std::pair<pid_t, int>(901, SIGKILL)));
}

TEST_F(JobCgroupTest, ALeftoverThatWillNotDieFailsClearly) {
  options_.kill_timeout = absl::Milliseconds(50);
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  const std::string dir = own_ + "/job-j-10";
  ASSERT_TRUE(fake_->MakeDir(dir).ok());
  FakeCgroupFs::Put(dir + "/cgroup.procs", "900\n");
  fake_->unkillable = {900};
  absl::StatusOr<std::unique_ptr<JobCgroup>> job = root->CreateJob("j-10", JobLimits{});
  EXPECT_EQ(job.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(job.status().message(), HasSubstr("a leftover job cgroup will not go away"));
  EXPECT_THAT(job.status().message(), HasSubstr("processes remain in cgroup " + dir));
  EXPECT_THAT(job.status().message(), HasSubstr("pids 900"));
  // Not reserved by the failed attempt: the same reason again, not ALREADY_EXISTS.
  EXPECT_EQ(root->CreateJob("j-10", JobLimits{}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(JobCgroupTest, RemoveLeftoversSparesLiveJobsAndOtherCgroups) {
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  absl::StatusOr<std::unique_ptr<JobCgroup>> live = root->CreateJob("live", JobLimits{});
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_TRUE(fake_->MakeDir(own_ + "/job-old-1").ok());
  ASSERT_TRUE(fake_->MakeDir(own_ + "/job-old-2").ok());
  FakeCgroupFs::Put(own_ + "/job-old-2/cgroup.procs", "950\n");
  ASSERT_TRUE(fake_->MakeDir(own_ + "/someone-else").ok());
  absl::StatusOr<int> removed = root->RemoveLeftovers();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);
  EXPECT_FALSE(fs::exists(own_ + "/job-old-1"));
  EXPECT_FALSE(fs::exists(own_ + "/job-old-2"));
  EXPECT_TRUE(fs::exists(own_ + "/job-live"));
  EXPECT_TRUE(fs::exists(own_ + "/someone-else"));
  EXPECT_TRUE(fs::exists(own_ + "/mobiusd"));
}

TEST_F(JobCgroupTest, DeviceFilterWhenPermitted) {
  fake_->device_probe = absl::OkStatus();
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  ASSERT_TRUE(root->support().devices);
  EXPECT_EQ(fake_->attached.count(own_ + "/mobius-device-probe"), 1u);  // the probe's
  EXPECT_FALSE(fs::exists(own_ + "/mobius-device-probe"));
  JobLimits limits = JobLimitsFor(root->support(), 4 * kGiB, 2, std::vector<uint32_t>{3, 1});
  absl::StatusOr<std::unique_ptr<JobCgroup>> job = root->CreateJob("j-11", limits);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(fake_->attached.count((*job)->path()), 1u);
  const DeviceDenyRule& rule = fake_->attached[(*job)->path()];
  EXPECT_EQ(rule.major, 195u);
  EXPECT_EQ(rule.first_minor, 0u);
  EXPECT_EQ(rule.last_minor, 253u);
  EXPECT_THAT(rule.allowed_minors, ElementsAre(3, 1));
  EXPECT_EQ(DescribeRule(rule), "char 195:[0-253] denied except 1, 3");
}

TEST_F(JobCgroupTest, DeviceFilterAskedForWithoutSupportIsAPrecondition) {
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  // JobLimitsFor drops the minors when the filter is off...
  EXPECT_FALSE(JobLimitsFor(root->support(), 0, 1, std::vector<uint32_t>{0}).gpu_minors);
  // ...and asking for it anyway is refused, not silently ignored.
  JobLimits limits;
  limits.gpu_minors = std::vector<uint32_t>{0};
  absl::StatusOr<std::unique_ptr<JobCgroup>> job = root->CreateJob("j-12", limits);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(job.status().message(), HasSubstr("GPU device filter was asked for"));
  EXPECT_THAT(job.status().message(), HasSubstr("no CAP_BPF"));
}

TEST_F(JobCgroupTest, StatsAndOomDescriptions) {
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  JobLimits limits;
  limits.memory_max_bytes = 8 * kGiB;
  absl::StatusOr<std::unique_ptr<JobCgroup>> job = root->CreateJob("j-13", limits);
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string dir = (*job)->path();
  FakeCgroupFs::Put(dir + "/memory.current", "1048576\n");
  FakeCgroupFs::Put(dir + "/memory.peak", "8589930000\n");
  FakeCgroupFs::Put(dir + "/memory.events",
                    "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 1\n");
  absl::StatusOr<JobCgroupStats> stats = (*job)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->memory_current_bytes, 1048576);
  EXPECT_EQ(stats->memory_peak_bytes, 8589930000);
  EXPECT_EQ(stats->memory_max_bytes, 8 * kGiB);
  EXPECT_EQ(stats->oom, 1);
  EXPECT_EQ(stats->oom_kill, 1);
  EXPECT_EQ(stats->oom_group_kill, 1);
  EXPECT_TRUE(stats->oom_killed());
  EXPECT_EQ(DescribeOomKill(*stats),
            "the job was killed by its cgroup's memory limit (memory.max 8.0 GiB, peak 8.0 GiB): "
            "it needed more host memory than its estimate plus the margin");

  // Killed by an OOM above the job (the machine's, mobiusd's own cgroup's); no memory.peak.
  fs::remove(dir + "/memory.peak");
  FakeCgroupFs::Put(dir + "/memory.events", "oom 0\noom_kill 2\n");
  stats = (*job)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->memory_peak_bytes, -1);
  EXPECT_EQ(DescribeOomKill(*stats),
            "the job was killed by the kernel's OOM killer, not at its own limit (memory.max "
            "8.0 GiB): the machine, or mobiusd's own cgroup, ran out of memory");

  FakeCgroupFs::Put(dir + "/memory.events", "oom 0\noom_kill 0\n");
  FakeCgroupFs::Put(dir + "/memory.max", "max\n");
  stats = (*job)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->memory_max_bytes, -1);
  EXPECT_FALSE(stats->oom_killed());
  EXPECT_EQ(DescribeOomKill(*stats), "");
}

// ---- names and policy
// ----------------------------------------------------------------------------

TEST(JobCgroupNameTest, SafeIdsAreKeptOthersAreSanitisedAndStayDistinct) {
  EXPECT_EQ(JobCgroupName("j-000123"), "job-j-000123");
  EXPECT_EQ(JobCgroupName("a.b_C-9"), "job-a.b_C-9");
  const std::string slashed = JobCgroupName("alice/../x");
  EXPECT_THAT(slashed, ::testing::MatchesRegex("job-alice_\\.\\._x-[0-9a-f]{8}"));
  EXPECT_NE(slashed, JobCgroupName("alice_.._x"));
  EXPECT_NE(JobCgroupName("a b"), JobCgroupName("a\nb"));
  EXPECT_EQ(JobCgroupName(std::string("nul\0byte", 8)).find('\0'), std::string::npos);
  const std::string long_id(200, 'x');
  const std::string name = JobCgroupName(long_id);
  EXPECT_EQ(name.size(), 4 + 64 + 1 + 8);
  EXPECT_NE(name, JobCgroupName(long_id + "y"));
}

TEST_F(JobCgroupTest, AnIdWithSlashesMakesOneDirectory) {
  std::unique_ptr<JobCgroupRoot> root = DetectOrDie();
  ASSERT_NE(root, nullptr);
  absl::StatusOr<std::unique_ptr<JobCgroup>> job = root->CreateJob("../../etc", JobLimits{});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(fs::path((*job)->path()).parent_path(), fs::path(own_));
  EXPECT_THAT((*job)->path(), HasSubstr("/job-.._.._etc-"));
}

TEST(JobMemoryLimitTest, EstimatePlusAQuarterAndAtLeastOneGiB) {
  EXPECT_EQ(JobMemoryLimit(0), 0);
  EXPECT_EQ(JobMemoryLimit(-5), 0);
  EXPECT_EQ(JobMemoryLimit(kGiB / 2), kGiB / 2 + kGiB);  // small jobs: the fixed part
  EXPECT_EQ(JobMemoryLimit(2 * kGiB), 3 * kGiB);
  EXPECT_EQ(JobMemoryLimit(4 * kGiB), 5 * kGiB);  // where the two margins meet
  EXPECT_EQ(JobMemoryLimit(16 * kGiB), 20 * kGiB);
  EXPECT_EQ(JobMemoryLimit(std::numeric_limits<int64_t>::max() - 1), 0);  // no overflow: no limit
}

TEST(JobLimitsForTest, CpuWeightPerWorker) {
  CgroupSupport sup;
  sup.cpu = true;
  EXPECT_EQ(JobLimitsFor(sup, 0, 1, std::nullopt).cpu_weight, 100);
  EXPECT_EQ(JobLimitsFor(sup, 0, 0, std::nullopt).cpu_weight, 100);
  EXPECT_EQ(JobLimitsFor(sup, 0, 8, std::nullopt).cpu_weight, 800);
  EXPECT_EQ(JobLimitsFor(sup, 0, 1000, std::nullopt).cpu_weight, 10000);
  EXPECT_EQ(JobLimitsFor(sup, 0, std::numeric_limits<int>::max(), std::nullopt).cpu_weight, 10000);
  EXPECT_EQ(JobLimitsFor(sup, 16 * kGiB, 8, std::nullopt).memory_max_bytes, 20 * kGiB);
  sup.devices = true;
  EXPECT_THAT(JobLimitsFor(sup, 0, 2, std::vector<uint32_t>{4, 5}).gpu_minors.value(),
              ElementsAre(4, 5));
}

// ---- the daemon's setup
// --------------------------------------------------------------------------

TEST(JobCgroupModeTest, Parse) {
  EXPECT_EQ(ParseJobCgroupMode("auto").value(), JobCgroupMode::kAuto);
  EXPECT_EQ(ParseJobCgroupMode("off").value(), JobCgroupMode::kOff);
  EXPECT_EQ(ParseJobCgroupMode("required").value(), JobCgroupMode::kRequired);
  absl::StatusOr<JobCgroupMode> bad = ParseJobCgroupMode("on");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("--job_cgroups must be auto, off or required"));
}

TEST_F(JobCgroupTest, SetUpAutoOffRequired) {
  absl::StatusOr<std::unique_ptr<JobCgroupRoot>> off =
      SetUpJobCgroups(JobCgroupMode::kOff, options_);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*off, nullptr);
  EXPECT_FALSE(fs::exists(own_ + "/mobiusd"));

  FakeCgroupFs::Put(own_ + "/cgroup.controllers", "cpu\n");
  absl::StatusOr<std::unique_ptr<JobCgroupRoot>> aut =
      SetUpJobCgroups(JobCgroupMode::kAuto, options_);
  ASSERT_TRUE(aut.ok()) << aut.status();  // a warning, and no isolation
  EXPECT_EQ(*aut, nullptr);
  absl::StatusOr<std::unique_ptr<JobCgroupRoot>> req =
      SetUpJobCgroups(JobCgroupMode::kRequired, options_);
  EXPECT_EQ(req.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(req.status().message(), HasSubstr("--job_cgroups=required: the memory controller"));

  FakeCgroupFs::Put(own_ + "/cgroup.controllers", "cpu memory\n");
  ASSERT_TRUE(fake_->MakeDir(own_ + "/job-crashed").ok());
  aut = SetUpJobCgroups(JobCgroupMode::kAuto, options_);
  ASSERT_TRUE(aut.ok()) << aut.status();
  ASSERT_NE(*aut, nullptr);
  EXPECT_FALSE(fs::exists(own_ + "/job-crashed"));  // leftovers removed at startup
}

// ---- the real kernel
// -----------------------------------------------------------------------------

int64_t SwapTotalKiB() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t value = 0;
  while (in >> key >> value) {
    if (key == "SwapTotal:") return value;
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

// Like the daemon, this moves the processes of the test's own cgroup into <own>/mobiusd and
// enables memory (and cpu) for <own>'s children: harmless, and only where the subtree is
// delegated to us.
TEST(RealJobCgroupTest, AChildOverItsMemoryMaxIsOomKilledAndStatsSaySo) {
  absl::StatusOr<std::unique_ptr<JobCgroupRoot>> root = JobCgroupRoot::Detect();
  if (!root.ok()) GTEST_SKIP() << "no delegated cgroup v2 with memory here: " << root.status();
  if (!(*root)->support().swap && SwapTotalKiB() > 0) {
    GTEST_SKIP() << "swap is on but not accounted (no memory.swap.max): a child over memory.max "
                    "would be swapped out instead of OOM-killed";
  }
  constexpr int64_t kLimit = 64 << 20;
  JobLimits limits;
  limits.memory_max_bytes = kLimit;
  absl::StatusOr<std::unique_ptr<JobCgroup>> job =
      (*root)->CreateJob(absl::StrCat("oom-test-", getpid()), limits);
  ASSERT_TRUE(job.ok()) << job.status();
  const int procs_fd = (*job)->procs_fd();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // In the child only async-signal-safe calls: write, mmap, _exit.
    if (write(procs_fd, "0", 1) != 1) _exit(3);
    constexpr size_t kTouch = size_t{512} << 20;  // 8x the limit
    char* p = static_cast<char*>(
        mmap(nullptr, kTouch, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) _exit(4);
    for (size_t i = 0; i < kTouch; i += 4096) p[i] = 1;
    _exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "the child exited with " << WEXITSTATUS(wstatus)
                                    << " (3: could not enter the cgroup; 0: not limited)";
  EXPECT_EQ(WTERMSIG(wstatus), SIGKILL);
  absl::StatusOr<JobCgroupStats> stats = (*job)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GE(stats->oom, 1);
  EXPECT_GE(stats->oom_kill, 1);
  EXPECT_EQ(stats->memory_max_bytes, kLimit);
  if (stats->memory_peak_bytes >= 0) EXPECT_LE(stats->memory_peak_bytes, kLimit);
  EXPECT_THAT(DescribeOomKill(*stats), HasSubstr("killed by its cgroup's memory limit"));
  const std::string path = (*job)->path();
  EXPECT_TRUE((*job)->Remove().ok());
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace mobius::launch
