#include "client/exit_codes.h"

namespace mobius::cli {

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return kExitUnreachable;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kAlreadyExists:       // a submission id reused with another spec
    case absl::StatusCode::kFailedPrecondition:  // a job that can never fit, a job already ended
    case absl::StatusCode::kUnauthenticated:
      return kExitUsage;
    default:
      return kExitServerError;
  }
}

}  // namespace mobius::cli
