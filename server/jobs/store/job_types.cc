#include "server/jobs/store/job_types.h"

#include <cstdio>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace mobius::jobs {

absl::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "QUEUED";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kSucceeded:
      return "SUCCEEDED";
    case JobState::kFailed:
      return "FAILED";
    case JobState::kCancelled:
      return "CANCELLED";
  }
  return "UNKNOWN";
}

absl::StatusOr<JobState> ParseJobState(absl::string_view name) {
  for (int i = 0; i < kNumJobStates; ++i) {
    const auto state = static_cast<JobState>(i);
    if (JobStateName(state) == name) return state;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown job state '", name, "' (expected QUEUED, RUNNING, SUCCEEDED, FAILED or CANCELLED)"));
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

bool IsLegalTransition(JobState from, JobState to) {
  switch (from) {
    case JobState::kQueued:
      return to == JobState::kRunning || to == JobState::kCancelled || to == JobState::kFailed;
    case JobState::kRunning:
      return to == JobState::kQueued || IsTerminal(to);
    case JobState::kSucceeded:
    case JobState::kFailed:
    case JobState::kCancelled:
      return false;
  }
  return false;
}

absl::Status CheckTransition(absl::string_view job_id, JobState from, JobState to) {
  if (IsLegalTransition(from, to)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("job ", job_id, ": illegal transition ", JobStateName(from), " -> ",
                   JobStateName(to), IsTerminal(from) ? " (the job is already finished)" : ""));
}

std::vector<JobState> JobStateSet::states() const {
  std::vector<JobState> out;
  for (int i = 0; i < kNumJobStates; ++i) {
    if (Contains(static_cast<JobState>(i))) out.push_back(static_cast<JobState>(i));
  }
  return out;
}

std::string FormatJobId(int64_t seq) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "j-%06lld", static_cast<long long>(seq));
  return buf;
}

absl::StatusOr<int64_t> ParseJobId(absl::string_view id) {
  int64_t seq = 0;
  if (absl::StartsWith(id, "j-") && id.size() <= 22 && absl::SimpleAtoi(id.substr(2), &seq) &&
      seq > 0 && FormatJobId(seq) == id) {
    return seq;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("job id '", absl::CHexEscape(id), "' is not of the form j-000123"));
}

}  // namespace mobius::jobs
