// Every derived fact on every committed hwloc fixture (test/data/topology/README.md describes them).
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/topology/analysis.h"
#include "host/topology/hwloc_source.h"
#include "host/topology/pcie.h"
#include "test/testing/paths.h"

namespace mobius::topology {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Loaded {
  Topology t;
  TopologyFacts f;
};

Loaded Load(const std::string& name) {
  auto loaded = MakeHwlocXmlFileSource(mobius::testing::TopologyFixture(name))->Load();
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok()) return {};
  Loaded l{loaded->topology, {}};
  l.f = Analyze(l.t);
  return l;
}

std::vector<std::vector<int>> GroupGpus(const TopologyFacts& f) {
  std::vector<std::vector<int>> out;
  for (const auto& g : f.contention_groups) out.push_back(g.gpus);
  return out;
}

TEST(PaperTestbed, TwoSocketsTwoSwitchesEightGeForceGpus) {
  Loaded l = Load("paper_testbed_2s_2sw_8x3090.xml");
  const Topology& t = l.t;
  const TopologyFacts& f = l.f;
  EXPECT_EQ(t.hostname, "mobius-testbed");
  ASSERT_EQ(t.gpus.size(), 8u);
  ASSERT_EQ(t.packages.size(), 2u);
  EXPECT_THAT(t.packages[0].cpu_model, HasSubstr("Gold 6130"));
  EXPECT_EQ(t.packages[0].cores, 16);
  ASSERT_EQ(t.numa_nodes.size(), 2u);
  EXPECT_EQ(t.numa_nodes[0].memory_bytes + t.numa_nodes[1].memory_bytes, 1536ull << 30);
  EXPECT_EQ(t.numa_nodes[1].package, 1);

  ASSERT_EQ(f.root_complexes.size(), 2u);
  EXPECT_THAT(f.root_complexes[0].gpus, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(f.root_complexes[1].gpus, ElementsAre(4, 5, 6, 7));
  EXPECT_EQ(f.root_complexes[0].numa_node, 0);
  EXPECT_EQ(f.root_complexes[1].numa_node, 1);
  ASSERT_EQ(f.switches.size(), 2u);
  EXPECT_THAT(f.switches[0].gpus, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(f.switches[1].gpus, ElementsAre(4, 5, 6, 7));
  EXPECT_EQ(f.switches[0].uplink.generation, 3);
  EXPECT_EQ(f.switches[0].uplink.width, 16);

  EXPECT_THAT(GroupGpus(f), ElementsAre(ElementsAre(0, 1, 2, 3), ElementsAre(4, 5, 6, 7)));
  EXPECT_NEAR(f.contention_groups[0].uplink_gbytes_per_s, 15.75, 0.01);
  for (int g = 0; g < 8; ++g) {
    const GpuFacts& gf = f.gpus[g];
    EXPECT_EQ(t.gpus[g].name, "NVIDIA GeForce RTX 3090");
    EXPECT_GT(t.gpus[g].memory_bytes, 23ull << 30);  // CUDA reports a little under 24 GiB
    EXPECT_LE(t.gpus[g].memory_bytes, 24ull << 30);
    EXPECT_EQ(t.pci[t.gpus[g].pci].vendor_id, 0x10de);
    EXPECT_EQ(gf.numa_node, g < 4 ? 0 : 1);
    EXPECT_EQ(gf.package, g < 4 ? 0 : 1);
    EXPECT_EQ(gf.root_complex, g < 4 ? 0 : 1);
    EXPECT_EQ(gf.switch_index, g < 4 ? 0 : 1);
    EXPECT_TRUE(gf.consumer_card);
    EXPECT_NEAR(gf.link_gbytes_per_s, 15.75, 0.01);
    EXPECT_NEAR(gf.host_path_gbytes_per_s, 15.75, 0.01);
    for (int h = 0; h < 8; ++h) {
      GpuPath want = g == h ? GpuPath::kSelf : (g < 4) == (h < 4) ? GpuPath::kSwitch : GpuPath::kSystem;
      EXPECT_EQ(f.gpu_paths[g][h], want) << g << "," << h;
      EXPECT_FALSE(f.p2p[g][h]) << "GeForce cards have no P2P: " << g << "," << h;
    }
  }
  // GPUs are numbered in bus-id order.
  for (int g = 1; g < 8; ++g) EXPECT_LT(t.pci[t.gpus[g - 1].pci].bus_id, t.pci[t.gpus[g].pci].bus_id);
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0].interface, "ens1f0");
  EXPECT_EQ(t.pci[t.nics[0].pci].numa_node, 0);
  ASSERT_EQ(t.nvmes.size(), 1u);
  EXPECT_EQ(t.nvmes[0].block_device, "nvme0n1");
  EXPECT_EQ(t.pci[t.nvmes[0].pci].numa_node, 1);
  EXPECT_TRUE(t.nvlinks.empty());
}

