// From a job spec to what the workers are launched with: the one path both the daemon's supervisor
// and `mobius run` take (spec, node, granted GPUs) -> (plan, trainer options, run config).
//
// In order: check the job's files (RunSetupOptions::inspect: the daemon runs the checks as the
// job's user, common/inspect/inspection.h; this process reads none of the spec's paths then), plan
// on the granted GPUs (PlanJob; fails before any tokenizing when the job does not fit, or its
// adapter does not fit the model), prepare a text dataset into a cached token file
// (launch::PrepareDataset), derive the trainer options (TrainerOptionsFromSpec: epochs become
// steps over the token file; the adapter's default targets from the model's family), decide on
// resuming (the newest complete checkpoint of the checkpoint directory, when `resume`), and build
// the run config (launch::BuildRunConfig). Defaults are the spec's, applied once by
// jobspec::Normalize, which SetUpRun calls.
//
// The device memory cap is the planner's: the workers get the plan's per-GPU capacity when their
// GPUs are emulated on the CPU backend (whose device memory is otherwise all of host RAM), and the
// spec's cap clipped to the plan's capacity on real GPUs (0 when the spec has none: the CUDA
// backend then takes the device's free memory less its reserve, which the plan's margin covers).
//
// Thread-safe; blocks while a dataset is tokenized (DatasetPrepOptions::interrupted stops it).
#ifndef MOBIUS_HOST_RUN_RUN_SETUP_H_
#define MOBIUS_HOST_RUN_RUN_SETUP_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/inspect/inspection.h"
#include "common/jobspec/spec.h"
#include "common/run/run_config.h"
#include "host/run/job_planning.h"
#include "host/launch/dataset_prep.h"
#include "host/launch/run_builder.h"
#include "host/topology/analysis.h"
#include "host/topology/topology.h"

namespace mobius::jobs {

struct RunSetupOptions {
  const topology::Topology* topology = nullptr;  // required; must outlive the call
  const topology::TopologyFacts* facts = nullptr;
  std::vector<int> allowed;  // the GPUs this node lets jobs use
  std::vector<int> gpus;     // the GPUs granted to this run (required, a subset of `allowed`)
  PlanJobOptions plan;       // host memory budget, emulated devices
  std::string run_name;      // the run config's job id (the daemon's job id, or the spec's name)
  std::string default_checkpoint_dir;  // when the spec names none
  bool resume = true;  // continue from the newest complete checkpoint when there is one
  launch::EmulationOptions emulation;
  std::string backend = "auto";  // RunConfig::backend / transport (validated by the launcher)
  std::string transport = "auto";
  launch::DatasetPrepOptions dataset;  // for text datasets
  // Runs the file checks (twice: the spec before planning, the run config before launching);
  // null: inspect::Inspect in this process (`mobius run`, which is the user).
  std::function<absl::StatusOr<inspect::InspectResult>(const inspect::InspectRequest&)> inspect;
};

struct RunSetup {
  jobspec::JobSpec spec;  // normalised; a text dataset replaced by its token file
  PlannedJob planned;
  runtime::RunConfig run;  // run.training: the trainer options the workers get
  std::string resume_from;  // the checkpoint directory resumed from; empty: a fresh start
  std::optional<launch::PreparedDataset> dataset;  // for a text dataset
  int64_t host_store_bytes = 0;  // the shared store's size (admission and metrics)
  model::ModelConfig model_config;  // as the checks read it
  // The run config passed the launch checks (LaunchOptions::validated).
  bool validated = false;
};

// Errors are those of the steps, unchanged (the planner's FAILED_PRECONDITION with its numbers,
// INVALID_ARGUMENT naming the spec field, the tokenizer's). Until issue 19's LoRA engine lands, a
// spec with an adapter that fits its model is FAILED_PRECONDITION "adapter: LoRA training is not
// available in this build yet" after planning (run_setup.cc, the one marked block).
absl::StatusOr<RunSetup> SetUpRun(jobspec::JobSpec spec, const RunSetupOptions& options);

// The device memory cap the workers get for a plan (see the header comment).
uint64_t WorkerDeviceMemoryCap(const jobspec::JobSpec& spec, const planner::Plan& plan,
                               bool devices_in_host_memory);

}  // namespace mobius::jobs

#endif  // MOBIUS_HOST_RUN_RUN_SETUP_H_
