// `mobius-worker profile`: measures a model's layer units and the devices' copy bandwidth on the
// real backend (unit_profiler.h) and stores the result in the measured-profile cache
// (common/run/profile_cache.h), keyed by model config hash, microbatch shape,
// backend/device and build version. A cached entry is reused unless --refresh.
//
//   mobius-worker profile --model DIR|config.json --microbatch B --seq T [--backend cpu]
//       [--cache_dir DIR] [--out FILE] [--refresh] [--profile_warmup 1]
//       [--profile_repetitions 5] [--copy_mib 64] [--devices 1] [--nolinks]
//       [--device_memory_bytes N] [--threads N]
//
// stdout: one line "profile: PATH (cached|measured)" naming the cache file; --out FILE also
// writes a copy there (what `mobius plan --profile=measured` reads). Exit codes: 0 ok, 1 failure
// (backend, memory cap, I/O), 2 usage (missing --model, bad sizes, unknown backend).
//
// Call from main() after InitProcess; not thread-safe (reads flags).
#ifndef MOBIUS_WORKER_PROFILE_PROFILE_COMMAND_H_
#define MOBIUS_WORKER_PROFILE_PROFILE_COMMAND_H_

#include <string>
#include <vector>

namespace mobius::profile {

inline constexpr char kProfileUsage[] =
    "mobius-worker profile --model DIR --microbatch B --seq T [--backend cpu] [--cache_dir DIR] "
    "[--out FILE] [--refresh] [--profile_repetitions 5] [--devices 1]";

// `args` are the positional arguments, argv[0] first ("profile" second). Returns the exit code.
int RunProfileCommand(const std::vector<std::string>& args);

}  // namespace mobius::profile

#endif  // MOBIUS_WORKER_PROFILE_PROFILE_COMMAND_H_
