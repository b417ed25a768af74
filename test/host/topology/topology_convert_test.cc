#include "host/topology/topology_convert.h"

#include "gtest/gtest.h"
#include "host/topology/hwloc_source.h"
#include "test/testing/paths.h"

namespace mobius {
namespace {

TEST(TopologyConvert, RoundTripKeepsModelAndFacts) {
  for (const char* name : {"paper_testbed_2s_2sw_8x3090.xml", "nvlink_dgx_8xh100.xml",
                           "cpu_only_1s.xml"}) {
    auto l = topology::MakeHwlocXmlFileSource(mobius::testing::TopologyFixture(name))->Load();
    ASSERT_TRUE(l.ok()) << l.status();
    topology::TopologyFacts facts = topology::Analyze(l->topology);
    v1::Topology proto = TopologyToProto(l->topology, facts);
    EXPECT_EQ(proto.gpus_size(), static_cast<int>(l->topology.gpus.size()));
    EXPECT_EQ(proto.contention_groups_size(), static_cast<int>(facts.contention_groups.size()));
    EXPECT_EQ(proto.gpu_paths_size(), static_cast<int>(l->topology.gpus.size()));

    auto back = TopologyFromProto(proto);
    ASSERT_TRUE(back.ok()) << back.status();
    topology::TopologyFacts again = topology::Analyze(*back);
    EXPECT_EQ(again.gpu_paths, facts.gpu_paths) << name;
    EXPECT_EQ(again.p2p, facts.p2p) << name;
    ASSERT_EQ(again.contention_groups.size(), facts.contention_groups.size());
    for (size_t i = 0; i < facts.contention_groups.size(); ++i) {
      EXPECT_EQ(again.contention_groups[i].gpus, facts.contention_groups[i].gpus);
    }
    EXPECT_EQ(back->hostname, l->topology.hostname);
    EXPECT_EQ(back->nvlinks.size(), l->topology.nvlinks.size());
  }
}

TEST(TopologyConvert, OutOfRangeIndicesAreInvalidArgument) {
  v1::Topology p;
  p.add_pci()->set_parent(5);
  EXPECT_EQ(TopologyFromProto(p).status().code(), absl::StatusCode::kInvalidArgument);
  v1::Topology q;
  q.add_pci()->set_parent(-1);
  q.add_gpus()->set_pci(3);
  EXPECT_EQ(TopologyFromProto(q).status().code(), absl::StatusCode::kInvalidArgument);
  v1::Topology r;
  r.add_pci()->set_parent(-1);
  auto* l = r.add_nvlinks();
  l->set_gpu_a(0);
  l->set_gpu_b(1);
  EXPECT_EQ(TopologyFromProto(r).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mobius
