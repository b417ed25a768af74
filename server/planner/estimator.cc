#include "server/planner/estimator.h"

#include <algorithm>

namespace mobius::planner {
namespace {

// Host and pinned bytes from the model state and e.host_activation_bytes.
void FillHost(const model::ModelDescription& model, const Profile& profile,
              const EstimatorOptions& options, MemoryEstimate& e) {
  const int64_t params = model::TotalParameters(model);
  const int64_t dma_bytes =
      options.weight_bytes_per_parameter + profile.gradient_bytes_per_parameter;
  e.host_model_state_bytes = (dma_bytes + options.optimizer_bytes_per_parameter) * params;
  e.host_bytes = e.host_model_state_bytes + e.host_activation_bytes;
  e.pinned_bytes = dma_bytes * params + e.host_activation_bytes;
}

// reserved + 2 x the largest slot per GPU position (-1: no stage there).
void FillGpus(const PartitionProblem& problem, const std::vector<int64_t>& largest_slot,
              MemoryEstimate& e) {
  e.gpu_capacity_bytes = problem.gpu_memory_bytes;
  for (int64_t slot : largest_slot) {
    const int64_t bytes = slot < 0 ? 0 : problem.reserved_bytes + 2 * slot;
    e.gpu_bytes.push_back(bytes);
    e.max_gpu_bytes = std::max(e.max_gpu_bytes, bytes);
  }
}

}  // namespace

MemoryEstimate EstimateMemory(const model::ModelDescription& model, const Profile& profile,
                              const PartitionProblem& problem, const Partition& partition,
                              const Mapping& mapping, int num_microbatches,
                              const EstimatorOptions& options) {
  MemoryEstimate e;
  const int n = static_cast<int>(mapping.gpu_order.size());
  std::vector<int64_t> largest_slot(n, -1);
  for (int s = 0; s < partition.num_stages(); ++s) {
    int64_t& slot = largest_slot[s % n];
    slot = std::max(slot, partition.costs[s].slot_bytes);
    e.host_activation_bytes +=
        num_microbatches * profile.units[partition.stages[s].begin].boundary_bytes;
  }
  FillGpus(problem, largest_slot, e);
  FillHost(model, profile, options, e);
  return e;
}

MemoryEstimate EstimateRoundRobinMemory(const model::ModelDescription& model,
                                        const Profile& profile, const PartitionProblem& problem,
                                        const Plan& plan, const EstimatorOptions& options) {
  MemoryEstimate e;
  const int n = static_cast<int>(plan.mapping.gpu_order.size());
  std::vector<int64_t> largest_slot(n, -1);
  for (int j = 0; j < plan.num_passes(); ++j) {
    const PassRef pass = plan.PassAt(j);
    const Partition& part = pass.backward ? plan.round_robin->backward : plan.round_robin->forward;
    int64_t& slot = largest_slot[j % n];
    slot = std::max(slot, part.costs[pass.stage].slot_bytes);
  }
  // Unit 0's input (the token ids) is also kept, as in EstimateMemory (stage 0's input).
  e.host_activation_bytes = plan.num_microbatches * profile.units[0].boundary_bytes;
  for (int unit : plan.CheckpointUnits()) {
    e.host_activation_bytes += plan.num_microbatches * profile.units[unit].boundary_bytes;
  }
  FillGpus(problem, largest_slot, e);
  FillHost(model, profile, options, e);
  return e;
}

}  // namespace mobius::planner
