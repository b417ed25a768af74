// Derived facts on hand-built topologies: shapes the fixtures do not cover (nested switches,
// devices directly under a host bridge, a hidden root port, NVLink on consumer cards).
#include "host/topology/analysis.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius::topology {
namespace {

using ::testing::ElementsAre;

// A tiny builder for PCI trees.
class Builder {
 public:
  int HostBridge(int package) {
    PciNode n;
    n.kind = PciKind::kHostBridge;
    n.package = package;
    n.numa_node = package;
    n.bus_id = "0000:[00-ff]";
    return Add(n, -1);
  }
  int Bridge(int parent, int gen = 4, int width = 16) {
    PciNode n;
    n.kind = PciKind::kBridge;
    n.link = {gen, width, 0};
    return Add(n, parent);
  }
  int Gpu(int parent, const std::string& name = "NVIDIA A100-SXM4-80GB", int gen = 4) {
    PciNode n;
    n.kind = PciKind::kGpu;
    n.link = {gen, 16, 0};
    n.vendor_id = 0x10de;
    int i = Add(n, parent);
    t.gpus.push_back({i, name, 80ull << 30, ""});
    return static_cast<int>(t.gpus.size()) - 1;
  }
  Topology t;

 private:
  int Add(PciNode n, int parent) {
    n.parent = parent;
    int i = static_cast<int>(t.pci.size());
    n.bus_id = n.kind == PciKind::kHostBridge ? n.bus_id : "0000:" + std::to_string(10 + i) + ":00.0";
    if (parent >= 0) {
      n.package = t.pci[parent].package;
      n.numa_node = t.pci[parent].numa_node;
    }
    t.pci.push_back(n);
    if (parent >= 0) t.pci[parent].children.push_back(i);
    return i;
  }
};

TEST(Analysis, NestedSwitchesArePxbAndShareTheRootPortUplink) {
  Builder b;
  int hb = b.HostBridge(0);
  int rp = b.Bridge(hb, 4, 16);
  int sw1 = b.Bridge(rp);
  int dp1 = b.Bridge(sw1);
  int dp2 = b.Bridge(sw1);
  b.Gpu(dp1);                   // GPU0 directly under switch 1
  int sw2 = b.Bridge(dp2);      // nested switch 2 under switch 1
  int dp3 = b.Bridge(sw2);
  int dp4 = b.Bridge(sw2);
  b.Gpu(dp3);                   // GPU1
  b.Gpu(dp4, "NVIDIA A100-SXM4-80GB", 3);  // GPU2 on a Gen3 link
  TopologyFacts f = Analyze(b.t);
  EXPECT_EQ(f.bridge_roles[rp], BridgeRole::kRootPort);
  EXPECT_EQ(f.bridge_roles[sw1], BridgeRole::kSwitchUpstream);
  EXPECT_EQ(f.bridge_roles[dp2], BridgeRole::kSwitchDownstream);
  EXPECT_EQ(f.bridge_roles[sw2], BridgeRole::kSwitchUpstream);
  ASSERT_EQ(f.switches.size(), 2u);
  EXPECT_THAT(f.switches[0].gpus, ElementsAre(0, 1, 2));
  EXPECT_THAT(f.switches[1].gpus, ElementsAre(1, 2));
  EXPECT_EQ(f.gpus[1].switch_index, 1);  // nearest switch
  EXPECT_EQ(f.gpu_paths[1][2], GpuPath::kSwitch);
  EXPECT_EQ(f.gpu_paths[0][1], GpuPath::kMultiSwitch);
  EXPECT_TRUE(f.p2p[0][1]);  // datacenter cards under a common switch
  ASSERT_EQ(f.contention_groups.size(), 1u);
  EXPECT_EQ(f.contention_groups[0].uplink_pci, rp);
  EXPECT_NEAR(f.gpus[2].link_gbytes_per_s, 15.75, 0.01);
  EXPECT_NEAR(f.gpus[2].host_path_gbytes_per_s, 15.75, 0.01);
  EXPECT_NEAR(f.gpus[0].host_path_gbytes_per_s, 31.5, 0.01);
}

TEST(Analysis, GpuDirectlyUnderHostBridgeIsItsOwnGroup) {
  Builder b;
  int hb = b.HostBridge(0);
  b.Gpu(hb);
  b.Gpu(hb);
  TopologyFacts f = Analyze(b.t);
  ASSERT_EQ(f.contention_groups.size(), 2u);
  EXPECT_EQ(f.contention_groups[0].uplink_pci, b.t.gpus[0].pci);
  EXPECT_EQ(f.gpu_paths[0][1], GpuPath::kHostBridge);
  EXPECT_EQ(f.gpus[0].switch_index, -1);
}

TEST(Analysis, HiddenRootPortFanningOutIsTreatedAsASwitch) {
  Builder b;
  int hb = b.HostBridge(0);
  int up = b.Bridge(hb);
  int d1 = b.Bridge(up);
  int d2 = b.Bridge(up);
  b.Gpu(d1);
  b.Gpu(d2);
  TopologyFacts f = Analyze(b.t);
  EXPECT_EQ(f.bridge_roles[up], BridgeRole::kSwitchUpstream);
  ASSERT_EQ(f.switches.size(), 1u);
  EXPECT_EQ(f.gpu_paths[0][1], GpuPath::kSwitch);
  // The switch itself is the uplink into the root complex.
  ASSERT_EQ(f.contention_groups.size(), 1u);
  EXPECT_EQ(f.contention_groups[0].uplink_pci, up);
}

TEST(Analysis, CrossRootComplexSameSocketIsNodeAndCrossSocketIsSys) {
  Builder b;
  int hb0 = b.HostBridge(0);
  int hb1 = b.HostBridge(0);
  int hb2 = b.HostBridge(1);
  b.Gpu(b.Bridge(hb0));
  b.Gpu(b.Bridge(hb1));
  b.Gpu(b.Bridge(hb2));
  TopologyFacts f = Analyze(b.t);
  EXPECT_EQ(f.root_complexes.size(), 3u);
  EXPECT_EQ(f.gpu_paths[0][1], GpuPath::kNode);
  EXPECT_EQ(f.gpu_paths[0][2], GpuPath::kSystem);
  EXPECT_EQ(f.gpu_paths[2][1], GpuPath::kSystem);
  EXPECT_EQ(f.gpus[2].root_complex, 2);
}

TEST(Analysis, NvlinkGivesP2PEvenOnConsumerCardsButPcieDoesNot) {
  Builder b;
  int hb = b.HostBridge(0);
  int sw = b.Bridge(b.Bridge(hb));
  b.Gpu(b.Bridge(sw), "NVIDIA GeForce RTX 3090");
  b.Gpu(b.Bridge(sw), "NVIDIA GeForce RTX 3090");
  b.Gpu(b.Bridge(sw), "NVIDIA GeForce RTX 3090");
  b.t.nvlinks.push_back({0, 1, 56.25});  // an NVLink bridge between two 3090s
  b.t.nvlinks.push_back({1, 1, 10});     // self links are ignored
  b.t.nvlinks.push_back({0, 9, 10});     // out of range is ignored
  TopologyFacts f = Analyze(b.t);
  EXPECT_EQ(f.gpu_paths[0][1], GpuPath::kNvLink);
  EXPECT_TRUE(f.p2p[0][1]);
  EXPECT_TRUE(f.p2p[1][0]);
  EXPECT_EQ(f.gpu_paths[0][2], GpuPath::kSwitch);
  EXPECT_FALSE(f.p2p[0][2]);
  EXPECT_FALSE(f.p2p[1][1]);
}

TEST(Analysis, ConsumerNames) {
  EXPECT_TRUE(IsConsumerGpuName("NVIDIA GeForce RTX 4090"));
  EXPECT_TRUE(IsConsumerGpuName("GA102 [GeForce RTX 3090]"));
  EXPECT_TRUE(IsConsumerGpuName("NVIDIA TITAN RTX"));
  EXPECT_FALSE(IsConsumerGpuName("NVIDIA RTX A6000"));
  EXPECT_FALSE(IsConsumerGpuName("NVIDIA H100 80GB HBM3"));
}

TEST(Analysis, EmptyTopology) {
  TopologyFacts f = Analyze(Topology{});
  EXPECT_TRUE(f.gpus.empty());
  EXPECT_TRUE(f.root_complexes.empty());
}

}  // namespace
}  // namespace mobius::topology
