// Loading topologies through hwloc: bad files give one clear error each, XML round-trips, and live
// discovery works on this (GPU-less) machine.
#include "host/topology/hwloc_source.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host/topology/analysis.h"
#include "test/testing/paths.h"

namespace mobius::topology {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

absl::Status LoadFile(const std::string& path) {
  return MakeHwlocXmlFileSource(path)->Load().status();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(HwlocSource, MissingFileIsNotFoundNamingTheFile) {
  absl::Status s = LoadFile("/nonexistent/topo.xml");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("topology file /nonexistent/topo.xml"));
  EXPECT_THAT(s.message(), HasSubstr("No such file or directory"));
}

TEST(HwlocSource, DirectoryIsInvalid) {
  absl::Status s = LoadFile(mobius::testing::SourcePath("test/data/topology"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("is a directory"));
}

TEST(HwlocSource, UnreadableFileIsPermissionDenied) {
  if (geteuid() == 0) GTEST_SKIP() << "root reads any file; permission checks cannot fail";
  std::string path = ::testing::TempDir() + "/unreadable.xml";
  std::ofstream(path) << "<topology/>";
  chmod(path.c_str(), 0);
  absl::Status s = LoadFile(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr(path));
}

struct BadCase {
  const char* file;
  const char* expect;
};

class BadFixtures : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadFixtures, RejectedWithOneLineInvalidArgumentNamingTheFile) {
  std::string path = mobius::testing::TopologyFixture(std::string("bad/") + GetParam().file);
  absl::Status s = LoadFile(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr(path));
  EXPECT_THAT(s.message(), HasSubstr(GetParam().expect));
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr("\n")));
}

INSTANTIATE_TEST_SUITE_P(
    All, BadFixtures,
    ::testing::Values(BadCase{"empty.xml", "is empty"},
                      BadCase{"not_xml.xml", "is not XML"},
                      BadCase{"not_hwloc.xml", "not an hwloc topology"},
                      BadCase{"truncated.xml", "hwloc could not load it"},
                      BadCase{"bad_version.xml", "hwloc could not load it"}),
    [](const auto& info) {
      std::string n = info.param.file;
      return n.substr(0, n.find('.'));
    });

TEST(HwlocSource, InMemoryGarbageIsRejected) {
  for (const char* xml : {"", "   \n", "<", "<topology", "<topology version=\"2.0\">",
                          "<?xml version=\"1.0\"?><topology version=\"2.0\"><object type=\"PU\"/>",
                          "<topology version=\"2.0\"><object type=\"Bogus\" os_index=\"0\"/></topology>"}) {
    auto r = LoadHwlocXml(xml, "buffer");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << "input: " << xml;
  }
}

TEST(HwlocSource, ExportedXmlReloadsToTheSameModel) {
  auto first = MakeHwlocXmlFileSource(
                   mobius::testing::TopologyFixture("rtx4090_2s_4sw_8gpu.xml"))->Load();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(first->hwloc_xml, HasSubstr("PCIeLinkGen"));
  auto second = LoadHwlocXml(first->hwloc_xml, "re-export");
  ASSERT_TRUE(second.ok()) << second.status();
  const Topology& a = first->topology;
  const Topology& b = second->topology;
  ASSERT_EQ(a.pci.size(), b.pci.size());
  for (size_t i = 0; i < a.pci.size(); ++i) {
    EXPECT_EQ(a.pci[i].bus_id, b.pci[i].bus_id);
    EXPECT_EQ(a.pci[i].parent, b.pci[i].parent);
    EXPECT_EQ(a.pci[i].link.generation, b.pci[i].link.generation);
    EXPECT_EQ(a.pci[i].link.width, b.pci[i].link.width);
  }
  ASSERT_EQ(a.gpus.size(), b.gpus.size());
  for (size_t g = 0; g < a.gpus.size(); ++g) {
    EXPECT_EQ(a.gpus[g].name, b.gpus[g].name);
    EXPECT_EQ(a.gpus[g].memory_bytes, b.gpus[g].memory_bytes);
  }
  EXPECT_EQ(b.source, "re-export");
}

TEST(HwlocSource, LiveDiscoveryOfThisMachine) {
  auto live = MakeHwlocLiveSource()->Load();
  ASSERT_TRUE(live.ok()) << live.status();
  const Topology& t = live->topology;
  EXPECT_EQ(t.source, "hwloc discovery");
  EXPECT_FALSE(t.hostname.empty());
  ASSERT_GE(t.numa_nodes.size(), 1u);
  size_t cpus = 0;
  for (const NumaNode& n : t.numa_nodes) cpus += n.cpus.size();
  EXPECT_GE(cpus, 1u);
  EXPECT_GT(t.numa_nodes[0].memory_bytes, 0u);
  // Whatever the machine has, the analysis is consistent with it.
  TopologyFacts f = Analyze(t);
  EXPECT_EQ(f.gpus.size(), t.gpus.size());
  size_t grouped = 0;
  for (const auto& g : f.contention_groups) grouped += g.gpus.size();
  EXPECT_EQ(grouped, t.gpus.size());
  // And the export loads back.
  auto again = LoadHwlocXml(live->hwloc_xml, "live export");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->topology.pci.size(), t.pci.size());
}

}  // namespace
}  // namespace mobius::topology
