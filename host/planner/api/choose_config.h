// The fastest configuration the runtime executes, chosen by simulation (issue 31, "the planner
// chooses by default"): a job that pins nothing gets the schedule, roundrobin's dispatch, the
// optimizer's staleness and the microbatch size whose simulated step is shortest on that
// hardware, and is told what the runner-up gives. What the caller pins stays pinned.
//
// Candidates (ConfigSpace; an empty dimension is free):
//   schedule     mobius, roundrobin, resident (zero is a model of DeepSpeed, not ours to run)
//   dispatch     static; pool only where asked for (ConfigSpace::dispatches): on the emulated
//                paper testbed pool dispatch measured 1.31-1.45x its simulated step, static
//                within 1.10 (docs/benchmarks.md, "Pool dispatch: claims measured"), so the
//                planner does not stake a default on it
//   staleness    0 or 1 (mobius and roundrobin; LoRA and resident: 0)
//   microbatch   the divisors of the global batch whose microbatch has 1024..32768 tokens (the
//                smallest divisor when none does)
//   precision    bf16, fp16 (training.precision; fp16 sums in fp16 where the GPU is faster so,
//                JobShape::fp16_accumulate). On a tie (GPUs without a faster fp16 mode) bf16,
//                listed first, wins: it needs no loss scaling.
// Each is planned by MakePlan (comparison table off); combinations MakePlan refuses as invalid
// are skipped, those that do not fit (FAILED_PRECONDITION) are listed with the reason. The winner
// is planned again with the caller's options (its table, its trace).
//
// Pure; thread-safe (candidates are planned on up to `threads` threads).
#ifndef MOBIUS_HOST_PLANNER_API_CHOOSE_CONFIG_H_
#define MOBIUS_HOST_PLANNER_API_CHOOSE_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/layer_units.h"
#include "host/planner/api/make_plan.h"
#include "host/topology/analysis.h"

namespace mobius::planner {

struct ConfigSpace {
  std::vector<runtime::Schedule> schedules;
  std::vector<std::string> dispatches;
  std::vector<int> staleness;
  std::vector<int64_t> microbatches;
  std::vector<std::string> precisions;
};

struct ConfigCandidate {
  runtime::Schedule schedule = runtime::Schedule::kMobius;
  std::string dispatch;
  int optimizer_staleness = 0;
  int64_t microbatch = 0;
  std::string precision = "bf16";
  bool planned = false;        // false: `refusal` says why it does not fit
  double step_seconds = 0;
  double tokens_per_second = 0;
  std::string refusal;
  std::string Label() const;   // "roundrobin, pool, staleness 1, microbatch 2, fp16"
};

struct ConfigChoice {
  JobShape job;          // the winner's (its microbatch)
  PlanOptions options;   // the winner's (schedule, dispatch, staleness) on the caller's options
  PlanReport report;     // MakePlan of the winner with the caller's compare/trace
  // Every candidate, the planned ones fastest first, then the refused ones.
  std::vector<ConfigCandidate> candidates;
};

// The microbatch candidates of ConfigSpace's default for a global batch and sequence length.
std::vector<int64_t> DefaultMicrobatches(int64_t global_batch, int64_t seq_len);

// FAILED_PRECONDITION (the first candidate's reason) when no candidate fits; INVALID_ARGUMENT for
// a job or options MakePlan rejects whatever the configuration (a bad model, GPU list, ...).
absl::StatusOr<ConfigChoice> ChooseConfiguration(const model::ModelDescription& model,
                                                 const topology::Topology& topology,
                                                 const topology::TopologyFacts& facts,
                                                 const JobShape& job, const PlanOptions& options,
                                                 const ConfigSpace& space, int threads = 2);

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_API_CHOOSE_CONFIG_H_
