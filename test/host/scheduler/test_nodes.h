// Test helpers: NodeResources from the hwloc fixtures of test/data/topology/ and hand-built ones,
// and short constructors for requests and running jobs.
#ifndef MOBIUS_TEST_HOST_SCHEDULER_TEST_NODES_H_
#define MOBIUS_TEST_HOST_SCHEDULER_TEST_NODES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "host/scheduler/node_resources.h"
#include "host/scheduler/resources.h"
#include "host/topology/analysis.h"
#include "host/topology/hwloc_source.h"
#include "test/testing/paths.h"

namespace mobius::jobs::testing {

inline constexpr int64_t kGiB = int64_t{1} << 30;

inline std::vector<GpuResource> FixtureGpus(const std::string& name) {
  auto loaded = topology::MakeHwlocXmlFileSource(mobius::testing::TopologyFixture(name))->Load();
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok()) return {};
  return GpuResourcesFromTopology(loaded->topology, topology::Analyze(loaded->topology));
}

// The fixture's GPUs, all allowed, with the given host and pinned budgets.
inline NodeResources FixtureNode(const std::string& name, int64_t host_bytes = 1024 * kGiB,
                                 int64_t pinned_bytes = 256 * kGiB) {
  NodeResources node;
  node.gpus = FixtureGpus(name);
  for (const GpuResource& g : node.gpus) node.allowed_gpus.push_back(g.index);
  node.host_bytes = host_bytes;
  node.pinned_bytes = pinned_bytes;
  return node;
}

inline NodeResources PaperTestbed(int64_t host_bytes = 1024 * kGiB,
                                  int64_t pinned_bytes = 256 * kGiB) {
  return FixtureNode("paper_testbed_2s_2sw_8x3090.xml", host_bytes, pinned_bytes);
}

// `n` GPUs of `memory` bytes each, each its own contention group, one socket; all allowed.
inline NodeResources FlatNode(int n, int64_t memory = 80 * kGiB, int64_t host_bytes = 1024 * kGiB,
                              int64_t pinned_bytes = 256 * kGiB) {
  NodeResources node;
  for (int i = 0; i < n; ++i) {
    GpuResource g;
    g.index = i;
    g.memory_bytes = memory;
    g.contention_group = i;
    g.root_complex = 0;
    g.package = 0;
    g.numa_node = 0;
    node.gpus.push_back(g);
    node.allowed_gpus.push_back(i);
  }
  node.host_bytes = host_bytes;
  node.pinned_bytes = pinned_bytes;
  return node;
}

inline JobRequest Job(const std::string& id, int gpus, int64_t host_bytes = 10 * kGiB,
                      int32_t priority = 0, int64_t seq = 0, uint32_t uid = 1000) {
  JobRequest r;
  r.job_id = id;
  r.uid = uid;
  r.priority = priority;
  r.submit_seq = seq;
  r.gpus = gpus;
  r.host_bytes = host_bytes;
  r.pinned_bytes = host_bytes / 4;
  r.per_gpu_bytes = 4 * kGiB;
  return r;
}

inline RunningJob Running(const std::string& id, std::vector<int> gpus,
                          int64_t host_bytes = 10 * kGiB, int32_t priority = 0, int64_t seq = 0,
                          uint32_t uid = 1000) {
  RunningJob r;
  r.job_id = id;
  r.uid = uid;
  r.priority = priority;
  r.submit_seq = seq;
  r.gpus = std::move(gpus);
  r.host_bytes = host_bytes;
  r.pinned_bytes = host_bytes / 4;
  return r;
}

}  // namespace mobius::jobs::testing

#endif  // MOBIUS_TEST_HOST_SCHEDULER_TEST_NODES_H_
