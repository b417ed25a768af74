// The longest sequence a model trains at on given hardware: the largest sequence length (a
// multiple of `step` tokens) for which MakePlan finds a plan the runtime can execute, every GPU
// and the host inside their memory. What `mobius plan` prints as "Longest sequence" for full
// fine-tuning and LoRA (docs/planner.md, "Long sequences").
//
// The search: plans at seq = step, 2 step, ... are feasible up to some length and not beyond
// (device and host needs grow with the sequence), so a binary search over multiples of `step` in
// [step, limit] (limit: the model's max_position_embeddings, or `max_seq` when > 0) finds the
// largest; the reason the next length is refused comes back too.
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_PLANNER_API_LONGEST_SEQUENCE_H_
#define MOBIUS_HOST_PLANNER_API_LONGEST_SEQUENCE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/layer_units.h"
#include "host/planner/api/make_plan.h"
#include "host/topology/analysis.h"

namespace mobius::planner {

struct LongestSequence {
  int64_t seq_len = 0;    // the longest that plans; 0: not even `step` tokens
  int64_t limit = 0;      // the search's ceiling
  std::string refusal;    // why seq_len + step (or `step`) does not plan; empty at the limit
  int plans_tried = 0;
};

// `job` gives the global batch (sequences) and the microbatch; its seq_len is ignored. `options`
// as for MakePlan (the comparison table and traces are not built). INVALID_ARGUMENT for step < 1
// or an invalid job other than its length.
absl::StatusOr<LongestSequence> FindLongestSequence(const model::ModelDescription& model,
                                                    const topology::Topology& topology,
                                                    const topology::TopologyFacts& facts,
                                                    const JobShape& job, PlanOptions options,
                                                    int64_t step = 1024, int64_t max_seq = 0);

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_API_LONGEST_SEQUENCE_H_
