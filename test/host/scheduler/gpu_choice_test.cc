// Topology-aware GPU choice on the hwloc fixtures (test/data/topology/README.md).
#include "host/scheduler/gpu_choice.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/host/scheduler/test_nodes.h"

namespace mobius::jobs {
namespace {

using ::testing::ElementsAre;
using testing::FixtureGpus;

constexpr char kPaper[] = "paper_testbed_2s_2sw_8x3090.xml";
constexpr char kRtx4090[] = "rtx4090_2s_4sw_8gpu.xml";
constexpr char kRootPorts[] = "root_ports_1s_4gpu.xml";
constexpr char kDgx[] = "nvlink_dgx_8xh100.xml";

// The free GPUs of `gpus` given the busy ones, and the choice.
GpuChoice Choose(const std::vector<GpuResource>& gpus, const std::vector<int>& busy_list, int k,
                 Placement placement, GpuChoiceOptions options = {}) {
  std::vector<bool> busy(gpus.size(), false);
  for (int g : busy_list) busy[g] = true;
  std::vector<int> free;
  for (size_t g = 0; g < gpus.size(); ++g) {
    if (!busy[g]) free.push_back(static_cast<int>(g));
  }
  return ChooseGpus(gpus, free, k, busy, placement, options);
}

TEST(GpuDistance, FollowsNvidiaSmiPathClasses) {
  std::vector<GpuResource> paper = FixtureGpus(kPaper);
  EXPECT_EQ(GpuDistance(paper[0], paper[0]), 0);
  EXPECT_EQ(GpuDistance(paper[0], paper[3]), 1);  // PIX: one switch
  EXPECT_EQ(GpuDistance(paper[0], paper[4]), 4);  // SYS: across sockets
  std::vector<GpuResource> rtx = FixtureGpus(kRtx4090);
  EXPECT_EQ(GpuDistance(rtx[0], rtx[1]), 1);  // one switch
  EXPECT_EQ(GpuDistance(rtx[0], rtx[2]), 2);  // two switches under one host bridge
  EXPECT_EQ(GpuDistance(rtx[0], rtx[7]), 4);
  std::vector<GpuResource> ws = FixtureGpus(kRootPorts);
  EXPECT_EQ(GpuDistance(ws[0], ws[3]), 2);  // PHB: separate root ports, one host bridge
  std::vector<GpuResource> dgx = FixtureGpus(kDgx);
  EXPECT_EQ(GpuDistance(dgx[0], dgx[7]), 0);  // NVLink beats SYS
}

TEST(ScorePlacement, CountsUplinkPairs) {
  std::vector<GpuResource> paper = FixtureGpus(kPaper);
  std::vector<bool> busy(8, false);
  busy[0] = busy[1] = true;
  // GPU 2 shares switch 0's uplink with the two busy GPUs; GPU 4 is alone on switch 1.
  PlacementCost c = ScorePlacement(paper, {2, 4}, busy);
  EXPECT_EQ(c.self_pairs, 0);
  EXPECT_EQ(c.interference_pairs, 2);
  EXPECT_EQ(c.uplink_pairs, 2);
  EXPECT_EQ(c.distance, 4);
  c = ScorePlacement(paper, {4, 5, 6}, busy);
  EXPECT_EQ(c.self_pairs, 3);
  EXPECT_EQ(c.interference_pairs, 0);
  EXPECT_EQ(c.distance, 3);
  EXPECT_EQ(PlacementCostString(c), "uplink_pairs=3 interference_pairs=0 self_pairs=3 distance=3");
}

TEST(PaperTestbed, FourGpuJobOnEmptyNode) {
  std::vector<GpuResource> paper = FixtureGpus(kPaper);
  // Mobius (spread): two GPUs per uplink doubles the job's host bandwidth over one full switch.
  GpuChoice spread = Choose(paper, {}, 4, Placement::kSpread);
  EXPECT_THAT(spread.gpus, ElementsAre(0, 1, 4, 5));
  EXPECT_EQ(spread.cost.self_pairs, 2);
  EXPECT_TRUE(spread.exhaustive);
  // Pack: a whole switch.
  GpuChoice pack = Choose(paper, {}, 4, Placement::kPack);
  EXPECT_THAT(pack.gpus, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(pack.cost.distance, 6);
  EXPECT_EQ(pack.cost.self_pairs, 6);
}

TEST(PaperTestbed, TwoGpuJobNextToFourGpuJobOnOneSwitch) {
  std::vector<GpuResource> paper = FixtureGpus(kPaper);
  for (Placement p : {Placement::kSpread, Placement::kPack}) {
    GpuChoice c = Choose(paper, {0, 1, 2, 3}, 2, p);
    EXPECT_THAT(c.gpus, ElementsAre(4, 5)) << PlacementName(p);
    EXPECT_EQ(c.cost.interference_pairs, 0);
  }
}

TEST(PaperTestbed, TwoGpuJobNextToSpreadFourGpuJob) {
  std::vector<GpuResource> paper = FixtureGpus(kPaper);
  // The running job holds 0,1 (switch 0) and 4,5 (switch 1): every free GPU shares an uplink with
  // it. Spread balances the two uplinks (3 GPUs each); pack keeps the job on one switch.
  GpuChoice spread = Choose(paper, {0, 1, 4, 5}, 2, Placement::kSpread);
  EXPECT_THAT(spread.gpus, ElementsAre(2, 6));
  EXPECT_EQ(spread.cost.uplink_pairs, 4);
  GpuChoice pack = Choose(paper, {0, 1, 4, 5}, 2, Placement::kPack);
  EXPECT_THAT(pack.gpus, ElementsAre(2, 3));
  EXPECT_EQ(pack.cost.interference_pairs, 4);
  EXPECT_EQ(pack.cost.distance, 1);
}

TEST(PaperTestbed, SmallJobsAvoidTheBusyUplink) {
  std::vector<GpuResource> paper = FixtureGpus(kPaper);
  EXPECT_THAT(Choose(paper, {}, 2, Placement::kSpread).gpus, ElementsAre(0, 4));
  EXPECT_THAT(Choose(paper, {}, 2, Placement::kPack).gpus, ElementsAre(0, 1));
  EXPECT_THAT(Choose(paper, {0}, 1, Placement::kSpread).gpus, ElementsAre(4));
  EXPECT_THAT(Choose(paper, {0}, 1, Placement::kPack).gpus, ElementsAre(4));
  // Two 2-GPU spread jobs in a row end up balanced: 0,4 then 1,5.
  EXPECT_THAT(Choose(paper, {0, 4}, 2, Placement::kSpread).gpus, ElementsAre(1, 5));
  EXPECT_THAT(Choose(paper, {}, 8, Placement::kSpread).gpus, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
}

TEST(Rtx4090, SpreadStaysOnOneSocketWhenThatIsEnough) {
  std::vector<GpuResource> rtx = FixtureGpus(kRtx4090);
  // Four uplinks (one switch of two GPUs each), two per socket.
  EXPECT_THAT(Choose(rtx, {}, 2, Placement::kSpread).gpus, ElementsAre(0, 2));
  EXPECT_THAT(Choose(rtx, {}, 4, Placement::kSpread).gpus, ElementsAre(0, 2, 4, 6));
  EXPECT_THAT(Choose(rtx, {}, 2, Placement::kPack).gpus, ElementsAre(0, 1));
  EXPECT_THAT(Choose(rtx, {}, 4, Placement::kPack).gpus, ElementsAre(0, 1, 2, 3));
  // Next to a job on socket 0's first switch: pack takes the other switch of socket 0; spread
  // takes the two idle uplinks of socket 1 (one socket, no shared uplink).
  EXPECT_THAT(Choose(rtx, {0, 1}, 2, Placement::kPack).gpus, ElementsAre(2, 3));
  EXPECT_THAT(Choose(rtx, {0, 1}, 2, Placement::kSpread).gpus, ElementsAre(4, 6));
}

TEST(RootPorts, EveryGpuHasItsOwnUplink) {
  std::vector<GpuResource> ws = FixtureGpus(kRootPorts);
  GpuChoice c = Choose(ws, {}, 2, Placement::kSpread);
  EXPECT_THAT(c.gpus, ElementsAre(0, 1));
  EXPECT_EQ(c.cost.uplink_pairs, 0);
  EXPECT_THAT(Choose(ws, {0}, 2, Placement::kSpread).gpus, ElementsAre(1, 2));
  EXPECT_THAT(Choose(ws, {1}, 3, Placement::kPack).gpus, ElementsAre(0, 2, 3));
}

TEST(Dgx, NvlinkEverywhereSoOnlyUplinksMatter) {
  std::vector<GpuResource> dgx = FixtureGpus(kDgx);
  EXPECT_THAT(Choose(dgx, {}, 2, Placement::kPack).gpus, ElementsAre(0, 1));
  EXPECT_THAT(Choose(dgx, {}, 2, Placement::kSpread).gpus, ElementsAre(0, 2));
  EXPECT_THAT(Choose(dgx, {}, 4, Placement::kSpread).gpus, ElementsAre(0, 2, 4, 6));
  GpuChoice c = Choose(dgx, {0, 2, 4, 6}, 4, Placement::kPack);
  EXPECT_THAT(c.gpus, ElementsAre(1, 3, 5, 7));
  EXPECT_EQ(c.cost.distance, 0);
}

TEST(ChooseGpus, GreedyMatchesExhaustiveOnThePaperTestbed) {
  std::vector<GpuResource> paper = FixtureGpus(kPaper);
  GpuChoiceOptions greedy;
  greedy.max_exhaustive_subsets = 1;
  for (Placement p : {Placement::kSpread, Placement::kPack}) {
    for (int k = 1; k <= 7; ++k) {
      GpuChoice g = Choose(paper, {}, k, p, greedy);
      GpuChoice e = Choose(paper, {}, k, p);
      EXPECT_FALSE(g.exhaustive);
      EXPECT_EQ(g.gpus, e.gpus) << PlacementName(p) << " k=" << k;
      EXPECT_EQ(g.cost, e.cost);
    }
  }
}

TEST(ChooseGpus, GreedyBalancesALargeNode) {
  // 32 GPUs, 8 uplinks of 4: C(32, 8) = 10.5 million subsets, so greedy.
  NodeResources node = testing::FlatNode(32);
  for (GpuResource& g : node.gpus) g.contention_group = g.index / 4;
  GpuChoice c = Choose(node.gpus, {}, 8, Placement::kSpread);
  EXPECT_FALSE(c.exhaustive);
  EXPECT_EQ(c.cost.uplink_pairs, 0);
  EXPECT_THAT(c.gpus, ElementsAre(0, 4, 8, 12, 16, 20, 24, 28));
  c = Choose(node.gpus, {}, 8, Placement::kPack);
  EXPECT_EQ(c.cost.interference_pairs, 0);
  EXPECT_THAT(c.gpus, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
}

TEST(ChooseGpus, GpusWithoutTopologyFactsAreIndependent) {
  std::vector<GpuResource> gpus(3);
  for (int i = 0; i < 3; ++i) gpus[i].index = i;  // no switch, group, socket: all unknown
  GpuChoice c = Choose(gpus, {1}, 2, Placement::kSpread);
  EXPECT_THAT(c.gpus, ElementsAre(0, 2));
  EXPECT_EQ(c.cost.uplink_pairs, 0);
  EXPECT_EQ(c.cost.distance, 4);
}

}  // namespace
}  // namespace mobius::jobs
