#include "server/planner/estimator.h"

#include <algorithm>

namespace mobius::planner {

MemoryEstimate EstimateMemory(const model::ModelDescription& model, const Profile& profile,
                              const PartitionProblem& problem, const Partition& partition,
                              const Mapping& mapping, int num_microbatches,
                              const EstimatorOptions& options) {
  MemoryEstimate e;
  e.gpu_capacity_bytes = problem.gpu_memory_bytes;
  const int n = static_cast<int>(mapping.gpu_order.size());
  std::vector<int64_t> largest_slot(n, -1);
  for (int s = 0; s < partition.num_stages(); ++s) {
    int64_t& slot = largest_slot[s % n];
    slot = std::max(slot, partition.costs[s].slot_bytes);
    e.host_activation_bytes +=
        num_microbatches * profile.units[partition.stages[s].begin].boundary_bytes;
  }
  for (int i = 0; i < n; ++i) {
    const int64_t bytes = largest_slot[i] < 0 ? 0 : problem.reserved_bytes + 2 * largest_slot[i];
    e.gpu_bytes.push_back(bytes);
    e.max_gpu_bytes = std::max(e.max_gpu_bytes, bytes);
  }
  const int64_t params = model::TotalParameters(model);
  e.host_model_state_bytes = options.host_bytes_per_parameter * params;
  e.host_bytes = e.host_model_state_bytes + e.host_activation_bytes;
  e.pinned_bytes = options.pinned_bytes_per_parameter * params + e.host_activation_bytes;
  return e;
}

}  // namespace mobius::planner
