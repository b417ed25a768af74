// From a job spec to what the daemon needs to admit and run it: the trainer options the workers
// get, the planner's plan on a set of GPUs, and the resource request the scheduler weighs.
//
// Pure apart from reading the model's config.json and the token file's header (epochs -> steps).
// Thread-safe.
#ifndef MOBIUS_HOST_RUN_JOB_PLANNING_H_
#define MOBIUS_HOST_RUN_JOB_PLANNING_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/jobspec/spec.h"
#include "common/model/model_config.h"
#include "host/scheduler/resources.h"
#include "host/planner/api/make_plan.h"
#include "host/topology/analysis.h"
#include "host/topology/topology.h"
#include "common/run/trainer_options.h"

namespace mobius::jobs {

// The trainer options of a spec (normalised: jobspec::Normalize; epochs become steps over the token file's train split; threads: 1
// per worker). `checkpoint_dir` replaces an empty spec.checkpoint.dir. A text dataset must be
// prepared into a token file (launch::PrepareDataset + WithTokenFile) before the options can run:
// until then data_path is the text file and, for epochs, steps is 0. The spec's adapter becomes
// options.adapter (init_from -> init_dir); its empty target_modules become the family's default
// (model::DefaultLoraTargets) when `model_config` is given, and stay empty (which means the same
// to the trainer) otherwise.
// INVALID_ARGUMENT (field path) for what the pipeline runtime cannot run.
absl::StatusOr<train::TrainerOptions> TrainerOptionsFromSpec(
    const jobspec::JobSpec& spec, const std::string& checkpoint_dir,
    const model::ModelConfig* model_config = nullptr);

// The spec's adapter as the trainer's options (empty type: none); target_modules as
// TrainerOptionsFromSpec fills them.
train::AdapterOptions AdapterOptionsFromSpec(const jobspec::JobSpec& spec,
                                             const model::ModelConfig* model_config = nullptr);

// The adapter's target_modules for `config`: the spec's, or the family's PEFT default when it
// names none. Empty when the spec has no adapter.
std::vector<std::string> AdapterTargets(const jobspec::JobSpec& spec,
                                        const model::ModelConfig& config);

// The spec's adapter against the model (model::ValidateLora): every target_modules name is a
// linear module of the family, and rank <= the smallest dimension of the adapted modules.
// INVALID_ARGUMENT naming adapter.target_modules[i] (with the family's names) or adapter.rank;
// OK without an adapter. PlanJob runs it: the first place every path (submit, plan, the
// supervisor, `mobius run`) has the model's config.
absl::Status CheckAdapterFitsModel(const jobspec::JobSpec& spec, const model::ModelConfig& config);

struct PlannedJob {
  planner::PlanReport report;
  JobRequest request;  // gpus, host/pinned/per-GPU bytes (job id, uid, priority left to the caller)
};

struct PlanJobOptions {
  // The workers emulate the GPUs on the CPU backend, whose device memory is host memory: the host
  // estimate (and so admission) includes it.
  bool devices_in_host_memory = false;
  // > 0: the host memory jobs may use (the daemon's budget, or what this machine has); else the
  // topology's NUMA memory.
  int64_t host_memory_bytes = 0;
  // A job asking for more GPUs (resources.gpus) than `allowed` has is planned on all of `allowed`
  // instead of failing: for jobs accepted before the node shrank (a daemon restart with fewer
  // GPUs); checkpoints do not depend on the GPU count, so such a job resumes on fewer.
  bool fit_to_node = false;
  // The model's config, as the job's user read it (the daemon's check child,
  // common/inspect/inspection.h); null: PlanJob reads spec.model_dir's config.json itself (`mobius
  // run`, which runs as the user). Not owned; must outlive the call.
  const model::ModelConfig* model_config = nullptr;
  // Several nodes (`mobius run` on a node of a multi-node job): internode.nodes > 1 plans this one
  // node, spec.training.global_batch being its share, with each stage's gradient all-reduce
  // across the nodes in the simulation (PlanOptions::internode).
  planner::sim::InterNodeConfig internode;
};

// Plans `spec` (normalised: jobspec::Normalize) on `gpus` (empty: the first spec.resources.gpus of
// `allowed`, all of them for 0). FAILED_PRECONDITION when the job asks for more GPUs than `allowed`
// has (unless fit_to_node) and from the planner when the job does not fit (with its numbers);
// INVALID_ARGUMENT when the spec's adapter does not fit the model (CheckAdapterFitsModel), before
// the planner runs.
absl::StatusOr<PlannedJob> PlanJob(const jobspec::JobSpec& spec,
                                   const topology::Topology& topology,
                                   const topology::TopologyFacts& facts,
                                   const std::vector<int>& allowed, std::vector<int> gpus,
                                   const PlanJobOptions& options = {});

}  // namespace mobius::jobs

#endif  // MOBIUS_HOST_RUN_JOB_PLANNING_H_
