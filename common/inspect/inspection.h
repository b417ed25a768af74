// The daemon's checks of a job's files, run as the job's user: the daemon (root) reads no path of
// a spec itself. It sends an InspectRequest to `mobius-inspect fd:3` (started with the
// submitter's uid, gid and groups: host/launch/user_inspect.h), which runs Inspect() and prints
// the InspectResult as one JSON line. What a user cannot read fails there with that user's
// PERMISSION_DENIED, naming the path and the system error; no file's contents are quoted.
//
// Inspect() does, in order (the first error ends it and is the result's status):
//   1. every input of the spec readable by the user (PERMISSION_DENIED naming field and path),
//      then the spec's server-side validation with its file checks (jobspec::ValidateJobSpec with
//      check_files_exist);
//   2. the model directory's config.json: read (at most 1 MiB) and parsed; its text is returned
//      for the daemon's planner;
//   3. a text dataset: its cache descriptor (dataset_descriptor.h) and, with dataset_cache_dir,
//      the cached token file when there is a complete entry;
//   4. the checkpoint directory: one the user cannot write or create is refused, so is another
//      job's (checkpoint_owner.h); the newest
//      complete checkpoint of this job's is returned for a resume;
//   5. with run_config_json: the run config's launch checks (launch_checks.h).
//
// Thread-safety: Inspect is a function of the file system; the JSON helpers are pure.
#ifndef MOBIUS_COMMON_INSPECT_INSPECTION_H_
#define MOBIUS_COMMON_INSPECT_INSPECTION_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mobius::inspect {

struct InspectRequest {
  std::string spec_json;          // the normalised job spec (jobspec::JobSpecToJson)
  std::string job_id;             // the job the checkpoint directory must belong to
  std::string checkpoint_dir;     // the job's checkpoint directory (the spec's or the default)
  std::string dataset_cache_dir;  // the user's token-file cache; empty: no lookup
  std::string run_config_json;    // non-empty: run step 5 on it
  // Non-empty: only read this checkpoint directory's completion record (common/run/
  // completion_record.h) instead of steps 1-5 (the daemon's start-up, for a job it had running).
  std::string completion_dir;
};

struct InspectResult {
  absl::Status status;             // the first failed check, or OK
  std::string model_config_json;   // config.json's text
  std::string dataset_descriptor;  // text datasets
  std::string cached_token_file;   // a complete cache entry, or ""
  std::string latest_checkpoint;   // the job's newest complete checkpoint, or ""
  // completion_dir's record (when status is OK); status NOT_FOUND: there is none.
  std::string completion_job_id, completion_checkpoint;
  int64_t completion_steps = 0, completion_unix_ms = 0;
};

InspectResult Inspect(const InspectRequest& request);

std::string InspectRequestToJson(const InspectRequest& request);
absl::StatusOr<InspectRequest> InspectRequestFromJson(const std::string& text);
std::string InspectResultToJson(const InspectResult& result);
absl::StatusOr<InspectResult> InspectResultFromJson(const std::string& text);

}  // namespace mobius::inspect

#endif  // MOBIUS_COMMON_INSPECT_INSPECTION_H_
