#include "common/init.h"

#include <algorithm>

#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"

namespace mobius {

std::vector<std::string> NormalizeFlagDashes(int argc, char** argv) {
  std::vector<std::string> out(argv, argv + argc);
  for (size_t i = 1; i < out.size(); ++i) {
    std::string& a = out[i];
    if (a == "--") break;
    if (a.size() < 3 || a[0] != '-') continue;
    size_t start = a[1] == '-' ? 2 : 1;
    size_t end = std::min(a.find('='), a.size());
    for (size_t k = start; k < end; ++k) {
      if (a[k] == '-') a[k] = '_';
    }
  }
  return out;
}

std::vector<std::string> InitProcess(int argc, char** argv, absl::string_view usage) {
  absl::SetProgramUsageMessage(usage);
  std::vector<std::string> normalized = NormalizeFlagDashes(argc, argv);
  std::vector<char*> normalized_argv;
  for (std::string& a : normalized) normalized_argv.push_back(a.data());
  normalized_argv.push_back(nullptr);
  std::vector<char*> positional = absl::ParseCommandLine(argc, normalized_argv.data());
  // glog's own flags are gflags; we configure them here instead of exposing a second flag system.
  FLAGS_logtostderr = true;
  FLAGS_colorlogtostderr = false;
  google::InitGoogleLogging(argv[0]);
  google::InstallFailureSignalHandler();
  return std::vector<std::string>(positional.begin(), positional.end());
}

std::string EffectiveFlags(absl::string_view flags_file_fragment) {
  std::vector<std::string> lines;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!absl::StrContains(flag->Filename(), flags_file_fragment)) continue;
    lines.push_back(absl::StrCat(name, "=", flag->CurrentValue()));
  }
  std::sort(lines.begin(), lines.end());
  return absl::StrJoin(lines, "\n");
}

bool IsHelpFlag(absl::string_view arg) {
  return arg == "--help" || arg == "-help" || arg == "-h" || arg == "--helpshort" ||
         arg == "-helpshort";
}

HelpRequest TakeHelpFlags(int argc, char** argv) {
  HelpRequest r;
  for (int i = 0; i < argc; ++i) {
    if (absl::string_view(argv[i]) == "--") {
      r.argv.insert(r.argv.end(), argv + i, argv + argc);
      break;
    }
    if (i > 0 && IsHelpFlag(argv[i])) {
      r.asked = true;
    } else {
      r.argv.push_back(argv[i]);
    }
  }
  r.argv.push_back(nullptr);
  return r;
}

std::string FlagHelpLine(absl::string_view name) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (flag == nullptr) return absl::StrCat("  --", name, "\n");
  const std::string dashed = absl::StrReplaceAll(name, {{"_", "-"}});
  std::string out = absl::StrCat("  ", dashed.size() == 1 ? "-" : "--", dashed);
  const std::string def = flag->DefaultValue();
  absl::StrAppend(&out, " (default: ", def.empty() ? "\"\"" : def, ")\n");
  for (absl::string_view line : absl::StrSplit(flag->Help(), '\n')) {
    absl::StrAppend(&out, "      ", line, "\n");
  }
  return out;
}

std::vector<std::string> FlagsDefinedIn(absl::string_view flags_file_fragment) {
  std::vector<std::string> names;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::StrContains(flag->Filename(), flags_file_fragment)) names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace mobius
