// `mobius-worker inspect REQUEST`: the daemon's checks of a job's files, run as the job's user
// (common/inspect/inspection.h; started by server/launch/user_inspect.h). REQUEST is `fd:N` (a
// descriptor holding the request JSON) or a file. Prints the result as one JSON line on stdout
// and exits 0 whatever the checks found (their verdict is in the result); 2 for a bad request.
#ifndef MOBIUS_WORKER_INSPECT_INSPECT_VERB_H_
#define MOBIUS_WORKER_INSPECT_INSPECT_VERB_H_

#include <string>
#include <vector>

namespace mobius::inspect {

inline constexpr char kInspectUsage[] = "mobius-worker inspect fd:N|REQUEST.json";

int RunInspectVerb(const std::vector<std::string>& args);

}  // namespace mobius::inspect

#endif  // MOBIUS_WORKER_INSPECT_INSPECT_VERB_H_
