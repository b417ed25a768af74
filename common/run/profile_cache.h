// The measured-profile cache on disk: one JSON file (profile_json.h) per key (measured_profile.h:
// ProfileCacheKey = model hash, microbatch shape, backend, device, build version) in a cache
// directory. The directory is a flag (--profile_cache_dir); by default $XDG_CACHE_HOME/mobius/
// profiles, else $HOME/.cache/mobius/profiles.
//
// Writes are atomic (a temporary file in the directory, then rename), so concurrent profilers of
// the same key leave one complete file. Reads validate the file and name it in errors.
//
// Thread-safe (no shared state); does file I/O.
#ifndef MOBIUS_COMMON_RUN_PROFILE_CACHE_H_
#define MOBIUS_COMMON_RUN_PROFILE_CACHE_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/run/measured_profile.h"

namespace mobius::planner {

// `flag` when non-empty, else the default above. FAILED_PRECONDITION when neither
// XDG_CACHE_HOME nor HOME is set.
absl::StatusOr<std::string> ResolveProfileCacheDir(const std::string& flag);

// <dir>/<key>.json
std::string ProfileCachePath(const std::string& dir, const std::string& key);

// The cache key of a measured profile (its own model hash, shape, backend, device, version).
std::string CacheKeyOf(const MeasuredProfile& profile);

// Reads and validates a profile file. NOT_FOUND when it does not exist; INVALID_ARGUMENT (with the
// path and field) when it does not parse or validate.
absl::StatusOr<MeasuredProfile> ReadProfileFile(const std::string& path);

// The cached profile for `key`, nullopt when none is cached; an unreadable or invalid cache file is
// an error (INVALID_ARGUMENT with its path: delete it to profile again).
absl::StatusOr<std::optional<MeasuredProfile>> LookupCachedProfile(const std::string& dir,
                                                                   const std::string& key);

// Writes `profile` to `path` atomically (creating parent directories). INTERNAL with errno text
// on failure.
absl::Status WriteProfileFile(const std::string& path, const MeasuredProfile& profile);

}  // namespace mobius::planner

#endif  // MOBIUS_COMMON_RUN_PROFILE_CACHE_H_
