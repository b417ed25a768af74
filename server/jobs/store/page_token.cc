#include "server/jobs/store/page_token.h"

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mobius::jobs {
namespace {

std::string Fingerprint(const ListJobsFilter& filter) {
  return absl::StrCat(filter.uid.has_value() ? absl::StrCat("u", *filter.uid) : "u*", "s",
                      filter.states.mask());
}

absl::Status BadToken(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("page_token: ", why));
}

}  // namespace

std::string EncodePageToken(int64_t last_seq, const ListJobsFilter& filter) {
  return absl::WebSafeBase64Escape(absl::StrCat("v1:", last_seq, ":", Fingerprint(filter)));
}

absl::StatusOr<int64_t> DecodePageToken(absl::string_view token, const ListJobsFilter& filter) {
  if (token.empty()) return 0;
  std::string text;
  if (token.size() > 256 || !absl::WebSafeBase64Unescape(token, &text)) {
    return BadToken("not a token returned by ListJobs");
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  int64_t last_seq = 0;
  if (parts.size() != 3 || parts[0] != "v1" || !absl::SimpleAtoi(parts[1], &last_seq) ||
      last_seq <= 0) {
    return BadToken("not a token returned by ListJobs");
  }
  if (parts[2] != Fingerprint(filter)) {
    return BadToken("issued for a different filter (keep the filter fixed while paging)");
  }
  return last_seq;
}

}  // namespace mobius::jobs
