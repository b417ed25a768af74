// Per-verb help of mobius-worker: `mobius-worker VERB --help` prints the verb's usage, what it does
// and every flag it reads, with the flag's help text and default (worker/checkpoint/worker_flags.cc,
// worker/profile/profile_flags.cc), as `mobius VERB --help` does; `mobius-worker --help` lists the
// verbs. Help goes to stdout and exits 0 (main.cc).
//
// worker_verb_help_test checks the table against the sources: each verb's flags are exactly the
// FLAGS_ its command file reads, and every worker flag belongs to some verb.
// Thread-safe (constant tables and the flag registry).
#ifndef MOBIUS_WORKER_VERB_HELP_H_
#define MOBIUS_WORKER_VERB_HELP_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace mobius::worker {

// Every verb, in the order of the global help.
std::vector<std::string> Verbs();

// The flags (absl names) `verb` reads; empty for an unknown verb or one without flags.
std::vector<std::string> VerbFlags(absl::string_view verb);

// `verb`'s help: `usage` (the verb's usage line, from its command header), what it does, and its
// flags. nullopt for an unknown verb.
std::optional<std::string> VerbHelp(absl::string_view verb, absl::string_view usage);

// The global help: what mobius-worker is and one line per verb; `usages` are the usage lines of
// the verbs this build has.
std::string GlobalHelp(const std::vector<std::string>& usages);

}  // namespace mobius::worker

#endif  // MOBIUS_WORKER_VERB_HELP_H_
