#include "host/planner/estimator.h"

#include <algorithm>

namespace mobius::planner {
namespace {

// Host bytes from the model state, the activations (e.host_activation_bytes and
// e.host_activation_grad_bytes, filled by the caller) and the processes; pinned bytes.
void FillHost(const model::ModelDescription& model, const Profile& profile,
              const EstimatorOptions& options, MemoryEstimate& e) {
  // One worker process per GPU that runs a stage.
  const int64_t num_workers = std::count_if(e.gpu_bytes.begin(), e.gpu_bytes.end(),
                                            [](int64_t bytes) { return bytes > 0; });
  const int64_t params = model::TotalParameters(model);
  e.host_activation_bytes *= options.checkpoint_copies;
  e.host_process_bytes = num_workers * options.worker_process_bytes;
  if (profile.lora) {
    // The frozen base once in bf16 (an NF4 base: its linears' blobs instead); the adapters' full
    // training state.
    const int64_t adapters = profile.lora->parameters;
    int64_t base = options.weight_bytes_per_parameter * params;
    for (int64_t u = 0; u < model.num_units(); ++u) {
      base += profile.lora->BaseBytes(u, 0);  // 0 - 2 x NF4 values + their blobs' bytes
    }
    e.host_model_state_bytes = base + options.adapter_bytes_per_parameter * adapters +
                               options.norm_partial_bytes * profile.lora->norm_chunks;
    // Uploaded from: the base and the adapters' fp32 masters; landed into: their gradients.
    e.pinned_bytes =
        base + LoraWeightBytes(0, adapters) + LoraGradientBytes(adapters) + e.host_activation_bytes;
  } else {
    const int64_t dma_bytes =
        options.weight_bytes_per_parameter + profile.gradient_bytes_per_parameter;
    e.host_model_state_bytes = (dma_bytes + options.optimizer_bytes_per_parameter +
                                options.stale_weight_copy_bytes_per_parameter) *
                               params;
    // The second weight copy is uploaded from, so pinned like the first.
    e.pinned_bytes = (dma_bytes + options.stale_weight_copy_bytes_per_parameter) * params +
                     e.host_activation_bytes;
  }
  e.host_bytes = e.host_model_state_bytes + e.host_activation_bytes + e.host_activation_grad_bytes +
                 e.host_process_bytes + e.host_emulated_device_bytes;
}

// The CPU GEMM's fp32 copy of a bf16 weight (worker/backend/cpu/cpu_gemm.cc): whole up to 16 MiB,
// larger ones in pieces of at most max(16 MiB, 4 x 64 x K) bytes, K <= the longer dimension.
int64_t CpuGemmConversionBytes(const model::ParamSpec& p) {
  int64_t longest = 0;
  for (int64_t d : p.shape) longest = std::max(longest, d);
  return std::min<int64_t>(4 * p.num_elements, std::max<int64_t>(int64_t{16} << 20, 4 * 64 * longest));
}

// The largest such copy among the weights the units [begin, end) multiply by: matmul weights,
// and a tied head's shared embedding (an embedding lookup is no GEMM).
int64_t LargestGemmConversion(const model::ModelDescription& model, int64_t begin, int64_t end) {
  int64_t largest = 0;
  for (int64_t u = begin; u < end; ++u) {
    for (const model::ParamSpec& p : model.units[u].params) {
      if (p.role == model::ParamRole::kMatmulWeight) {
        largest = std::max(largest, CpuGemmConversionBytes(p));
      }
    }
    for (const model::ParamSpec& p : model.units[u].shared_params) {
      largest = std::max(largest, CpuGemmConversionBytes(p));
    }
  }
  return largest;
}

// What one GPU position's stages need at most: kTwoSlot the largest stage memory (2 x slot);
// kRuntime, as the runtime sizes its buffers (pipeline_worker.cc: one allocation per slot for a
// stage's weights and gradients together), two slots for the largest W + G and the buffers for
// the most unit inputs, each over all its stages.
struct GpuNeed {
  bool used = false;
  int64_t memory = 0, slot = 0, activations = 0;
  void Add(const StageCost& c) {
    used = true;
    memory = std::max(memory, c.memory_bytes);
    slot = std::max(slot, c.weight_bytes + c.gradient_bytes);
    activations = std::max(activations, c.activation_bytes);
  }
  int64_t Bytes(const PartitionProblem& p) const {
    if (!used) return 0;
    if (p.memory_model == MemoryModel::kRuntime) return p.reserved_bytes + 2 * slot + activations;
    return p.reserved_bytes + memory;
  }
};

// The reserved bytes + the stages' needs per GPU position; with devices in host memory, their
// share of the host estimate too.
void FillGpus(const PartitionProblem& problem, const std::vector<GpuNeed>& needs,
              const std::vector<int64_t>& largest_tensor, const EstimatorOptions& options,
              MemoryEstimate& e) {
  e.gpu_capacity_bytes = problem.gpu_memory_bytes;
  for (size_t g = 0; g < needs.size(); ++g) {
    const bool used = needs[g].used;
    const int64_t bytes = needs[g].Bytes(problem);
    e.gpu_bytes.push_back(bytes);
    e.max_gpu_bytes = std::max(e.max_gpu_bytes, bytes);
    if (options.devices_in_host_memory && used) {
      e.host_emulated_device_bytes +=
          std::max<int64_t>(bytes - options.memory_margin_bytes, 0) + largest_tensor[g];
    }
  }
}

}  // namespace

MemoryEstimate EstimateMemory(const model::ModelDescription& model, const Profile& profile,
                              const PartitionProblem& problem, const Partition& partition,
                              const Mapping& mapping, int num_microbatches,
                              const EstimatorOptions& options) {
  MemoryEstimate e;
  const int n = static_cast<int>(mapping.gpu_order.size());
  std::vector<GpuNeed> needs(n);
  std::vector<int64_t> largest_tensor(n, 0);
  for (int s = 0; s < partition.num_stages(); ++s) {
    needs[s % n].Add(partition.costs[s]);
    const StageRange& range = partition.stages[s];
    largest_tensor[s % n] =
        std::max(largest_tensor[s % n], LargestGemmConversion(model, range.begin, range.end));
    const int64_t boundary = profile.units[range.begin].boundary_bytes;
    e.host_activation_bytes += num_microbatches * boundary;
    // The fp32 gradient crossing into this stage's input: one buffer per microbatch serves every
    // boundary (common/run/store_layout.h), sized for the widest.
    if (s > 0) {
      e.host_activation_grad_bytes =
          std::max(e.host_activation_grad_bytes, num_microbatches * 2 * boundary);
    }
  }
  FillGpus(problem, needs, largest_tensor, options, e);
  FillHost(model, profile, options, e);
  return e;
}

MemoryEstimate EstimateRoundRobinMemory(const model::ModelDescription& model,
                                        const Profile& profile, const PartitionProblem& problem,
                                        const Plan& plan, const EstimatorOptions& options) {
  MemoryEstimate e;
  const int n = static_cast<int>(plan.mapping.gpu_order.size());
  std::vector<GpuNeed> needs(n);
  std::vector<int64_t> largest_tensor(n, 0);
  for (int j = 0; j < plan.num_passes(); ++j) {
    const PassRef pass = plan.PassAt(j);
    const Partition& part = pass.backward ? plan.round_robin->backward : plan.round_robin->forward;
    const StageRange& range = part.stages[pass.stage];
    const int64_t conversion = LargestGemmConversion(model, range.begin, range.end);
    for (int g = 0; g < n; ++g) {
      if (g != j % n && !(options.every_pass_on_every_gpu && g < plan.num_passes())) continue;
      needs[g].Add(part.costs[pass.stage]);
      largest_tensor[g] = std::max(largest_tensor[g], conversion);
    }
  }
  // Unit 0's input (the token ids) is also kept, as in EstimateMemory (stage 0's input).
  e.host_activation_bytes = plan.num_microbatches * profile.units[0].boundary_bytes;
  for (int unit : plan.CheckpointUnits()) {
    e.host_activation_bytes += plan.num_microbatches * profile.units[unit].boundary_bytes;
  }
  const Partition& backward = plan.round_robin->backward;
  for (int b = 1; b < backward.num_stages(); ++b) {  // one buffer per microbatch, as above
    e.host_activation_grad_bytes =
        std::max(e.host_activation_grad_bytes,
                 plan.num_microbatches * 2 * profile.units[backward.stages[b].begin].boundary_bytes);
  }
  FillGpus(problem, needs, largest_tensor, options, e);
  FillHost(model, profile, options, e);
  return e;
}

}  // namespace mobius::planner
