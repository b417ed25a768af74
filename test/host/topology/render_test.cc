#include "host/topology/render.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/topology/hwloc_source.h"
#include "test/testing/paths.h"

namespace mobius::topology {
namespace {

using ::testing::HasSubstr;

TEST(Render, PaperTestbedTree) {
  auto l = MakeHwlocXmlFileSource(
               mobius::testing::TopologyFixture("paper_testbed_2s_2sw_8x3090.xml"))->Load();
  ASSERT_TRUE(l.ok()) << l.status();
  std::string text = RenderTopology(l->topology, Analyze(l->topology));
  EXPECT_THAT(text, HasSubstr("8 GPU(s), 2 socket(s), 2 NUMA node(s), 2 root complex(es), 2 PCIe switch(es)"));
  EXPECT_THAT(text, HasSubstr("PCIe switch 0000:18:00.0  PCIe 3.0 x16 (15.8 GB/s)"));
  EXPECT_THAT(text, HasSubstr("GPU7 0000:8b:00.0  NVIDIA GeForce RTX 3090"));
  EXPECT_THAT(text, HasSubstr("group 0: GPU0 GPU1 GPU2 GPU3  uplink"));
  EXPECT_THAT(text, HasSubstr("group 1: GPU4 GPU5 GPU6 GPU7  uplink"));
  EXPECT_THAT(text, HasSubstr("3.9 GB/s per GPU when all copy"));
  EXPECT_THAT(text, HasSubstr("GPU0  X     PIX"));
}

TEST(Render, CpuOnlySaysSo) {
  auto l = MakeHwlocXmlFileSource(mobius::testing::TopologyFixture("cpu_only_1s.xml"))->Load();
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_THAT(RenderTopology(l->topology, Analyze(l->topology)), HasSubstr("No GPUs: CPU-only server."));
}

TEST(Render, Bytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(24ull << 30), "24.0 GiB");
  EXPECT_EQ(FormatBytes(1536ull << 30), "1.5 TiB");
}

}  // namespace
}  // namespace mobius::topology
