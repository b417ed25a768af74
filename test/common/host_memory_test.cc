// What this machine can give a job (host_memory.h): MemAvailable, capped by the tightest cgroup
// (v2) limit among the process's cgroup and its ancestors, read from fixture directories laid out
// like /proc and /sys/fs/cgroup; and once against the real /proc.
#include "common/host_memory.h"

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace mobius {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMemTotalKb = 16 * 1024 * 1024;      // 16 GiB
constexpr int64_t kMemAvailableKb = 10 * 1024 * 1024;  // 10 GiB

// A fake /proc (meminfo, self/cgroup "0::/a/b") and a fake cgroup root with /a and /a/b, removed
// by the destructor. Each test writes the memory.max / memory.current it needs.
class HostMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/mobius_host_memory_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    proc_ = dir_ + "/proc";
    cgroup_root_ = dir_ + "/cgroup";
    fs::create_directories(proc_ + "/self");
    fs::create_directories(cgroup_root_ + "/a/b");
    Write(proc_ + "/meminfo", MemInfo(true));
    Write(proc_ + "/self/cgroup", "0::/a/b\n");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  static std::string MemInfo(bool with_available) {
    std::string s = "MemTotal:       " + std::to_string(kMemTotalKb) + " kB\n" +
                    "MemFree:         1048576 kB\n";
    if (with_available) s += "MemAvailable:   " + std::to_string(kMemAvailableKb) + " kB\n";
    return s + "Buffers:          262144 kB\nCached:          4194304 kB\n";
  }
  static void Write(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::trunc);
    out << text;
  }
  // memory.max ("max" or bytes) and memory.current of the cgroup `dir` ("/a", "/a/b").
  void SetCgroup(const std::string& dir, const std::string& max, int64_t current) {
    Write(cgroup_root_ + dir + "/memory.max", max + "\n");
    Write(cgroup_root_ + dir + "/memory.current", std::to_string(current) + "\n");
  }
  absl::StatusOr<HostMemory> Read() { return ReadHostMemory(proc_, cgroup_root_); }

  std::string dir_, proc_, cgroup_root_;
};

TEST_F(HostMemoryTest, AnAncestorsLimitBindsWhenTheOwnCgroupHasNone) {
  SetCgroup("/a", std::to_string(4 * kGiB), 1 * kGiB);
  SetCgroup("/a/b", "max", kGiB / 2);
  auto m = Read();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->mem_total_bytes, kMemTotalKb * 1024);
  EXPECT_EQ(m->mem_available_bytes, kMemAvailableKb * 1024);
  EXPECT_EQ(m->cgroup_limit_bytes, 4 * kGiB);
  EXPECT_EQ(m->cgroup_usage_bytes, 1 * kGiB);
  EXPECT_EQ(m->available_bytes(), 3 * kGiB);  // min(10 GiB, 4 - 1 GiB)
  const std::string d = m->Describe();
  EXPECT_EQ(d.rfind("3.0 GiB", 0), 0u) << d;
  EXPECT_NE(d.find("cgroup /a "), std::string::npos) << d;
  EXPECT_NE(d.find("limit 4.0 GiB"), std::string::npos) << d;
  EXPECT_NE(d.find("1.0 GiB used"), std::string::npos) << d;
}

// "Tightest" is the least room left (limit - usage), not the smallest limit: /a/b's 2 GiB limit
// leaves 1.5 GiB, /a's 4 GiB limit only 0.5 GiB.
TEST_F(HostMemoryTest, TheLeastRoomAmongTheCgroupAndItsAncestorsWins) {
  SetCgroup("/a", std::to_string(4 * kGiB), 4 * kGiB - kGiB / 2);
  SetCgroup("/a/b", std::to_string(2 * kGiB), kGiB / 2);
  auto m = Read();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->available_bytes(), kGiB / 2);
  EXPECT_EQ(m->cgroup_limit_bytes, 4 * kGiB);
  EXPECT_NE(m->Describe().find("cgroup /a "), std::string::npos) << m->Describe();

  // The other way round: the own cgroup is the tighter one.
  SetCgroup("/a", std::to_string(8 * kGiB), 1 * kGiB);
  SetCgroup("/a/b", std::to_string(2 * kGiB), kGiB / 2);
  m = Read();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->available_bytes(), kGiB + kGiB / 2);
  EXPECT_EQ(m->cgroup_limit_bytes, 2 * kGiB);
  EXPECT_EQ(m->cgroup, "/a/b");
  EXPECT_NE(m->Describe().find("cgroup /a/b limit 2.0 GiB"), std::string::npos) << m->Describe();

  // A limit above MemAvailable's room: MemAvailable binds.
  SetCgroup("/a", std::to_string(64 * kGiB), 1 * kGiB);
  SetCgroup("/a/b", "max", 0);
  m = Read();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->available_bytes(), kMemAvailableKb * 1024);
}

