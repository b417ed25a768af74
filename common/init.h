// Process start-up shared by every Mobius binary: flag parsing (Abseil flags), logging (glog to
// stderr), failure signal handler, and a one-time log line with the effective configuration; and
// the pieces each binary's own --help is made of (absl's --help lists only the flags of a source
// file named like the binary: none of ours), so that `mobius VERB --help`, `mobiusd --help` and
// `mobius-worker VERB --help` all list their flags the same way.
//
// Call once from main() before anything else; not thread-safe.
#ifndef MOBIUS_COMMON_INIT_H_
#define MOBIUS_COMMON_INIT_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace mobius {

// Parses flags (exits with usage on --help or a bad flag, as absl does), initialises glog and
// returns the positional arguments, argv[0] first.
std::vector<std::string> InitProcess(int argc, char** argv, absl::string_view usage);

// Rewrites "--foo-bar[=x]" as "--foo_bar[=x]" (up to a lone "--") so flags may be spelled with
// dashes, as users of other CLIs expect; positional arguments are untouched.
std::vector<std::string> NormalizeFlagDashes(int argc, char** argv);

// "name=value" for every flag defined in a source file whose path contains `flags_file_fragment`
// (each binary keeps its knobs in one flags file), sorted by name, one per line.
std::string EffectiveFlags(absl::string_view flags_file_fragment);

// True if `arg` asks for help as a flag: --help, -help, -h, --helpshort, -helpshort.
bool IsHelpFlag(absl::string_view arg);

// argv without its help flags (up to a lone "--", after which everything is kept), and whether it
// had one. `argv` is null-terminated: pass argv.size() - 1 as argc.
struct HelpRequest {
  bool asked = false;
  std::vector<char*> argv;
};
HelpRequest TakeHelpFlags(int argc, char** argv);

// A flag as help lists it: "  --name-with-dashes (default: D)\n      help text\n" (one indented
// line per line of its help). An unknown name gives just "  --name\n".
std::string FlagHelpLine(absl::string_view name);

// The names of the flags defined in a source file whose path contains `flags_file_fragment`,
// sorted.
std::vector<std::string> FlagsDefinedIn(absl::string_view flags_file_fragment);

}  // namespace mobius

#endif  // MOBIUS_COMMON_INIT_H_
