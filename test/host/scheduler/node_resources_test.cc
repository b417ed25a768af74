// NodeResources from the topology fixtures, and the CUDA_VISIBLE_DEVICES-style GPU allow-list.
#include "host/scheduler/node_resources.h"

#include "absl/strings/ascii.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/host/scheduler/test_nodes.h"

namespace mobius::jobs {
namespace {

using ::testing::ElementsAre;
using testing::FixtureGpus;
using ::testing::HasSubstr;
using testing::kGiB;

TEST(GpuResourcesFromTopology, PaperTestbedTwoSwitchesTwoSockets) {
  std::vector<GpuResource> gpus = FixtureGpus("paper_testbed_2s_2sw_8x3090.xml");
  ASSERT_EQ(gpus.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    SCOPED_TRACE(i);
    const GpuResource& g = gpus[i];
    const int side = i < 4 ? 0 : 1;
    EXPECT_EQ(g.index, i);
    EXPECT_EQ(g.memory_bytes, int64_t{24850752} * 1024);  // CUDAGlobalMemorySize KiB
    EXPECT_THAT(g.name, HasSubstr("3090"));
    EXPECT_THAT(g.uuid, ::testing::StartsWith("GPU-"));
    EXPECT_EQ(g.switch_index, side);
    EXPECT_EQ(g.contention_group, side);
    EXPECT_EQ(g.root_complex, side);
    EXPECT_EQ(g.package, side);
    EXPECT_EQ(g.numa_node, side);
    EXPECT_TRUE(g.nvlink_peers.empty());
  }
}

TEST(GpuResourcesFromTopology, DgxHasAllPairsNvlinkAndFourUplinks) {
  std::vector<GpuResource> gpus = FixtureGpus("nvlink_dgx_8xh100.xml");
  ASSERT_EQ(gpus.size(), 8u);
  EXPECT_THAT(gpus[0].nvlink_peers, ElementsAre(1, 2, 3, 4, 5, 6, 7));
  EXPECT_THAT(gpus[5].nvlink_peers, ElementsAre(0, 1, 2, 3, 4, 6, 7));
  EXPECT_EQ(gpus[0].memory_bytes, int64_t{83025152} * 1024);
  // Two H100 per switch, one switch per root port: groups of two.
  EXPECT_EQ(gpus[0].contention_group, gpus[1].contention_group);
  EXPECT_NE(gpus[1].contention_group, gpus[2].contention_group);
  EXPECT_EQ(gpus[3].package, 0);
  EXPECT_EQ(gpus[4].package, 1);
}

TEST(GpuResourcesFromTopology, RootPortWorkstationHasOneGroupPerGpu) {
  std::vector<GpuResource> gpus = FixtureGpus("root_ports_1s_4gpu.xml");
  ASSERT_EQ(gpus.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(gpus[i].switch_index, -1);
    for (int j = 0; j < i; ++j) EXPECT_NE(gpus[i].contention_group, gpus[j].contention_group);
  }
}

TEST(GpuResourcesFromTopology, CpuOnlyHasNoGpus) {
  EXPECT_TRUE(FixtureGpus("cpu_only_1s.xml").empty());
}

TEST(ParseGpuAllowList, IndicesAndUuidsInAnyOrder) {
  std::vector<GpuResource> gpus = FixtureGpus("paper_testbed_2s_2sw_8x3090.xml");
  ASSERT_EQ(gpus.size(), 8u);
  auto list = ParseGpuAllowList(" 5, 1 ," + gpus[3].uuid, gpus);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_THAT(*list, ElementsAre(1, 3, 5));
  // A unique prefix is enough, in any case, as CUDA accepts.
  auto prefix = ParseGpuAllowList(absl::AsciiStrToUpper(gpus[6].uuid.substr(0, 12)), gpus);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_THAT(*prefix, ElementsAre(6));
}

TEST(ParseGpuAllowList, EmptyMeansNoGpu) {
  std::vector<GpuResource> gpus = FixtureGpus("paper_testbed_2s_2sw_8x3090.xml");
  auto list = ParseGpuAllowList("  ", gpus);
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

TEST(ParseGpuAllowList, BadEntriesNameTheEntry) {
  std::vector<GpuResource> gpus = FixtureGpus("paper_testbed_2s_2sw_8x3090.xml");
  struct Case {
    std::string spec;
    std::string message;
  };
  const Case cases[] = {
      {"0,8", "entry 2 \"8\": no such GPU, the node has 8 GPUs (indices 0-7)"},
      {"0,,1", "entry 2 is empty"},
      {"1,1", "entry 2 \"1\": GPU 1 is already entry 1"},
      {"-1", "entry 1 \"-1\": not a GPU index or UUID"},
      {"gpu0", "entry 1 \"gpu0\": not a GPU index or UUID"},
      {"GPU-", "entry 1 \"GPU-\": not a GPU index or UUID"},
      {"GPU-ffffffff", "entry 1 \"GPU-ffffffff\": no GPU has this UUID"},
      {"MIG-abc", "MIG instances are not supported"},
      {"99999999999999999999", "no such GPU"},
      {"GPU", "not a GPU index or UUID"},
  };
  for (const Case& c : cases) {
    auto list = ParseGpuAllowList(c.spec, gpus);
    ASSERT_FALSE(list.ok()) << c.spec;
    EXPECT_EQ(list.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(list.status().message(), HasSubstr(c.message)) << c.spec;
  }
  // "GPU-" alone matches every GPU; a one-character prefix shared by two GPUs is ambiguous.
  std::vector<GpuResource> two(2);
  two[0].index = 0;
  two[0].uuid = "GPU-aa11";
  two[1].index = 1;
  two[1].uuid = "GPU-aa22";
  auto ambiguous = ParseGpuAllowList("GPU-aa", two);
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_THAT(ambiguous.status().message(), HasSubstr("ambiguous UUID prefix, matches GPUs 0,1"));
}

TEST(MakeNodeResources, AllowListAndBudgets) {
  auto loaded = topology::MakeHwlocXmlFileSource(
                    mobius::testing::TopologyFixture("paper_testbed_2s_2sw_8x3090.xml"))
                    ->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const topology::TopologyFacts facts = topology::Analyze(loaded->topology);

  NodeConfig all;
  all.host_bytes = 1200 * kGiB;
  all.pinned_bytes = 300 * kGiB;
  auto node = MakeNodeResources(loaded->topology, facts, all);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_THAT(node->allowed_gpus, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_EQ(node->host_bytes, 1200 * kGiB);
  EXPECT_EQ(node->pinned_bytes, 300 * kGiB);
  EXPECT_FALSE(node->draining);

  NodeConfig some = all;
  some.gpu_allow_list = "4,5,6,7";
  node = MakeNodeResources(loaded->topology, facts, some);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->gpus.size(), 8u);  // every GPU is known, only four may be handed out
  EXPECT_THAT(node->allowed_gpus, ElementsAre(4, 5, 6, 7));

  NodeConfig bad = all;
  bad.gpu_allow_list = "0,9";
  node = MakeNodeResources(loaded->topology, facts, bad);
  ASSERT_FALSE(node.ok());
  EXPECT_THAT(node.status().message(), HasSubstr("gpu_allow_list \"0,9\": entry 2 \"9\""));

  NodeConfig negative = all;
  negative.pinned_bytes = -1;
  node = MakeNodeResources(loaded->topology, facts, negative);
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(node.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(node.status().message(), HasSubstr("pinned_bytes: -1 is negative"));
}

}  // namespace
}  // namespace mobius::jobs
