// Mappers: which GPU runs which stage. A mapping is an order of the job's GPUs; stage s runs on
// gpu_order[s mod N] (the Mobius schedule binds stages to GPUs round-robin).
//
// The paper's contention score (design/mobius.md section 1.5, reconstruction):
//   score(order) = sum over stage pairs i < j < S of shared(gpu(i), gpu(j)) / (j - i)
//   shared(a, b) = number of the job's GPUs in the contention domain of a when a and b are in the
//                  same domain, else 0.
// Stages close in time prefetch at the same time, so pairs at distance 1 weigh most. The domain is
// a parameter:
//   kContentionGroup (default): GPUs sharing the uplink into the root complex (analysis.h), the
//   link
//                  that is physically shared. On the paper testbed it equals the root complex.
//   kRootComplex:  GPUs under one host bridge (the paper's wording); on servers with several root
//                  ports per host bridge it also separates consecutive stages across sockets.
// Counting only the job's GPUs: other jobs' traffic is not known to the planner.
//
// `sequential`: gpu_order = the granted GPUs in index order.
// `cross`:      the order minimising the score.
//   N <= exhaustive_max_gpus (8): every permutation (8! = 40320) scored in O(N^2) with per-position
//     weights precomputed in O(S^2): w(p, q) = sum over i < j < S, i = p, j = q (mod N) of 1/(j -
//     i). Ties go to the lexicographically smallest order, so with no contention cross ==
//     sequential.
//   Larger N: greedy construction (each position takes the GPU adding the least score, ties to the
//     smallest index) then 2-swap local search (first improvement) until no swap lowers the score:
//     O(N^4) per pass, a local optimum, not guaranteed global.
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_PLANNER_MAPPING_H_
#define MOBIUS_HOST_PLANNER_MAPPING_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "host/topology/analysis.h"

namespace mobius::planner {

enum class ContentionDomain { kContentionGroup, kRootComplex };

struct MappingOptions {
  ContentionDomain domain = ContentionDomain::kContentionGroup;
  int exhaustive_max_gpus = 8;
};

struct Mapping {
  std::vector<int> gpu_order;  // indices into Topology::gpus; stage s -> gpu_order[s % N]
  double contention_score = 0;
  std::string method;  // "sequential", "cross-exhaustive", "cross-local-search"

  int GpuOfStage(int stage) const { return gpu_order[stage % static_cast<int>(gpu_order.size())]; }
};

// The score above for `gpu_order` (its GPUs are the job's GPUs) and `num_stages` stages.
double ContentionScore(const topology::TopologyFacts& facts, const std::vector<int>& gpu_order,
                       int num_stages, ContentionDomain domain);

// `granted_gpus`: the GPUs the scheduler gave the job (indices into Topology::gpus).
// INVALID_ARGUMENT when empty, with duplicates or out of range, or when num_stages < 1.
absl::StatusOr<Mapping> SequentialMapping(const topology::TopologyFacts& facts,
                                          const std::vector<int>& granted_gpus, int num_stages,
                                          const MappingOptions& options = {});
absl::StatusOr<Mapping> CrossMapping(const topology::TopologyFacts& facts,
                                     const std::vector<int>& granted_gpus, int num_stages,
                                     const MappingOptions& options = {});

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_MAPPING_H_
