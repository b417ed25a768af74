// ListJobs page tokens: an opaque keyset cursor (the last job returned) bound to the filter it was
// issued for. Clients must treat the text as opaque; the daemon passes it through unchanged.
//
// Encoding: web-safe base64 (no padding) of "v1:<last_seq>:<filter fingerprint>". A token that does
// not decode, or was issued for another filter, is INVALID_ARGUMENT naming `page_token`.
//
// Thread-safety: pure functions.
#ifndef MOBIUS_SERVER_JOBS_STORE_PAGE_TOKEN_H_
#define MOBIUS_SERVER_JOBS_STORE_PAGE_TOKEN_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/jobs/store/job_types.h"

namespace mobius::jobs {

std::string EncodePageToken(int64_t last_seq, const ListJobsFilter& filter);
// The last_seq to continue after; "" is the first page (0).
absl::StatusOr<int64_t> DecodePageToken(absl::string_view token, const ListJobsFilter& filter);

}  // namespace mobius::jobs

#endif  // MOBIUS_SERVER_JOBS_STORE_PAGE_TOKEN_H_
