// mobius-worker's and mobiusd's --help (issue 34): the worker's verb table says exactly which flags
// each verb's command reads (checked against the FLAGS_ its source file uses), every worker flag
// belongs to some verb, and the binaries print them: `mobius-worker init-model --help` lists the
// model-size flags with their defaults, `mobiusd --help` every daemon flag, both exiting 0.
#include "worker/verb_help.h"

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"
#include "test/testing/shell.h"

namespace mobius::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadSource(const std::string& relative) {
  std::ifstream in(mobius::testing::SourcePath(relative));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::set<std::string> FlagsUsedIn(const std::string& relative) {
  const std::string text = ReadSource(relative);
  std::set<std::string> out;
  const std::regex use("FLAGS_([a-z0-9_]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), use); it != std::sregex_iterator();
       ++it) {
    out.insert((*it)[1]);
  }
  return out;
}

TEST(WorkerVerbHelp, EachVerbListsExactlyTheFlagsItsCommandReads) {
  const std::map<std::string, std::string> sources = {
      {"init-model", "worker/checkpoint/init_model_command.cc"},
      {"merge-adapter", "worker/checkpoint/merge_adapter_command.cc"},
      {"train", "worker/train/train_command.cc"},
      {"generate", "worker/generate/generate_command.cc"},
      {"profile", "worker/profile/profile_command.cc"},
      {"run", "worker/runtime/run_command.cc"},
      {"tokenize", "worker/data/tokenize_verb.cc"}};
  std::set<std::string> listed;
  for (const std::string& verb : Verbs()) {
    SCOPED_TRACE(verb);
    const std::vector<std::string> flags = VerbFlags(verb);
    listed.insert(flags.begin(), flags.end());
    auto it = sources.find(verb);
    if (it == sources.end()) {
      EXPECT_TRUE(flags.empty());
      continue;
    }
    EXPECT_EQ(std::set<std::string>(flags.begin(), flags.end()), FlagsUsedIn(it->second));
  }
  for (const char* file : {"worker/checkpoint/worker_flags.cc", "worker/profile/profile_flags.cc"}) {
    const std::regex def("ABSL_FLAG\\([^,]+,\\s*([a-z0-9_]+)");
    const std::string text = ReadSource(file);
    int defined = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), def);
         it != std::sregex_iterator(); ++it, ++defined) {
      EXPECT_TRUE(listed.count((*it)[1])) << (*it)[1] << " (" << file << ") is under no verb";
    }
    EXPECT_GT(defined, 5) << file;
  }
  EXPECT_EQ(VerbHelp("no-such-verb", "x"), std::nullopt);
}

using mobius::testing::RunShell;
using mobius::testing::ShellResult;

TEST(WorkerVerbHelp, TheBinariesPrintTheirFlags) {
  const std::string worker = mobius::testing::BinaryPath("bin/mobius-worker");
  ShellResult r = RunShell(worker + " init-model --help 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"Usage: mobius-worker init-model", "  --hidden (default: 0)",
                        "  --kv-heads (default: 0)", "  --out (default: \"\")", "Exit codes"}) {
    EXPECT_THAT(r.output, HasSubstr(s));
  }
  EXPECT_THAT(r.output, Not(HasSubstr("No flags matched")));
  EXPECT_THAT(r.output, Not(HasSubstr("--lora-rank")));  // train's, not init-model's
  r = RunShell(worker + " --help 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("mobius-worker merge-adapter"));
  r = RunShell(worker + " generate -h 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("  --max-new-tokens (default: "));

  r = RunShell(mobius::testing::BinaryPath("bin/mobiusd") + " --help 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // This test links no daemon flags: the list is read from the daemon's flags file.
  const std::string daemon_flags = ReadSource("server/daemon/flags.cc");
  const std::regex def("ABSL_FLAG\\([^,]+,\\s*([a-z0-9_]+)");
  int defined = 0;
  for (auto it = std::sregex_iterator(daemon_flags.begin(), daemon_flags.end(), def);
       it != std::sregex_iterator(); ++it, ++defined) {
    std::string dashed = (*it)[1];
    for (char& c : dashed) c = c == '_' ? '-' : c;
    EXPECT_THAT(r.output, HasSubstr("  --" + dashed + " (default: "));
  }
  EXPECT_GT(defined, 10);
  EXPECT_THAT(r.output, HasSubstr("Usage: mobiusd"));
}

}  // namespace
}  // namespace mobius::worker
