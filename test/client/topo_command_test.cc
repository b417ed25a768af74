// `mobius topo --topology-file`: text, JSON and XML outputs, and bad input.
#include "client/topo_command.h"

#include <sstream>

#include "client/exit_codes.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "mobius/v1/topology.pb.h"
#include "host/topology/hwloc_source.h"
#include "test/testing/paths.h"

namespace mobius::cli {
namespace {

using ::testing::HasSubstr;

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result RunCommand(TopoOptions o) {
  std::ostringstream out, err;
  int code = RunTopo(o, out, err);
  return {code, out.str(), err.str()};
}

TopoOptions FromFile(const std::string& name) {
  TopoOptions o;
  o.topology_file = mobius::testing::TopologyFixture(name);
  return o;
}

TEST(TopoCommand, TextShowsGpusRootComplexesAndGroups) {
  Result r = RunCommand(FromFile("paper_testbed_2s_2sw_8x3090.xml"));
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("8 GPU(s)"));
  EXPECT_THAT(r.out, HasSubstr("2 root complex(es)"));
  EXPECT_THAT(r.out, HasSubstr("group 0: GPU0 GPU1 GPU2 GPU3"));
  EXPECT_THAT(r.out, HasSubstr("group 1: GPU4 GPU5 GPU6 GPU7"));
  EXPECT_TRUE(r.err.empty());
}

TEST(TopoCommand, JsonCarriesTheSameFacts) {
  TopoOptions o = FromFile("paper_testbed_2s_2sw_8x3090.xml");
  o.json = true;
  Result r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  v1::Topology t;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &t).ok());
  EXPECT_EQ(t.gpus_size(), 8);
  EXPECT_EQ(t.root_complexes_size(), 2);
  ASSERT_EQ(t.contention_groups_size(), 2);
  EXPECT_EQ(t.contention_groups(0).gpus_size(), 4);
  EXPECT_EQ(t.contention_groups(1).gpus_size(), 4);
  EXPECT_EQ(t.gpus(5).numa_node(), 1);
  EXPECT_TRUE(t.gpus(0).consumer_card());
  EXPECT_THAT(r.out, HasSubstr("\"contention_groups\""));  // snake_case field names
}

TEST(TopoCommand, XmlExportLoadsInHwlocAgain) {
  TopoOptions o = FromFile("root_ports_1s_4gpu.xml");
  o.xml = true;
  Result r = RunCommand(o);
  ASSERT_EQ(r.code, kExitOk) << r.err;
  auto again = topology::LoadHwlocXml(r.out, "exported");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->topology.gpus.size(), 4u);
}

TEST(TopoCommand, BadFilesExitTwoWithOneLine) {
  for (const char* f : {"bad/empty.xml", "bad/not_xml.xml", "bad/not_hwloc.xml", "bad/truncated.xml",
                        "bad/bad_version.xml", "does_not_exist.xml"}) {
    Result r = RunCommand(FromFile(f));
    EXPECT_EQ(r.code, kExitUsage) << f;
    EXPECT_TRUE(r.out.empty()) << f;
    EXPECT_THAT(r.err, HasSubstr(f));
    EXPECT_THAT(r.err, ::testing::StartsWith("mobius topo: "));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(TopoCommand, JsonAndXmlTogetherIsUsageError) {
  TopoOptions o = FromFile("cpu_only_1s.xml");
  o.json = o.xml = true;
  EXPECT_EQ(RunCommand(o).code, kExitUsage);
}

TEST(TopoCommand, NoDaemonIsUnreachable) {
  TopoOptions o;
  o.daemon = UnixEndpoint(::testing::TempDir() + "/no-daemon-here.sock");
  o.timeout = absl::Seconds(2);
  Result r = RunCommand(o);
  EXPECT_EQ(r.code, kExitUnreachable);
  EXPECT_THAT(r.err, HasSubstr("cannot reach mobiusd"));
  EXPECT_THAT(r.err, HasSubstr("MOBIUS_SOCKET"));
}

}  // namespace
}  // namespace mobius::cli
