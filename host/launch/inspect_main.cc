// mobius-inspect REQUEST: the daemon's checks of a job's files, run as the job's user
// (common/inspect/inspection.h; started by host/launch/user_inspect.h). REQUEST is `fd:N` (a
// descriptor holding the request JSON) or a file. Prints the result as one JSON line on stdout
// and exits 0 whatever the checks found (their verdict is in the result); 2 for a bad request.
// A binary of its own, linking only the checks: it starts in a few milliseconds (the worker
// binary, with its engine and CUDA, takes ~0.2 s), and every submit starts one.
#include <signal.h>
#include <sys/prctl.h>

#include <iostream>
#include <string>

#include "common/inspect/inspection.h"
#include "common/subprocess.h"

int main(int argc, char** argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (argc != 2) {
    std::cerr << "usage: mobius-inspect fd:N|REQUEST.json\n";
    return 2;
  }
  absl::StatusOr<std::string> text = mobius::ReadArgumentText(argv[1]);
  absl::StatusOr<mobius::inspect::InspectRequest> request =
      text.ok() ? mobius::inspect::InspectRequestFromJson(*text)
                : absl::StatusOr<mobius::inspect::InspectRequest>(text.status());
  if (!request.ok()) {
    std::cerr << "mobius-inspect: " << request.status().message() << "\n";
    return 2;
  }
  std::cout << mobius::inspect::InspectResultToJson(mobius::inspect::Inspect(*request))
            << std::endl;
  return 0;
}
