#include "worker/profile/profile_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, cache_dir, "",
          "profile: measured-profile cache directory; empty: $XDG_CACHE_HOME/mobius/profiles or "
          "~/.cache/mobius/profiles.");
ABSL_FLAG(bool, refresh, false, "profile: measure even when the cache has this key.");
ABSL_FLAG(int32_t, profile_warmup, 1, "profile: untimed runs before timing.");
ABSL_FLAG(int32_t, profile_repetitions, 5, "profile: timed runs; the median is kept.");
ABSL_FLAG(int64_t, copy_mib, 64, "profile: MiB per timed host<->device copy.");
ABSL_FLAG(int32_t, devices, 1,
          "profile: devices measured, one contention group (cpu: emulated devices, each a capped "
          "CPU backend).");
ABSL_FLAG(bool, links, true, "profile: also measure copy bandwidths.");
