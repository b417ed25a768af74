// Human-written byte sizes: "20GiB", "512 MB", "1.5TiB", "4096".
//
// Units: B, KB/MB/GB/TB/PB (powers of 1000) and KiB/MiB/GiB/TiB/PiB (powers of 1024), case
// insensitive, optionally separated from the number by spaces. The number is a non-negative
// decimal (a fraction is rounded to the nearest byte); a bare number is bytes. Single-letter units
// ("20G") are rejected on purpose: they are ambiguous between 10^9 and 2^30.
//
// Thread-safe: pure functions.
#ifndef MOBIUS_COMMON_JOBSPEC_BYTE_SIZE_H_
#define MOBIUS_COMMON_JOBSPEC_BYTE_SIZE_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace mobius::jobspec {

// INVALID_ARGUMENT saying what is wrong (without a field path: callers add theirs), for text that
// is not a size, an unknown unit, or a size beyond int64.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

// The shortest exact binary form: 21474836480 -> "20GiB", 1536 -> "1.5KiB", 1000 -> "1000B".
// ParseByteSize(FormatByteSize(n)) == n for every n >= 0.
std::string FormatByteSize(int64_t bytes);

}  // namespace mobius::jobspec

#endif  // MOBIUS_COMMON_JOBSPEC_BYTE_SIZE_H_
