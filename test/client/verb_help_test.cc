// The per-verb help of the CLI: every verb documents its flags, every CLI flag belongs to a verb.
#include "client/verb_help.h"

#include <set>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "client/flags.h"
#include "client/job_commands.h"
#include "client/plan_command.h"
#include "gtest/gtest.h"

namespace mobius::cli {
namespace {

std::string Dashed(const std::string& flag) {
  return (flag.size() == 1 ? "-" : "--") + absl::StrReplaceAll(flag, {{"_", "-"}});
}

TEST(VerbHelp, EveryVerbShowsItsUsageAndFlagsWithHelpText) {
  for (const std::string& verb : Verbs()) {
    std::optional<std::string> help = VerbHelp(verb);
    ASSERT_TRUE(help.has_value()) << verb;
    EXPECT_TRUE(absl::StartsWith(*help, "Usage: mobius " + verb)) << *help;
    for (const std::string& flag : VerbFlags(verb)) {
      const absl::CommandLineFlag* f = absl::FindCommandLineFlag(flag);
      ASSERT_NE(f, nullptr) << verb << ": no flag " << flag;
      EXPECT_TRUE(absl::StrContains(*help, "  " + Dashed(flag) + " (default: ")) << verb << *help;
      EXPECT_TRUE(absl::StrContains(*help, f->Help())) << verb << ": " << flag;
    }
  }
}

TEST(VerbHelp, EveryCliFlagBelongsToAVerb) {
  (void)absl::GetFlag(FLAGS_json);  // links client/flags.cc's registrations into the test
  (void)PlanProfileFlagDefault();    // and plan_command.cc's (--profile, ...)
  std::set<std::string> listed;
  for (const std::string& verb : Verbs()) {
    for (const std::string& flag : VerbFlags(verb)) listed.insert(flag);
  }
  int cli_flags = 0;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!absl::StrContains(flag->Filename(), "client/flags.cc") &&
        !absl::StrContains(flag->Filename(), "client/plan_command.cc")) {
      continue;
    }
    ++cli_flags;
    EXPECT_TRUE(listed.count(std::string(name))) << "--" << name << " is in no verb's help";
  }
  EXPECT_GT(cli_flags, 50);
}

TEST(VerbHelp, CoversEveryVerbMainDispatches) {
  for (const char* verb : {"topo", "plan", "health", "run", "tokenize", "submit", "ls", "describe",
                           "logs", "watch", "cancel", "queue", "node", "drain", "undrain",
                           "quota", "export", "generate"}) {
    EXPECT_TRUE(VerbHelp(verb).has_value()) << verb;
  }
  for (const std::string& verb : Verbs()) {
    const bool dispatched = IsJobVerb(verb) || verb == "topo" || verb == "plan" ||
                            verb == "health" || verb == "run" || verb == "tokenize" ||
                            verb == "export" || verb == "generate";
    EXPECT_TRUE(dispatched) << verb << " has help but main.cc does not run it";
  }
  EXPECT_FALSE(VerbHelp("frobnicate").has_value());
  EXPECT_TRUE(VerbFlags("frobnicate").empty());
}

TEST(VerbHelp, RunTakesTheMultiNodeFlags) {
  std::optional<std::string> help = VerbHelp("run");
  ASSERT_TRUE(help.has_value());
  for (const char* flag : {"  --nodes (default: ", "  --node-rank (default: -1)",
                           "  --rendezvous (default: ", "MOBIUS_RENDEZVOUS", "SLURM_PROCID",
                           "JOB_COMPLETION_INDEX"}) {
    EXPECT_TRUE(absl::StrContains(*help, flag)) << flag << " not in:\n" << *help;
  }
}

}  // namespace
}  // namespace mobius::cli
