// Per-verb help of the `mobius` CLI. `mobius VERB --help` (or `mobius help VERB`) prints the verb's
// usage and every flag the verb accepts, with the flag's help text and default as defined in
// client/flags.cc (plan's profile flags: plan_command.cc); `mobius --help` and `mobius help` print the global usage. Help goes to stdout
// and exits 0 (main.cc).
//
// The table of verbs and their flags lives in verb_help.cc; verb_help_test checks that every flag
// of client/flags.cc and client/plan_command.cc is listed under at least one verb and that every
// listed flag exists.
// Thread-safe (reads constant tables and the flag registry).
#ifndef MOBIUS_CLIENT_VERB_HELP_H_
#define MOBIUS_CLIENT_VERB_HELP_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace mobius::cli {

// The global usage: what `mobius --help` prints (and absl's program usage message).
absl::string_view GlobalUsage();

// Every verb of the CLI, in the order of the global usage.
std::vector<std::string> Verbs();

// The flags (absl names, underscores) `verb` accepts, connection flags included; empty for an
// unknown verb.
std::vector<std::string> VerbFlags(absl::string_view verb);

// `verb`'s help: usage, what it does, and its flags with help text and default. nullopt when
// `verb` is not a verb of the CLI.
std::optional<std::string> VerbHelp(absl::string_view verb);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_VERB_HELP_H_
