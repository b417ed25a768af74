// Memory estimator: GPU memory per GPU, host RAM and pinned RAM for a job and its plan, before
// anything runs (the daemon admits jobs by it; users see it in `mobius plan`).
//
//   GPU g:   reserved (margin + max unit workspace) + 2 x max over g's stages of slot bytes
//            (the two-slot model of cost_model.h: the computing and the prefetched stage).
//   host:    host_bytes_per_parameter x TotalParameters (full fine-tuning with Adam: bf16 weights 2
//            + bf16 gradients 2 + fp32 master 4 + fp32 moments 8 = 16, design/mobius.md section 3)
//            + activation checkpoints: sum over stages of M x the boundary bytes of the stage's
//            first unit (its input, kept in host memory from forward to backward).
//   pinned:  pinned_bytes_per_parameter x parameters (bf16 upload copy + bf16 gradient landing
//            zone = 4) + the activation checkpoints. Master weights and moments stay pageable.
//
// Pure; thread-safe.
#ifndef MOBIUS_SERVER_PLANNER_ESTIMATOR_H_
#define MOBIUS_SERVER_PLANNER_ESTIMATOR_H_

#include <cstdint>

#include "common/model/layer_units.h"
#include "server/planner/plan.h"

namespace mobius::planner {

struct EstimatorOptions {
  int64_t host_bytes_per_parameter = 16;
  int64_t pinned_bytes_per_parameter = 4;
};

// REQUIRES: `partition` and `mapping` were made from `problem`, which was made from `profile`.
MemoryEstimate EstimateMemory(const model::ModelDescription& model, const Profile& profile,
                              const PartitionProblem& problem, const Partition& partition,
                              const Mapping& mapping, int num_microbatches,
                              const EstimatorOptions& options = {});

}  // namespace mobius::planner

#endif  // MOBIUS_SERVER_PLANNER_ESTIMATOR_H_