TEST(Rtx4090Server, FourSwitchesOfTwoUnderTwoSockets) {
  Loaded l = Load("rtx4090_2s_4sw_8gpu.xml");
  const TopologyFacts& f = l.f;
  ASSERT_EQ(l.t.gpus.size(), 8u);
  ASSERT_EQ(f.switches.size(), 4u);
  ASSERT_EQ(f.root_complexes.size(), 2u);
  EXPECT_THAT(f.root_complexes[0].switches, ElementsAre(0, 1));
  EXPECT_THAT(f.root_complexes[1].switches, ElementsAre(2, 3));
  EXPECT_THAT(GroupGpus(f), ElementsAre(ElementsAre(0, 1), ElementsAre(2, 3), ElementsAre(4, 5),
                                        ElementsAre(6, 7)));
  for (const auto& g : f.contention_groups) EXPECT_NEAR(g.uplink_gbytes_per_s, 31.5, 0.01);
  EXPECT_EQ(f.gpu_paths[0][1], GpuPath::kSwitch);
  EXPECT_EQ(f.gpu_paths[0][2], GpuPath::kHostBridge);
  EXPECT_EQ(f.gpu_paths[0][4], GpuPath::kSystem);
  EXPECT_EQ(f.gpu_paths[5][7], GpuPath::kHostBridge);
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(l.t.gpus[g].name, "NVIDIA GeForce RTX 4090");
    EXPECT_TRUE(f.gpus[g].consumer_card);
    EXPECT_EQ(f.gpus[g].numa_node, g < 4 ? 0 : 1);
    EXPECT_EQ(f.gpus[g].switch_index, g / 2);
    EXPECT_NEAR(f.gpus[g].link_gbytes_per_s, 31.5, 0.01);
    for (int h = 0; h < 8; ++h) EXPECT_FALSE(f.p2p[g][h]);
  }
}

TEST(RootPortWorkstation, NoSwitchEveryGpuItsOwnGroupAndNoP2P) {
  Loaded l = Load("root_ports_1s_4gpu.xml");
  const TopologyFacts& f = l.f;
  ASSERT_EQ(l.t.gpus.size(), 4u);
  EXPECT_TRUE(f.switches.empty());
  ASSERT_EQ(f.root_complexes.size(), 1u);
  EXPECT_THAT(f.root_complexes[0].gpus, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(GroupGpus(f), ElementsAre(ElementsAre(0), ElementsAre(1), ElementsAre(2), ElementsAre(3)));
  for (int g = 0; g < 4; ++g) {
    EXPECT_EQ(l.t.gpus[g].name, "NVIDIA RTX A6000");
    EXPECT_FALSE(f.gpus[g].consumer_card);
    EXPECT_EQ(f.gpus[g].switch_index, -1);
    EXPECT_EQ(f.gpus[g].numa_node, 0);
    EXPECT_EQ(f.bridge_roles[l.t.pci[l.t.gpus[g].pci].parent], BridgeRole::kRootPort);
    for (int h = 0; h < 4; ++h) {
      if (g != h) EXPECT_EQ(f.gpu_paths[g][h], GpuPath::kHostBridge);
      // Workstation cards allow P2P, but not through the root complex by our rule.
      EXPECT_FALSE(f.p2p[g][h]);
    }
  }
}

TEST(NvlinkServer, AllPairsNvlinkAndP2P) {
  Loaded l = Load("nvlink_dgx_8xh100.xml");
  const Topology& t = l.t;
  const TopologyFacts& f = l.f;
  ASSERT_EQ(t.gpus.size(), 8u);
  EXPECT_EQ(t.nvlinks.size(), 28u);  // all pairs
  for (const NvLink& link : t.nvlinks) EXPECT_NEAR(link.gbytes_per_s, 450, 1);
  EXPECT_EQ(f.root_complexes.size(), 4u);
  EXPECT_EQ(f.switches.size(), 4u);
  EXPECT_THAT(GroupGpus(f), ElementsAre(ElementsAre(0, 1), ElementsAre(2, 3), ElementsAre(4, 5),
                                        ElementsAre(6, 7)));
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(t.gpus[g].name, "NVIDIA H100 80GB HBM3");
    EXPECT_FALSE(f.gpus[g].consumer_card);
    EXPECT_FALSE(t.gpus[g].uuid.empty());
    EXPECT_NEAR(f.gpus[g].link_gbytes_per_s, 63.0, 0.1);
    for (int h = 0; h < 8; ++h) {
      if (g == h) continue;
      EXPECT_EQ(f.gpu_paths[g][h], GpuPath::kNvLink);
      EXPECT_TRUE(f.p2p[g][h]);
    }
  }
  std::set<std::string> nic_names;
  for (const Nic& n : t.nics) nic_names.insert(n.interface);
  EXPECT_EQ(t.nics.size(), 4u);
}

TEST(CpuOnly, NoGpusIsValid) {
  Loaded l = Load("cpu_only_1s.xml");
  EXPECT_TRUE(l.t.gpus.empty());
  EXPECT_TRUE(l.f.contention_groups.empty());
  EXPECT_TRUE(l.f.gpu_paths.empty());
  EXPECT_EQ(l.t.packages.size(), 1u);
  ASSERT_EQ(l.t.numa_nodes.size(), 1u);
  EXPECT_EQ(l.t.numa_nodes[0].cpus.size(), 32u);
  // The board's ASPEED VGA controller is a display device, not a compute GPU.
  bool saw_vga = false;
  for (const PciNode& n : l.t.pci) saw_vga |= (n.class_id >> 8) == 0x03;
  EXPECT_TRUE(saw_vga);
  EXPECT_EQ(l.t.nics.size(), 1u);
}

}  // namespace
}  // namespace mobius::topology
