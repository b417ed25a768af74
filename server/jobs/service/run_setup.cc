#include "server/jobs/service/run_setup.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model/model_config_parse.h"
#include "common/run/checkpoint_dirs.h"
#include "common/run/store_layout.h"
#include "common/status_macros.h"

namespace mobius::jobs {

uint64_t WorkerDeviceMemoryCap(const jobspec::JobSpec& spec, const planner::Plan& plan,
                               bool devices_in_host_memory) {
  const int64_t capacity = plan.memory.gpu_capacity_bytes;
  const int64_t cap = spec.resources.device_memory_bytes;
  if (devices_in_host_memory) return static_cast<uint64_t>(std::max<int64_t>(capacity, 0));
  if (cap <= 0) return 0;
  return static_cast<uint64_t>(capacity > 0 ? std::min(cap, capacity) : cap);
}

absl::StatusOr<RunSetup> SetUpRun(jobspec::JobSpec spec, const RunSetupOptions& o) {
  if (o.topology == nullptr || o.facts == nullptr) {
    return absl::InvalidArgumentError("SetUpRun: the node's topology is required");
  }
  if (o.gpus.empty()) return absl::InvalidArgumentError("SetUpRun: no GPUs granted");
  jobspec::Normalize(spec);
  RunSetup out;
  MOBIUS_ASSIGN_OR_RETURN(out.planned,
                          PlanJob(spec, *o.topology, *o.facts, o.allowed, o.gpus, o.plan));
  if (jobspec::IsTextFormat(spec.dataset.format)) {
    MOBIUS_ASSIGN_OR_RETURN(launch::PreparedDataset prepared,
                            launch::PrepareDataset(spec, o.dataset));
    spec = launch::WithTokenFile(std::move(spec), prepared.token_file);
    out.dataset = std::move(prepared);
  }
  MOBIUS_ASSIGN_OR_RETURN(train::TrainerOptions training,
                          TrainerOptionsFromSpec(spec, o.default_checkpoint_dir));
  if (o.resume) {
    if (absl::StatusOr<std::string> latest = checkpoint::LatestCheckpoint(training.checkpoint_dir);
        latest.ok()) {
      out.resume_from = *latest;
    }
  }
  training.resume = !out.resume_from.empty();
  training.device_memory_bytes =
      WorkerDeviceMemoryCap(spec, out.planned.report.plan, o.plan.devices_in_host_memory);
  MOBIUS_ASSIGN_OR_RETURN(out.run,
                          launch::BuildRunConfig(o.run_name, training, out.planned.report.plan,
                                                 *o.topology, *o.facts, o.emulation));
  out.run.backend = o.backend;
  out.run.transport = o.transport;
  if (absl::StatusOr<model::ModelConfig> mc = model::LoadModelConfig(spec.model_dir); mc.ok()) {
    runtime::RunConfig sized = out.run;
    if (sized.store_path.empty()) sized.store_path = "-";  // any non-empty value
    if (auto layout = runtime::MakeStoreLayout(*mc, sized); layout.ok()) {
      out.host_store_bytes = static_cast<int64_t>(layout->total_bytes);
    }
  }
  out.spec = std::move(spec);
  return out;
}

}  // namespace mobius::jobs