TEST_F(HostMemoryTest, MaxEverywhereIsNoLimit) {
  SetCgroup("/a", "max", 3 * kGiB);
  SetCgroup("/a/b", "max", 2 * kGiB);
  auto m = Read();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->cgroup_limit_bytes, -1);
  EXPECT_EQ(m->cgroup, "/a/b");
  EXPECT_EQ(m->available_bytes(), m->mem_available_bytes);
  EXPECT_EQ(m->available_bytes(), kMemAvailableKb * 1024);
  EXPECT_EQ(m->Describe().find("cgroup"), std::string::npos) << m->Describe();
  EXPECT_EQ(m->Describe().rfind("10.0 GiB", 0), 0u) << m->Describe();
}

TEST_F(HostMemoryTest, NoCgroupFilesOrOnlyCgroupV1IsNoLimit) {
  // No memory.max anywhere under the cgroup root.
  auto m = Read();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->cgroup_limit_bytes, -1);
  EXPECT_EQ(m->available_bytes(), kMemAvailableKb * 1024);

  SetCgroup("/a", std::to_string(kGiB), 0);
  Write(proc_ + "/self/cgroup", "5:memory:/a\n");  // cgroup v1 only: not read
  m = Read();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->cgroup_limit_bytes, -1);
  EXPECT_EQ(m->cgroup, "");

  fs::remove(proc_ + "/self/cgroup");
  m = Read();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->cgroup_limit_bytes, -1);
  EXPECT_EQ(m->cgroup, "");
}

TEST_F(HostMemoryTest, MeminfoWithoutMemAvailableIsAnErrorNamingTheFile) {
  Write(proc_ + "/meminfo", MemInfo(false));
  auto m = Read();
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInternal) << m.status();
  EXPECT_NE(m.status().message().find(proc_ + "/meminfo"), std::string::npos) << m.status();

  fs::remove(proc_ + "/meminfo");
  m = Read();
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInternal) << m.status();
  EXPECT_NE(m.status().message().find(proc_ + "/meminfo"), std::string::npos) << m.status();
}

TEST(HostMemoryAvailableTest, IsTheSmallerOfMemAvailableAndTheCgroupsRoom) {
  HostMemory m;
  m.mem_total_bytes = 16 * kGiB;
  m.mem_available_bytes = 10 * kGiB;
  EXPECT_EQ(m.available_bytes(), 10 * kGiB);  // no cgroup limit
  m.cgroup = "/slurm/job_12";
  m.cgroup_limit_bytes = 8 * kGiB;
  m.cgroup_usage_bytes = 2 * kGiB;
  EXPECT_EQ(m.available_bytes(), 6 * kGiB);
  EXPECT_NE(m.Describe().find("cgroup /slurm/job_12 limit 8.0 GiB"), std::string::npos)
      << m.Describe();
  m.cgroup_limit_bytes = 20 * kGiB;
  EXPECT_EQ(m.available_bytes(), 10 * kGiB);
  m.cgroup_limit_bytes = 1 * kGiB;  // usage above the limit (reclaim pending): nothing, not < 0
  EXPECT_EQ(m.available_bytes(), 0);
}

TEST(HostMemoryRealProcTest, ThisMachineHasSomeMemory) {
  auto m = ReadHostMemory();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GT(m->mem_total_bytes, 0);
  EXPECT_GT(m->available_bytes(), 0) << m->Describe();
  EXPECT_LE(m->available_bytes(), m->mem_total_bytes) << m->Describe();
  EXPECT_LE(m->available_bytes(), m->mem_available_bytes) << m->Describe();
}

}  // namespace
}  // namespace mobius
