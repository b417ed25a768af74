// Memory estimator: GPU memory per GPU, host RAM and pinned RAM for a job and its plan, before
// anything runs (the daemon admits jobs by it; users see it in `mobius plan`).
//
//   GPU g:   reserved (margin + max unit workspace) + 2 x max over g's stages of slot bytes
//            (the two-slot model of cost_model.h: the computing and the prefetched stage).
//   host:    (weight + gradient + optimizer bytes per parameter) x TotalParameters: bf16 weights 2
//            + gradients in the profile's dtype (Profile::gradient_bytes_per_parameter: 4 = fp32,
//            what worker/runtime keeps in its host store; 2 = bf16, design/mobius.md section 3's
//            16-byte figure) + fp32 master and Adam moments 12 = 18 bytes/parameter by default
//            + activation checkpoints: sum over stages of M x the boundary bytes of the stage's
//            first unit (its input, kept in host memory from forward to backward).
//   pinned:  (weight + gradient bytes) x parameters (bf16 upload copy + gradient landing zone =
//            6 with fp32 gradients) + the activation checkpoints. Master weights and moments stay
//            pageable.
//
// Pure; thread-safe.
#ifndef MOBIUS_SERVER_PLANNER_ESTIMATOR_H_
#define MOBIUS_SERVER_PLANNER_ESTIMATOR_H_

#include <cstdint>

#include "common/model/layer_units.h"
#include "server/planner/plan.h"

namespace mobius::planner {

struct EstimatorOptions {
  int64_t weight_bytes_per_parameter = 2;      // bf16 upload copy
  int64_t optimizer_bytes_per_parameter = 12;  // fp32 master + Adam m + v
  // Gradient bytes per parameter come from Profile::gradient_bytes_per_parameter.
};

// REQUIRES: `partition` and `mapping` were made from `problem`, which was made from `profile`.
MemoryEstimate EstimateMemory(const model::ModelDescription& model, const Profile& profile,
                              const PartitionProblem& problem, const Partition& partition,
                              const Mapping& mapping, int num_microbatches,
                              const EstimatorOptions& options = {});

// The round-robin schedule (plan.h): GPU position i holds two of the passes j = i (mod N), so
// reserved + 2 x its largest pass slot (forward: W + A; backward: W + G + A); host checkpoints =
// M x the boundary bytes of every unit in CheckpointUnits() (forward and backward stage inputs).
// REQUIRES: `plan.round_robin` and `plan.mapping` made from `problem`, made from `profile`.
MemoryEstimate EstimateRoundRobinMemory(const model::ModelDescription& model,
                                        const Profile& profile, const PartitionProblem& problem,
                                        const Plan& plan, const EstimatorOptions& options = {});

}  // namespace mobius::planner

#endif  // MOBIUS_SERVER_PLANNER_ESTIMATOR_H_
