#include "host/run/job_planning.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/model/lora.h"
#include "common/model/model_config_parse.h"
#include "common/run/unit_params.h"
#include "common/run/schedule.h"
#include "common/status_macros.h"
#include "common/data/loader.h"
#include "common/data/token_file.h"

namespace mobius::jobs {

std::vector<std::string> AdapterTargets(const jobspec::JobSpec& spec,
                                        const model::ModelConfig& config) {
  if (!spec.adapter.has_value()) return {};
  if (!spec.adapter->target_modules.empty()) return spec.adapter->target_modules;
  return model::DefaultLoraTargets(config);
}

train::AdapterOptions AdapterOptionsFromSpec(const jobspec::JobSpec& spec,
                                             const model::ModelConfig* model_config) {
  train::AdapterOptions o;
  if (!spec.adapter.has_value()) return o;
  const jobspec::AdapterSpec& a = *spec.adapter;
  o.type = a.type;
  o.rank = a.rank;
  o.alpha = a.alpha;
  o.dropout = a.dropout;
  o.target_modules =
      model_config != nullptr ? AdapterTargets(spec, *model_config) : a.target_modules;
  o.init_dir = a.init_from;
  o.base_quantization = a.base_quantization;
  return o;
}

absl::Status CheckAdapterFitsModel(const jobspec::JobSpec& spec, const model::ModelConfig& config) {
  if (!spec.adapter.has_value()) return absl::OkStatus();
  MOBIUS_RETURN_IF_ERROR(model::ValidateLora(config, spec.adapter->rank,
                                             AdapterTargets(spec, config), "adapter.rank",
                                             "adapter.target_modules"));
  if (spec.adapter->base_quantization == "nf4") {
    if (absl::StatusOr<std::vector<std::string>> w = units::Nf4BaseWeights(config); !w.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("adapter.base_quantization: ", w.status().message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<train::TrainerOptions> TrainerOptionsFromSpec(
    const jobspec::JobSpec& spec, const std::string& checkpoint_dir,
    const model::ModelConfig* model_config) {
  train::TrainerOptions o;
  const jobspec::TrainingSpec& t = spec.training;
  o.model_dir = spec.model_dir;
  o.data_path = spec.dataset.path;
  o.batch = t.global_batch;
  o.microbatch = t.microbatch;  // jobspec::Normalize: the global batch when the spec has none
  o.seq = t.seq_len;
  o.lr = t.lr;
  o.min_lr = t.min_lr;
  o.warmup = t.warmup_steps;
  o.schedule = t.lr_schedule;
  o.weight_decay = t.weight_decay;
  o.grad_clip = t.grad_clip;
  o.beta1 = t.beta1;
  o.beta2 = t.beta2;
  o.eps = t.eps;
  o.seed = t.seed;
  o.eval_fraction = spec.dataset.eval_fraction;
  o.eval_every = t.eval_every;
  o.optimizer_staleness = static_cast<int>(t.optimizer_staleness);
  o.precision = t.precision;
  o.checkpoint_dir = spec.checkpoint.dir.empty() ? checkpoint_dir : spec.checkpoint.dir;
  o.checkpoint_every = spec.checkpoint.every_steps;
  o.checkpoint_keep_last = spec.checkpoint.keep_last;
  o.checkpoint_group = spec.checkpoint.group;
  o.checkpoint_export = true;
  // Checkpoints carry the tokenizer, so they and their exports load as model and tokenizer.
  o.tokenizer_dir = jobspec::TokenizerPath(spec);
  o.device_memory_bytes = static_cast<uint64_t>(spec.resources.device_memory_bytes);
  o.threads = 1;
  o.adapter = AdapterOptionsFromSpec(spec, model_config);
  o.steps = t.steps;
  // A text dataset's step count for epochs is known once it is tokenized (launch/dataset_prep.h);
  // until then it is 0.
  if (t.epochs > 0 && !jobspec::IsTextFormat(spec.dataset.format)) {
    MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<data::TokenFile> file,
                            data::TokenFile::Open(spec.dataset.path));
    auto loader = data::TokenLoader::Create(
        std::shared_ptr<const data::TokenFile>(std::move(file)),
        {.seq_len = o.seq, .batch_size = o.batch, .seed = o.seed, .eval_fraction = o.eval_fraction});
    if (!loader.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("dataset.path: ", loader.status().message()));
    }
    const int64_t per_epoch = (*loader)->batches_per_epoch();
    if (per_epoch > 0 && t.epochs > train::kMaxSteps / per_epoch) {
      return absl::InvalidArgumentError(absl::StrCat(
          "training.epochs: ", t.epochs, " epochs of ", per_epoch, " steps exceed the ",
          train::kMaxSteps, " steps one run may have"));
    }
    o.steps = t.epochs * per_epoch;
  }
  return o;
}

absl::StatusOr<PlannedJob> PlanJob(const jobspec::JobSpec& spec,
                                   const topology::Topology& topology,
                                   const topology::TopologyFacts& facts,
                                   const std::vector<int>& allowed, std::vector<int> gpus,
                                   const PlanJobOptions& options) {
  if (gpus.empty()) {
    const size_t k = spec.resources.gpus > 0 ? static_cast<size_t>(spec.resources.gpus)
                                             : allowed.size();
    if (k > allowed.size() && options.fit_to_node && !allowed.empty()) {
      gpus = allowed;  // re-planned for the GPUs this node has (PlanJobOptions::fit_to_node)
    } else if (k > allowed.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "resources.gpus: the job asks for ", k, " GPUs, this node has ", allowed.size(),
          " usable"));
    }
    if (gpus.empty()) gpus.assign(allowed.begin(), allowed.begin() + k);
  }
  model::ModelConfig loaded;
  if (options.model_config == nullptr) {
    MOBIUS_ASSIGN_OR_RETURN(loaded, model::LoadModelConfig(spec.model_dir));
  }
  const model::ModelConfig& config =
      options.model_config != nullptr ? *options.model_config : loaded;
  MOBIUS_RETURN_IF_ERROR(CheckAdapterFitsModel(spec, config));
  MOBIUS_ASSIGN_OR_RETURN(model::ModelDescription desc, model::DescribeModel(config));
  planner::JobShape shape;
  shape.global_batch = spec.training.global_batch;
  shape.microbatch = spec.training.microbatch;  // normalised
  shape.seq_len = spec.training.seq_len;
  // fp16: GEMMs sum in fp16 where the GPU is faster so (the device spec's peak; the runtime asks
  // its backend the same, backend.h half_accumulate_faster).
  shape.dtype = spec.training.precision;
  shape.fp16_accumulate = spec.training.precision == "fp16";
  planner::PlanOptions po;
  // The spec's name, parsed here where it enters the planner (validation accepted it already).
  absl::StatusOr<runtime::Schedule> schedule = runtime::ParseSchedule(spec.plan.schedule);
  if (!schedule.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("plan.schedule: ", schedule.status().message()));
  }
  po.schedule = *schedule;
  po.partitioner = spec.plan.partitioner;
  po.mapper = spec.plan.mapper;
  po.optimizer_staleness = static_cast<int>(spec.training.optimizer_staleness);
  po.dispatch = spec.plan.dispatch;
  // LoRA: the frozen base, the adapters' state and traffic (docs/planner.md "LoRA").
  MOBIUS_ASSIGN_OR_RETURN(po.lora,
                          planner::LoraFromAdapterOptions(AdapterOptionsFromSpec(spec, &config)));
  // The runtime clips with the global norm: every stage's update waits for the whole backward.
  po.optimizer_after_backward = spec.training.grad_clip > 0;
  po.gpus = gpus;
  po.num_stages = spec.plan.stages;
  po.gpu_memory_bytes = spec.resources.device_memory_bytes;
  po.compare = false;
  po.devices_in_host_memory = options.devices_in_host_memory;
  po.host_memory_bytes = options.host_memory_bytes;
  po.mip_time_limit_seconds = 2;
  po.internode = options.internode;
  PlannedJob out;
  MOBIUS_ASSIGN_OR_RETURN(out.report, planner::MakePlan(desc, topology, facts, shape, po));
  const planner::MemoryEstimate& m = out.report.plan.memory;
  out.request.gpus = static_cast<int>(gpus.size());
  if (spec.resources.gpus == 0) out.request.gpus = 0;
  out.request.host_bytes = m.host_bytes;
  out.request.pinned_bytes = m.pinned_bytes;
  out.request.per_gpu_bytes = m.max_gpu_bytes;
  return out;
}

}  // namespace mobius::jobs
