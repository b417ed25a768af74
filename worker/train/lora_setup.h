// What a LoRA run (TrainerOptions::adapter) starts from, for both executors (the standalone
// trainer and the pipeline workers): the adapted modules and the unit runners' LoraSpec, the
// adapter tensors' names and shapes, adapter_config.json's facts, and the adapters' initial state:
// the resume checkpoint's (with Adam moments), else a PEFT adapter directory's (init_dir), else
// PEFT's initialisation drawn from the run's seed: A ~ U(-1/sqrt(in), 1/sqrt(in)) (PyTorch's
// kaiming_uniform_ with a = sqrt(5), which PEFT's init_lora_weights=True uses), B = 0. Each A
// draws from its own generator seeded by (seed, tensor name) (checkpoint/model_init.h's
// TensorSeed), so a tensor's values do not depend on which process initialises it.
//
// Pure functions plus file reads.
#ifndef MOBIUS_WORKER_TRAIN_LORA_SETUP_H_
#define MOBIUS_WORKER_TRAIN_LORA_SETUP_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "common/run/trainer_options.h"
#include "worker/checkpoint/adapter_checkpoint.h"
#include "worker/model/adapter.h"
#include "worker/reference/parameters.h"

namespace mobius::train {

struct LoraRun {
  std::vector<std::string> targets;  // the options', or the family's PEFT default
  units::LoraSpec spec;              // modules, rank, scale = alpha / rank
  checkpoint::TensorShapes shapes;   // A and B per module, in module order
  checkpoint::AdapterInfo info;      // adapter_config.json's facts
};

// INVALID_ARGUMENT naming the flag for a target the family lacks or a rank out of range.
// REQUIRES: options.adapter.enabled().
absl::StatusOr<LoraRun> MakeLoraRun(const TrainerOptions& options,
                                    const model::ModelConfig& config);

struct AdapterStart {
  reference::Parameters master, adam_m, adam_v;  // fp32 by PEFT name; moments zero unless resumed
};

// `resume_directory`: the checkpoint the run resumes from (empty: none). `only` (nullptr: all):
// the adapter tensors wanted, by PEFT name: a pipeline rank fills its own stages' (a MoE with
// adapters on every expert has as many adapter parameters as a small model: 3.3B at rank 16 on
// Qwen3-235B-A22B, 40 GB of master and moments; a checkpoint or --lora_init is checked whole and
// read for those only).
absl::StatusOr<AdapterStart> LoadAdapterStart(const TrainerOptions& options, const LoraRun& lora,
                                              const std::string& resume_directory,
                                              const std::set<std::string>* only = nullptr);

}  // namespace mobius::train

#endif  // MOBIUS_WORKER_TRAIN_LORA_SETUP_H_
