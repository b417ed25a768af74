// Pinning a worker to the CPUs of its GPU's NUMA node (RunConfig::rank_cpus), so that the pages of
// the stages it first-touches in the host store live on that node and its optimizer threads
// update them from local memory.
//
// The node's CPUs come from the topology the plan was made on; on another machine (a topology
// fixture, a container with a narrower cpuset) some or all of them may not be usable here, so the
// worker pins to the intersection with the CPUs it is allowed to run on, and not at all when that
// is empty.
//
// Thread-safety: UsableCpus is pure; PinAllThreads changes the affinity of every thread of the
// calling process (call it before starting threads that must not move meanwhile).
#ifndef MOBIUS_WORKER_RUNTIME_NUMA_AFFINITY_H_
#define MOBIUS_WORKER_RUNTIME_NUMA_AFFINITY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mobius::runtime {

// `node_cpus` ∩ `allowed`, ascending, without duplicates.
std::vector<int> UsableCpus(const std::vector<int>& node_cpus, const std::vector<int>& allowed);

// The CPUs this process may run on (sched_getaffinity).
absl::StatusOr<std::vector<int>> AllowedCpus();

// Sets the affinity of every thread of this process (/proc/self/task) to `cpus` (non-empty).
// Threads that exit meanwhile are skipped; any other failure is returned with the thread id.
absl::Status PinAllThreads(const std::vector<int>& cpus);

// "0-3,8,10-11"
std::string FormatCpuList(const std::vector<int>& cpus);

}  // namespace mobius::runtime

#endif  // MOBIUS_WORKER_RUNTIME_NUMA_AFFINITY_H_
