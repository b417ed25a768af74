// Flags of `mobius-worker profile` (defined in profile_flags.cc with help text and defaults). It
// also reads the shared worker flags --model, --microbatch, --seq, --out, --device_memory_bytes
// and --threads (worker/checkpoint/worker_flags.h).
#ifndef MOBIUS_WORKER_PROFILE_PROFILE_FLAGS_H_
#define MOBIUS_WORKER_PROFILE_PROFILE_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "worker/checkpoint/worker_flags.h"

// --backend: worker/checkpoint/worker_flags.h (shared with train).
ABSL_DECLARE_FLAG(std::string, cache_dir);
ABSL_DECLARE_FLAG(bool, refresh);
ABSL_DECLARE_FLAG(int32_t, profile_warmup);
ABSL_DECLARE_FLAG(int32_t, profile_repetitions);
ABSL_DECLARE_FLAG(int64_t, copy_mib);
ABSL_DECLARE_FLAG(int32_t, devices);
ABSL_DECLARE_FLAG(bool, links);

#endif  // MOBIUS_WORKER_PROFILE_PROFILE_FLAGS_H_
