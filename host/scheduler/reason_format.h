// Small text helpers shared by the scheduler's messages (pending reasons, CheckFits errors), so
// that every message writes bytes and GPU lists the same way: "40.0 GiB", "GPUs 2,3", "GPU 5".
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_SCHEDULER_REASON_FORMAT_H_
#define MOBIUS_HOST_SCHEDULER_REASON_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace mobius::jobs {

// "512 B", "12.0 GiB", "1.5 TiB"; negative amounts print as "0 B" (an over-committed budget has
// nothing free).
std::string FormatSize(int64_t bytes);

// "2,3" (as given; callers pass ascending lists).
std::string FormatGpuIndices(const std::vector<int>& gpus);

// "GPU 2" or "GPUs 2,3".
std::string FormatGpus(const std::vector<int>& gpus);

}  // namespace mobius::jobs

#endif  // MOBIUS_HOST_SCHEDULER_REASON_FORMAT_H_
