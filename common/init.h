// Process start-up shared by every Mobius binary: flag parsing (Abseil flags), logging (glog to
// stderr), failure signal handler, and a one-time log line with the effective configuration.
//
// Call once from main() before anything else; not thread-safe.
#ifndef MOBIUS_COMMON_INIT_H_
#define MOBIUS_COMMON_INIT_H_

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

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

}  // namespace mobius

#endif  // MOBIUS_COMMON_INIT_H_
