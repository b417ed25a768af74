#include "host/run/run_setup.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model/model_config_parse.h"
#include "common/jobspec/json.h"
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
  auto check = [&](const inspect::InspectRequest& r) -> absl::StatusOr<inspect::InspectResult> {
    absl::StatusOr<inspect::InspectResult> result =
        o.inspect ? o.inspect(r) : inspect::Inspect(r);
    if (!result.ok()) return result.status();
    if (!result->status.ok()) return result->status;
    return result;
  };
  inspect::InspectRequest request;
  request.spec_json = jobspec::JobSpecToJson(spec);
  request.job_id = o.run_name;
  request.checkpoint_dir =
      spec.checkpoint.dir.empty() ? o.default_checkpoint_dir : spec.checkpoint.dir;
  request.dataset_cache_dir = o.dataset.cache_dir;
  MOBIUS_ASSIGN_OR_RETURN(inspect::InspectResult files, check(request));
  MOBIUS_ASSIGN_OR_RETURN(out.model_config,
                          model::ParseModelConfig(files.model_config_json,
                                                  spec.model_dir + "/config.json"));
  PlanJobOptions plan_options = o.plan;
  plan_options.model_config = &out.model_config;
  MOBIUS_ASSIGN_OR_RETURN(out.planned,
                          PlanJob(spec, *o.topology, *o.facts, o.allowed, o.gpus, plan_options));
  if (jobspec::IsTextFormat(spec.dataset.format)) {
    launch::DatasetPrepOptions dataset = o.dataset;
    dataset.descriptor = files.dataset_descriptor;
    dataset.cached_token_file = files.cached_token_file;
    MOBIUS_ASSIGN_OR_RETURN(launch::PreparedDataset prepared,
                            launch::PrepareDataset(spec, dataset));
    spec = launch::WithTokenFile(std::move(spec), prepared.token_file);
    out.dataset = std::move(prepared);
  }
  MOBIUS_ASSIGN_OR_RETURN(train::TrainerOptions training,
                          TrainerOptionsFromSpec(spec, o.default_checkpoint_dir,
                                                 &out.model_config));
  if (o.resume) out.resume_from = files.latest_checkpoint;  // the job's own (checkpoint_owner.h)
  training.resume = !out.resume_from.empty();
  training.device_memory_bytes =
      WorkerDeviceMemoryCap(spec, out.planned.report.plan, o.plan.devices_in_host_memory);
  MOBIUS_ASSIGN_OR_RETURN(out.run,
                          launch::BuildRunConfig(o.run_name, training, out.planned.report.plan,
                                                 *o.topology, *o.facts, o.emulation));
  out.run.backend = o.backend;
  out.run.transport = o.transport;
  if (runtime::Traits(out.run.schedule).separate_pass_partitions) {
    out.run.dispatch = spec.plan.dispatch;
  }
  runtime::RunConfig sized = out.run;
  if (sized.store_path.empty()) sized.store_path = "-";  // any non-empty value
  if (auto layout = runtime::MakeStoreLayout(out.model_config, sized); layout.ok()) {
    out.host_store_bytes = static_cast<int64_t>(layout->total_bytes);
  }
  // The launch checks on the final run config (the token file exists now), as the user.
  inspect::InspectRequest launch_request = request;
  launch_request.spec_json = jobspec::JobSpecToJson(spec);
  launch_request.dataset_cache_dir.clear();
  launch_request.run_config_json = runtime::RunConfigToJson(out.run);
  MOBIUS_RETURN_IF_ERROR(check(launch_request).status());
  out.validated = true;
  out.spec = std::move(spec);
  return out;
}

}  // namespace mobius::jobs
