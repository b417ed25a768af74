#include "host/topology/pcie.h"

#include "gtest/gtest.h"

namespace mobius::topology {
namespace {

TEST(Pcie, TheoreticalX16Bandwidths) {
  EXPECT_NEAR(LinkGBytesPerSecond({3, 16, 0}), 15.754, 0.001);
  EXPECT_NEAR(LinkGBytesPerSecond({4, 16, 0}), 31.508, 0.001);
  EXPECT_NEAR(LinkGBytesPerSecond({5, 16, 0}), 63.015, 0.001);
  EXPECT_NEAR(LinkGBytesPerSecond({1, 16, 0}), 4.0, 0.001);
  EXPECT_NEAR(LinkGBytesPerSecond({2, 8, 0}), 4.0, 0.001);
  EXPECT_NEAR(LinkGBytesPerSecond({3, 4, 0}), 3.938, 0.001);
}

TEST(Pcie, UnknownGenerationFallsBackToReportedSpeed) {
  EXPECT_DOUBLE_EQ(LinkGBytesPerSecond({0, 0, 7.5}), 7.5);
  EXPECT_DOUBLE_EQ(LinkGBytesPerSecond({0, 0, 0}), 0);
}

TEST(Pcie, InferenceFromHwlocSpeed) {
  PcieLink l = InferGenerationAndWidth({0, 0, 31.5});
  EXPECT_EQ(l.generation, 4);
  EXPECT_EQ(l.width, 16);
  // Ambiguous (Gen4 x8 == Gen3 x16): the widest link wins.
  l = InferGenerationAndWidth({0, 0, 15.753846f});
  EXPECT_EQ(l.generation, 3);
  EXPECT_EQ(l.width, 16);
  // Gen4 x1 (1.97) is within 2% of Gen2 x4 (2.0): either way the bandwidth is right.
  l = InferGenerationAndWidth({0, 0, 1.969231f});
  EXPECT_NEAR(LinkGBytesPerSecond(l), 1.969, 0.05);
  // Known values are kept; nonsense stays unknown.
  l = InferGenerationAndWidth({4, 8, 15.75});
  EXPECT_EQ(l.generation, 4);
  EXPECT_EQ(l.width, 8);
  l = InferGenerationAndWidth({0, 0, 5.1234});
  EXPECT_EQ(l.generation, 0);
}

TEST(Pcie, Describe) {
  EXPECT_EQ(DescribeLink({3, 16, 0}), "PCIe 3.0 x16 (15.8 GB/s)");
  EXPECT_EQ(DescribeLink({0, 0, 5.1}), "PCIe ? (5.1 GB/s)");
  EXPECT_EQ(DescribeLink({}), "PCIe link unknown");
}

}  // namespace
}  // namespace mobius::topology
