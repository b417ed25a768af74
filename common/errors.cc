#include "common/errors.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace mobius {
namespace {

std::string BaseName(const char* file) {
  absl::string_view path(file);
  // Keep the path from the repository root when it is visible (host/topology/x.cc), else the
  // last two components: enough to find the file without leaking build-machine paths.
  for (absl::string_view root :
       {"/common/", "/host/", "/server/", "/worker/", "/client/", "/test/", "/bench/"}) {
    size_t pos = path.rfind(root);
    if (pos != absl::string_view::npos) return std::string(path.substr(pos + 1));
  }
  size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

std::string StrError(int error_number) {
  char buf[256];
  // GNU strerror_r returns a pointer that may or may not be buf.
  return std::string(strerror_r(error_number, buf, sizeof(buf)));
}

}  // namespace

absl::Status ErrnoError(int error_number, absl::string_view what, const char* file, int line) {
  if (error_number == 0) {
    return absl::InternalError(
        absl::StrCat(what, ": failed without an errno value [", BaseName(file), ":", line, "]"));
  }
  return absl::Status(absl::ErrnoToStatusCode(error_number),
                      absl::StrCat(what, ": ", StrError(error_number), " [", BaseName(file), ":",
                                   line, "]"));
}

absl::Status HwlocError(int error_number, absl::string_view what, const char* file, int line) {
  return ErrnoError(error_number, absl::StrCat("hwloc: ", what), file, line);
}

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

}  // namespace mobius
