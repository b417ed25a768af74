// Memory estimator: GPU memory per GPU, host RAM and pinned RAM for a job and its plan, before
// anything runs (the daemon admits jobs by it; users see it in `mobius plan`).
//
//   GPU g:   reserved (margin + max unit workspace, + the fixed activation buffers under
//            MemoryModel::kRuntime) + what g's stages need (cost_model.h "memory"): kRuntime
//            2 x (the largest W + the largest G) + the largest sum of unit inputs over its stages,
//            as the runtime sizes its two slots and buffers; kTwoSlot 2 x the largest slot.
//   host:    what the job's processes use together, the sum of
//            - the shared store: (weight + gradient + optimizer bytes per parameter) x
//              TotalParameters: bf16 weights 2 + gradients in the profile's dtype
//              (Profile::gradient_bytes_per_parameter: 4 = fp32, what worker/runtime keeps in its
//              host store; 2 = bf16, design/mobius.md section 3's 16-byte figure) + fp32 master
//              and Adam moments 12 = 18 bytes/parameter by default (+ 2 with the runtime's
//              asynchronous optimizer, staleness 1: a second bf16 weight copy, the one the
//              passes read while the optimizer writes the other); the activation checkpoints
//              (sum over stages of M x the boundary bytes of the stage's first unit: its input,
//              kept from forward to backward); the fp32 activation gradients (M x 2 x the boundary
//              bytes: one buffer per microbatch, handed down the backward stage boundaries);
//            - per worker process its fixed footprint (worker_process_bytes: code, libraries,
//              BLAS buffers; measured, docs/runtime.md);
//            - with devices_in_host_memory (the CPU backend emulating the GPUs), every GPU's
//              working memory, which is host memory then: its estimate below less the CUDA
//              margin, plus the CPU GEMM's fp32 copy of the largest weight it multiplies by
//              (4 bytes per element up to 16 MiB; larger weights are widened in pieces of at
//              most max(16 MiB, 4 x 64 x their longer dimension)).
//            Measured against PSS of all processes in bench/memory (docs/benchmarks.md).
//   pinned:  (weight + gradient bytes) x parameters (bf16 upload copy + gradient landing zone =
//            6 with fp32 gradients; + 2 for the second weight copy with staleness 1) + the
//            activation checkpoints. Master weights and moments stay
//            pageable.
//   LoRA (Profile::lora, lora.h): the store holds the base once in bf16 and the adapters' state:
//            model state = 2 x TotalParameters + adapter_bytes_per_parameter (16: fp32 master +
//            Adam m + v + fp32 gradient) x adapter parameters + 8 x the adapters' grad-norm
//            chunks (one double per 64 Ki elements of each adapter tensor); checkpoints,
//            activation gradients, processes and emulated devices as above; pinned = 2 x
//            TotalParameters (the bf16 base) + 8 x adapter parameters (the fp32 masters the
//            passes upload and the gradient landing zone) + the checkpoints. GPU slots come from
//            the profile (W = base + fp32 adapters, G = adapter gradients; lora.h).
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_PLANNER_ESTIMATOR_H_
#define MOBIUS_HOST_PLANNER_ESTIMATOR_H_

#include <cstdint>

#include "common/model/layer_units.h"
#include "host/planner/plan.h"

namespace mobius::planner {

// A worker process's own footprint beyond its share of the store and its (emulated) device
// memory, measured with bench/memory on the CPU backend: ~100 MiB anonymous (allocator arenas,
// OpenBLAS buffers, thread stacks) plus its share of the mapped binary and libraries.
inline constexpr int64_t kWorkerProcessBytes = int64_t{128} << 20;

struct EstimatorOptions {
  int64_t weight_bytes_per_parameter = 2;      // bf16 upload copy
  int64_t optimizer_bytes_per_parameter = 12;  // fp32 master + Adam m + v
  // LoRA: per adapter parameter fp32 master + Adam m + v + fp32 gradient; per grad-norm chunk of
  // an adapter tensor one double.
  int64_t adapter_bytes_per_parameter = 16;
  int64_t norm_partial_bytes = 8;
  // Optimizer staleness 1 (PlanOptions::optimizer_staleness): a second bf16 weight copy, 2; and
  // two copies of the activation checkpoints (common/run/store_layout.h), 2.
  int64_t stale_weight_copy_bytes_per_parameter = 0;
  int checkpoint_copies = 1;
  // Gradient bytes per parameter come from Profile::gradient_bytes_per_parameter.
  int64_t worker_process_bytes = kWorkerProcessBytes;
  bool devices_in_host_memory = false;  // the CPU backend emulates the GPUs in host memory
  int64_t memory_margin_bytes = int64_t{1} << 30;  // of each GPU estimate, not allocated emulated
  // Round-robin passes that may run on any GPU (pool dispatch, or a pass count that is no multiple
  // of the GPU count, whose assignment rotates every step: common/run/run_config.h
  // RankOfPassVaries): every worker sizes its slots for every pass.
  bool every_pass_on_every_gpu = false;
};

// REQUIRES: `partition` and `mapping` were made from `problem`, which was made from `profile`.
MemoryEstimate EstimateMemory(const model::ModelDescription& model, const Profile& profile,
                              const PartitionProblem& problem, const Partition& partition,
                              const Mapping& mapping, int num_microbatches,
                              const EstimatorOptions& options = {});

// The round-robin schedule (plan.h): GPU position i holds two of the passes j = i (mod N) (every
// pass with options.every_pass_on_every_gpu), so reserved + 2 x its largest pass slot (forward:
// W + A; backward: W + G + A) + its largest pass's activations; host checkpoints =
// M x the boundary bytes of every unit in CheckpointUnits() (forward and backward stage inputs).
// REQUIRES: `plan.round_robin` and `plan.mapping` made from `problem`, made from `profile`.
MemoryEstimate EstimateRoundRobinMemory(const model::ModelDescription& model,
                                        const Profile& profile, const PartitionProblem& problem,
                                        const Plan& plan, const EstimatorOptions& options = {});

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_ESTIMATOR_H_
