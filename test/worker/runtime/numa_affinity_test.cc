// Pinning a worker to its NUMA node's CPUs: the intersection with what this machine allows, the
// CPU list format, and that every thread of the process (also those started before) is moved.
#include "worker/runtime/numa_affinity.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<int> AffinityOf(pid_t tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(tid, sizeof(set), &set), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

TEST(NumaAffinityTest, UsableCpusIsTheSortedIntersection) {
  EXPECT_THAT(UsableCpus({16, 3, 2, 17, 3}, {0, 1, 2, 3}), ElementsAre(2, 3));
  EXPECT_THAT(UsableCpus({16, 17}, {0, 1}), IsEmpty());
  EXPECT_THAT(UsableCpus({}, {0, 1}), IsEmpty());
}

TEST(NumaAffinityTest, FormatCpuList) {
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({5}), "5");
  EXPECT_EQ(FormatCpuList({}), "");
}

TEST(NumaAffinityTest, PinAllThreadsMovesThreadsStartedBefore) {
  absl::StatusOr<std::vector<int>> allowed = AllowedCpus();
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  ASSERT_FALSE(allowed->empty());
  std::atomic<pid_t> tid{0};
  std::atomic<bool> done{false};
  std::thread before([&] {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    while (!done) std::this_thread::yield();
  });
  while (tid == 0) std::this_thread::yield();

  const std::vector<int> one = {allowed->back()};
  ASSERT_TRUE(PinAllThreads(one).ok());
  EXPECT_EQ(AffinityOf(0), one);
  EXPECT_EQ(AffinityOf(tid), one);
  done = true;
  before.join();

  EXPECT_FALSE(PinAllThreads({}).ok());
  EXPECT_FALSE(PinAllThreads({-1}).ok());
  ASSERT_TRUE(PinAllThreads(*allowed).ok());  // restore
  EXPECT_EQ(AffinityOf(0), *allowed);
}

}  // namespace
}  // namespace mobius::runtime
