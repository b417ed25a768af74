// A `mobius-worker VERB` child of a CLI verb that runs without a daemon (`mobius export --merge`,
// `mobius generate`): the CLI links none of the worker's code (docs/architecture.md), so it runs
// the worker binary and relays what it says.
//
// The worker's conventions (worker/main.cc): stdout is the verb's output; on stderr, lines that
// start with "mobius-worker VERB: " are the worker's own: "warning: ..." ones are warnings, the
// last other one is its error line (exit 2: bad input, anything else: a failure); other stderr
// lines are its log, of which the last few are kept for a worker that died without an error line.
//
// Blocks until the child exits. Thread-compatible.
#ifndef MOBIUS_CLIENT_WORKER_CHILD_H_
#define MOBIUS_CLIENT_WORKER_CHILD_H_

#include <deque>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mobius::cli {

// `given` when non-empty (--worker_binary), else the mobius-worker next to this executable.
std::string WorkerBinaryNextToSelf(const std::string& given);

struct WorkerChildResult {
  int status = 0;                // waitpid's
  std::string error;             // the worker's error line, without its prefix
  std::deque<std::string> tail;  // the last 5 lines of stderr that are not the worker's own
};

// Runs argv to its end. Each chunk of stdout goes to `on_stdout` as it comes; each warning (the
// text after "mobius-worker VERB: ") to `on_warning`. `prefix` is "mobius-worker VERB: ".
// The spawn's error when argv[0] cannot be started.
absl::StatusOr<WorkerChildResult> RunWorkerChild(
    const std::vector<std::string>& argv, absl::string_view prefix,
    const std::function<void(absl::string_view)>& on_stdout,
    const std::function<void(const std::string&)>& on_warning);

// The exit code of a verb whose child ended with `r` (client/exit_codes.h): kExitOk for exit 0;
// otherwise writes "mobius VERB: <the error line, or how the child died and its last lines>" to
// `err` and returns kExitUsage for the worker's exit 2 (bad input), kExitServerError otherwise.
// `what` names the child in that message ("the merge process").
int FinishWorkerChild(const WorkerChildResult& r, absl::string_view verb, absl::string_view what,
                      std::ostream& err);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_WORKER_CHILD_H_
