// Converting foreign errors (errno, hwloc, ...) into absl::Status at the edge of a module.
//
// Every converted status carries the library's own message and the file:line where the failure was
// seen, like NCCL's breadcrumbs, so an error printed three layers up still says where it came from.
// Codes are the canonical ones (they map 1:1 onto gRPC codes):
//   ENOENT -> NOT_FOUND, EACCES/EPERM -> PERMISSION_DENIED, EINVAL -> INVALID_ARGUMENT, ... (absl's
//   ErrnoToStatusCode table).
//
// Thread-safe: all functions are pure apart from reading errno.
#ifndef MOBIUS_COMMON_ERRORS_H_
#define MOBIUS_COMMON_ERRORS_H_

#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace mobius {

// "<what>: <strerror(error_number)> [file:line]" with the code absl derives from the errno value.
absl::Status ErrnoError(int error_number, absl::string_view what, const char* file, int line);

// hwloc reports failures by returning -1 (or NULL) and setting errno; this names the hwloc call.
// "hwloc: <what>: <strerror(errno)> [file:line]".
absl::Status HwlocError(int error_number, absl::string_view what, const char* file, int line);

// Prepends context to a status message, keeping its code: "<context>: <original message>".
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace mobius

// Capture errno at the call site (it must be read before anything else can change it).
#define MOBIUS_ERRNO_ERROR(what) ::mobius::ErrnoError(errno, (what), __FILE__, __LINE__)
#define MOBIUS_HWLOC_ERROR(what) ::mobius::HwlocError(errno, (what), __FILE__, __LINE__)

#endif  // MOBIUS_COMMON_ERRORS_H_
