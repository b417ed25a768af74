// Running `mobius-worker profile` from another program (`mobius plan --profile=measured`, the
// end-to-end benchmark's --measure_profile) and reading back what it measured.
//
// Spawns the worker (its stdout, one line naming the cache file, goes to this process's stderr, so
// a caller's stdout stays clean), waits for it, and reads the --out file it wrote (a temporary file
// in /tmp, removed afterwards). Blocks for as long as the profiler runs; thread-compatible.
#ifndef MOBIUS_COMMON_RUN_PROFILE_RUNNER_H_
#define MOBIUS_COMMON_RUN_PROFILE_RUNNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/run/measured_profile.h"

namespace mobius::planner {

struct WorkerProfileRequest {
  std::string worker;  // the mobius-worker binary
  std::string model;   // model directory or config.json
  int64_t microbatch = 1;
  int64_t seq = 1024;
  std::string backend = "cpu";
  std::string precision = "bf16";       // --precision: the units' 16-bit format
  std::string cache_dir;                // empty: the worker's default
  std::vector<std::string> extra_args;  // e.g. "--device_memory_bytes=N", "--threads=N"
};

// FAILED_PRECONDITION naming the binary when it is missing or cannot start, or when the profiler
// fails (its exit status; its own message is on stderr above); the file's errors from
// ReadProfileFile otherwise.
absl::StatusOr<MeasuredProfile> RunWorkerProfile(const WorkerProfileRequest& request);

}  // namespace mobius::planner

#endif  // MOBIUS_COMMON_RUN_PROFILE_RUNNER_H_
