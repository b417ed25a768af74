#include "common/init.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius {
namespace {

std::vector<std::string> Normalize(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return NormalizeFlagDashes(static_cast<int>(argv.size()), argv.data());
}

TEST(Init, FlagDashesBecomeUnderscoresButValuesAndPositionalsStay) {
  EXPECT_THAT(Normalize({"mobius", "--topology-file=a-b.xml", "topo", "--json", "-socket-x",
                         "my-file", "--", "--not-a-flag"}),
              ::testing::ElementsAre("mobius", "--topology_file=a-b.xml", "topo", "--json",
                                     "-socket_x", "my-file", "--", "--not-a-flag"));
}

}  // namespace
}  // namespace mobius
