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

TEST(Init, HelpFlagsAreTakenOutUpToALoneDoubleDash) {
  std::vector<std::string> args = {"mobius-worker", "init-model", "--help", "--hidden", "64", "-h",
                                   "--", "--help"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  const HelpRequest r = TakeHelpFlags(static_cast<int>(argv.size()), argv.data());
  EXPECT_TRUE(r.asked);
  ASSERT_EQ(r.argv.back(), nullptr);
  std::vector<std::string> kept(r.argv.begin(), r.argv.end() - 1);
  EXPECT_THAT(kept, ::testing::ElementsAre("mobius-worker", "init-model", "--hidden", "64", "--",
                                           "--help"));
  for (const char* a : {"--help", "-help", "-h", "--helpshort"}) EXPECT_TRUE(IsHelpFlag(a)) << a;
  for (const char* a : {"--helpfull", "help", "--json", "-f"}) EXPECT_FALSE(IsHelpFlag(a)) << a;
  std::vector<std::string> none = {"mobiusd", "--socket", "/run/x"};
  std::vector<char*> none_argv;
  for (auto& a : none) none_argv.push_back(a.data());
  EXPECT_FALSE(TakeHelpFlags(3, none_argv.data()).asked);
}

}  // namespace
}  // namespace mobius
