#include "worker/inspect/inspect_verb.h"

#include <signal.h>
#include <sys/prctl.h>

#include <iostream>

#include "common/inspect/inspection.h"
#include "common/subprocess.h"

namespace mobius::inspect {

int RunInspectVerb(const std::vector<std::string>& args) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (args.size() != 3) {
    std::cerr << "usage: " << kInspectUsage << "\n";
    return 2;
  }
  absl::StatusOr<std::string> text = ReadArgumentText(args[2]);
  absl::StatusOr<InspectRequest> request =
      text.ok() ? InspectRequestFromJson(*text) : absl::StatusOr<InspectRequest>(text.status());
  if (!request.ok()) {
    std::cerr << "mobius-worker inspect: " << request.status().message() << "\n";
    return 2;
  }
  std::cout << InspectResultToJson(Inspect(*request)) << std::endl;
  return 0;
}

}  // namespace mobius::inspect
