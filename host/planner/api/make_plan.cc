#include "host/planner/api/make_plan.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/run/schedule.h"
#include "common/status_macros.h"
#include "host/planner/api/plan_context.h"
#include "host/planner/estimator.h"
#include "host/planner/measured_profile.h"
#include "host/planner/sim/simulator.h"

namespace mobius::planner {
namespace {

using internal::GiB;
using internal::PlanContext;

// Returns M = global batch / microbatch.
absl::StatusOr<int> ValidateJob(const model::ModelDescription& model, const JobShape& job) {
  if (job.global_batch < 1 || job.microbatch < 1 || job.seq_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch, microbatch and sequence length must be >= 1 (got batch ", job.global_batch,
        ", microbatch ", job.microbatch, ", seq ", job.seq_len, ")"));
  }
  if (job.global_batch % job.microbatch != 0) {
    const int64_t lo = job.global_batch / job.microbatch * job.microbatch;
    return absl::InvalidArgumentError(absl::StrCat(
        "global batch ", job.global_batch, " is not a multiple of the microbatch ", job.microbatch,
        "; use batch ", lo > 0 ? absl::StrCat(lo, " or ") : "", lo + job.microbatch,
        ", or a microbatch that divides ", job.global_batch));
  }
  const int64_t m = job.global_batch / job.microbatch;
  if (m > 1 << 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("global batch / microbatch = ", m, " microbatches per step (at most 65536)"));
  }
  if (job.seq_len > model.config.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sequence length ", job.seq_len, " exceeds the model's max_position_embeddings ",
        model.config.max_position_embeddings, "; use seq <= ",
        model.config.max_position_embeddings));
  }
  if (job.dtype != "bf16" && job.dtype != "fp16") {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype '", job.dtype, "' is not planned (bf16, fp16)"));
  }
  if (job.fp16_accumulate && job.dtype != "fp16") {
    return absl::InvalidArgumentError(absl::StrCat(
        "fp16 accumulation needs fp16 weights (dtype '", job.dtype, "'); use dtype fp16"));
  }
  return static_cast<int>(m);
}

absl::StatusOr<std::vector<int>> ResolveGpus(const topology::Topology& t,
                                             const PlanOptions& options) {
  const int n = static_cast<int>(t.gpus.size());
  if (n == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "topology (", t.source.empty() ? "unnamed" : t.source,
        ") has 0 NVIDIA GPUs; a GPU plan needs at least 1: plan against a GPU server's "
        "topology (--topology-file)"));
  }
  if (options.gpus.empty()) {
    std::vector<int> all(n);
    for (int g = 0; g < n; ++g) all[g] = g;
    return all;
  }
  std::set<int> seen;
  for (int g : options.gpus) {
    if (g < 0 || g >= n) {
      return absl::InvalidArgumentError(absl::StrCat("granted GPU ", g, " does not exist (the server has ",
                                                     n, " GPUs: 0..", n - 1, ")"));
    }
    if (!seen.insert(g).second) {
      return absl::InvalidArgumentError(absl::StrCat("GPU ", g, " granted twice"));
    }
  }
  return std::vector<int>(seen.begin(), seen.end());
}

// The slowest granted GPU's spec (the pipeline runs at its pace), unless overridden.
absl::StatusOr<DeviceSpec> ResolveDevice(const topology::Topology& t, const std::vector<int>& gpus,
                                         const PlanOptions& options) {
  DeviceSpec spec;
  if (options.device.has_value()) {
    spec = *options.device;
  } else {
    bool found = false;
    for (int g : gpus) {
      std::optional<DeviceSpec> s = DeviceSpecForGpuName(t.gpus[g].name, t.gpus[g].memory_bytes);
      if (!s.has_value() && options.profile.has_value()) {
        // A measured profile needs no peak FLOP/s; memory comes from the topology.
        DeviceSpec measured_only;
        measured_only.name = t.gpus[g].name;
        measured_only.memory_bytes = static_cast<int64_t>(t.gpus[g].memory_bytes);
        s = measured_only;
      }
      if (!s.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "no device spec for GPU ", g, " '", t.gpus[g].name,
            "' (known: RTX 3090, RTX 4090, RTX A6000, H100, H200); give its peak bf16 TFLOP/s "
            "(--peak-tflops)"));
      }
      if (!found || s->peak_flops_per_s < spec.peak_flops_per_s) spec = *s;
      found = true;
    }
  }
  if (!(options.efficiency > 0 && options.efficiency <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("efficiency must be in (0, 1] (got ", options.efficiency, ")"));
  }
  spec.efficiency = options.efficiency;
  return spec;
}

// A given (measured) profile must describe this model at this microbatch shape.
absl::Status CheckProfileFits(const Profile& p, const model::ModelDescription& model,
                              const JobShape& job) {
  if (static_cast<int64_t>(p.units.size()) != model.num_units()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", p.source, " profile has ", p.units.size(), " layer units but the model has ",
        model.num_units(), ": it was made for another model"));
  }
  if (p.shape.microbatch_size != job.microbatch || p.shape.seq_len != job.seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", p.source, " profile was measured at microbatch ", p.shape.microbatch_size,
        " x seq ", p.shape.seq_len, " but the job runs microbatch ", job.microbatch, " x seq ",
        job.seq_len, "; profile again at the job's shape"));
  }
  if (!p.precision.empty() && p.precision != job.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", p.source, " profile was measured in ", p.precision, " but the job trains in ",
        job.dtype, "; profile again with --precision ", job.dtype));
  }
  return absl::OkStatus();
}

absl::Status CheckChoices(const PlanOptions& o) {
  const sim::Schedule schedule = o.schedule;
  const char* name = runtime::ScheduleName(schedule);
  MOBIUS_ASSIGN_OR_RETURN(sim::Dispatch dispatch, sim::ParseDispatch(o.dispatch));
  const bool swapped = schedule == sim::Schedule::kMobius || schedule == sim::Schedule::kRoundRobin;
  if (o.optimizer_staleness != 0 && (o.optimizer_staleness != 1 || !swapped)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer staleness ", o.optimizer_staleness, " with schedule '", name,
        "': staleness is 0 or 1, and 1 only for mobius and roundrobin (the CPU optimizer)"));
  }
  if (o.lora.enabled() && o.optimizer_staleness != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer staleness ", o.optimizer_staleness,
        " with LoRA: the runtime keeps no second copy of the frozen base, so LoRA runs with "
        "staleness 0 (its optimizer, over the adapters alone, takes milliseconds)"));
  }
  if (o.lora.rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("lora.rank: must be >= 1, or 0 for full fine-tuning (got ", o.lora.rank, ")"));
  }
  if (dispatch == sim::Dispatch::kPool && schedule != sim::Schedule::kRoundRobin) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dispatch 'pool' needs schedule roundrobin (got '", name, "')"));
  }
  MOBIUS_RETURN_IF_ERROR(sim::ValidateInterNode(o.internode));
  if (o.internode.enabled() && !swapped) {
    return absl::InvalidArgumentError(absl::StrCat(
        "internode.nodes: ", o.internode.nodes, " nodes are planned for the mobius and roundrobin "
        "schedules (a CPU optimizer step per stage waits for its all-reduce), not '", name,
        "'"));
  }
  if (o.simulated_steps < 0 || o.simulated_steps > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("simulated steps must be in [0, 16] (got ", o.simulated_steps, ")"));
  }
  if (o.partitioner != "exact" && o.partitioner != "mip" && o.partitioner != "uniform") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown partitioner '", o.partitioner, "' (exact, mip, uniform)"));
  }
  if (o.mapper != "cross" && o.mapper != "sequential") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown mapper '", o.mapper, "' (cross, sequential)"));
  }
  if (o.partitioner == "mip" && !MipAvailable()) {
    return absl::FailedPreconditionError(
        "partitioner 'mip': mip not available in this build (COIN-OR CBC was not found); use "
        "--partitioner exact (same optimum)");
  }
  return absl::OkStatus();
}

absl::StatusOr<PlanContext> MakeContext(const model::ModelDescription& model,
                                        const topology::Topology& topology,
                                        const topology::TopologyFacts& facts, const JobShape& job,
                                        const PlanOptions& options) {
  PlanContext ctx;
  ctx.model = &model;
  ctx.topology = &topology;
  ctx.facts = &facts;
  ctx.job = job;
  ctx.options = options;
  MOBIUS_RETURN_IF_ERROR(CheckChoices(options));
  MOBIUS_ASSIGN_OR_RETURN(ctx.num_microbatches, ValidateJob(model, job));
  const runtime::ScheduleTraits* traits = &runtime::Traits(options.schedule);
  if (job.dtype == "fp16" && options.cost.memory_model == MemoryModel::kRuntime &&
      traits != nullptr && !traits->optimizer_on_host) {
    return absl::InvalidArgumentError(
        "dtype fp16 with schedule 'resident': the runtime's resident schedule trains in bf16 "
        "(its GPU optimizer has no loss scaler); use mobius or roundrobin");
  }
  if (options.lora.enabled() && options.cost.memory_model == MemoryModel::kRuntime &&
      traits != nullptr && !traits->trains_adapters) {
    return absl::InvalidArgumentError(
        "LoRA with schedule 'resident': the runtime's resident schedule does not train adapters "
        "yet; use mobius or roundrobin");
  }
  MOBIUS_ASSIGN_OR_RETURN(ctx.gpus, ResolveGpus(topology, options));
  MOBIUS_ASSIGN_OR_RETURN(ctx.device, ResolveDevice(topology, ctx.gpus, options));
  std::optional<LoraLayout> lora;
  if (options.lora.enabled()) {
    MOBIUS_ASSIGN_OR_RETURN(lora, MakeLoraLayout(model, options.lora));
  }
  if (options.profile.has_value()) {
    MOBIUS_RETURN_IF_ERROR(CheckProfileFits(*options.profile, model, job));
    ctx.profile = *options.profile;
    // A measured profile is a full fine-tuning one (the worker profiles trainable units).
    if (lora && !ctx.profile.lora) ctx.profile = LoraFromMeasuredProfile(ctx.profile, model, *lora);
  } else {
    AnalyticOptions ao;
    ao.gradient_bytes_per_parameter = options.gradient_bytes_per_parameter;
    ao.fp16_accumulate = job.fp16_accumulate;
    ao.use_kernel_model = options.use_kernel_model;
    ao.lora = lora;
    ao.memory_model = options.cost.memory_model;
    // Our runtime (MemoryModel::kRuntime) recomputes a block without its MLP output projection;
    // the published systems' setups (kTwoSlot) model systems that recompute the whole forward.
    ao.recompute_skips_mlp_output = options.cost.memory_model == MemoryModel::kRuntime;
    // Our runtime's fp16 mode sums in fp16 only into fp16 outputs (the forward's GEMMs).
    ao.fp16_accumulate_fp32_outputs = options.cost.memory_model != MemoryModel::kRuntime;
    // ... and its fp16 full fine-tuning writes the blocks' backward GEMMs in fp16 too.
    ao.half_backward = options.cost.memory_model == MemoryModel::kRuntime && job.dtype == "fp16" &&
                       !lora.has_value();
    ao.activations.logits_bytes =
        options.logits_bytes >= 0 ? options.logits_bytes : (ao.half_backward ? 2 : 4);
    MOBIUS_ASSIGN_OR_RETURN(ctx.profile,
                            AnalyticProfile(model, {job.microbatch, job.seq_len}, ctx.device, ao));
  }
  CostOptions cost = options.cost;
  if (options.host.has_value()) {
    cost.optimizer_seconds_per_billion_params = options.host->OptimizerSeconds(1'000'000'000);
  }
  MOBIUS_ASSIGN_OR_RETURN(
      ctx.problem, MakePartitionProblem(ctx.profile, model, topology, facts, ctx.gpus,
                                        ctx.num_microbatches, ctx.device.memory_bytes, cost));
  if (options.gpu_memory_bytes > 0) {
    ctx.problem.gpu_memory_bytes = std::min(ctx.problem.gpu_memory_bytes, options.gpu_memory_bytes);
  }
  sim::MachineOptions mo;
  mo.dma_efficiency = options.cost.dma_efficiency;
  mo.duplex_factor =
      options.duplex_factor > 0 ? options.duplex_factor : ctx.device.host_link_duplex_factor;
  if (options.host.has_value()) {
    mo.host_memory_bytes_per_s = options.host->memory_bytes_per_s;
    mo.optimizer_bytes_per_s = options.host->OptimizerThreadBytesPerSecond();
    mo.optimizer_bytes_per_param = options.host->optimizer_bytes_per_param;
  }
  MOBIUS_ASSIGN_OR_RETURN(ctx.machine, sim::MakeMachine(topology, facts, ctx.gpus, mo));
  MOBIUS_RETURN_IF_ERROR(CheckEveryUnitFits(ctx.problem));
  return ctx;
}

int64_t HostMemoryAvailable(const topology::Topology& t, const PlanOptions& o) {
  if (o.host_memory_bytes > 0) return o.host_memory_bytes;
  int64_t sum = 0;
  for (const topology::NumaNode& n : t.numa_nodes) sum += static_cast<int64_t>(n.memory_bytes);
  return sum;
}

std::string HostMemorySource(const topology::Topology& t, const PlanOptions* o) {
  if (o != nullptr && o->host_memory_bytes > 0) return "";
  return absl::StrCat(" (the topology's ", t.numa_nodes.size(), " NUMA nodes)");
}

absl::Status CheckHostMemory(const PlanContext& ctx, const MemoryEstimate& m, int64_t available) {
  if (available <= 0 || m.host_bytes <= available) return absl::OkStatus();
  const int64_t params = model::TotalParameters(*ctx.model);
  // The checkpoints and the activation gradients scale with the batch: the largest global batch
  // whose activations still fit beside the model state, the processes and emulated devices.
  const int64_t per_microbatch =
      (m.host_activation_bytes + m.host_activation_grad_bytes) / ctx.num_microbatches;
  const int64_t spare =
      available - m.host_model_state_bytes - m.host_process_bytes - m.host_emulated_device_bytes;
  std::string fix = "a server with more RAM or a smaller model";
  if (spare > 0 && per_microbatch > 0) {
    fix = absl::StrCat("a global batch <= ", spare / per_microbatch * ctx.job.microbatch,
                       " sequences, a shorter sequence, ", fix);
  }
  const int64_t per_param = m.host_model_state_bytes / std::max<int64_t>(params, 1);
  const std::string state =
      ctx.profile.lora
          ? absl::StrCat(ctx.profile.lora->base_nf4
                             ? std::string("NF4 base (its linears 4-bit, the rest bf16)")
                             : absl::StrCat("bf16 base 2 bytes x ", params, " parameters"),
                         " + LoRA adapters ", ctx.profile.lora->parameters,
                         " parameters x 16 bytes")
          : absl::StrCat(per_param, " bytes x ", params, " parameters");
  if (!ctx.profile.lora) fix += ", or LoRA (the frozen base at 2 bytes/parameter)";
  if (ctx.profile.lora && !ctx.profile.lora->base_nf4) {
    fix += ", or an NF4 base (adapter.base_quantization: nf4, mobius plan --lora-base nf4)";
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "host RAM too small: the plan needs ", GiB(m.host_bytes), " (model state ",
      GiB(m.host_model_state_bytes), " = ", state, " + activation checkpoints ",
      GiB(m.host_activation_bytes), " + activation gradients ", GiB(m.host_activation_grad_bytes),
      " + worker processes ", GiB(m.host_process_bytes),
      m.host_emulated_device_bytes > 0
          ? absl::StrCat(" + emulated GPU memory ", GiB(m.host_emulated_device_bytes))
          : "",
      ") but ", GiB(available), " is available", HostMemorySource(*ctx.topology, &ctx.options),
      "; to fit: ", fix,
      m.host_emulated_device_bytes > 0
          ? " (emulated GPUs: a smaller resources.device_memory_bytes makes smaller stages)"
          : ""));
}

void FillPlacements(const PlanContext& ctx, PlanReport& r) {
  const Mapping& map = r.plan.mapping;
  const int n = static_cast<int>(map.gpu_order.size());
  for (int i = 0; i < n; ++i) {
    const int g = map.gpu_order[i];
    const topology::GpuFacts& f = ctx.facts->gpus[g];
    GpuPlacement p;
    p.gpu = g;
    p.name = ctx.topology->gpus[g].name;
    p.root_complex = f.root_complex;
    p.package = f.package;
    p.numa_node = f.numa_node;
    p.contention_group = f.contention_group;
    if (r.plan.round_robin) {
      for (int j = i; j < r.plan.num_passes(); j += n) {
        const PassRef pass = r.plan.PassAt(j);
        (pass.backward ? p.backward_stages : p.stages).push_back(pass.stage);
      }
    } else {
      for (int s = i; s < r.plan.num_stages(); s += n) p.stages.push_back(s);
    }
    if (i < static_cast<int>(r.plan.memory.gpu_bytes.size())) p.memory_bytes = r.plan.memory.gpu_bytes[i];
    r.placements.push_back(std::move(p));
  }
}

void FillSimulation(const PlanContext& ctx, const sim::SimResult& sr, PlanReport& r) {
  r.step_seconds = sr.step_seconds;
  r.plan.predicted_step_seconds = sr.step_seconds;
  r.tokens_per_second = internal::TokensPerSecond(ctx, sr.step_seconds);
  r.bubble_fraction = sr.bubble_fraction;
  r.h2d_bytes = sr.h2d_bytes;
  r.d2h_bytes = sr.d2h_bytes;
  r.p2p_bytes = sr.p2p_bytes;
  r.weight_upload_bytes = sr.weight_upload_bytes;
  for (const sim::LinkStats& l : sr.links) {
    r.links.push_back({l.name, l.bytes_per_s, l.bytes, l.busy_seconds});
  }
  if (ctx.options.trace) r.chrome_trace_json = sim::ChromeTraceJson(ctx.machine, sr);
}

// Several nodes: the all-reduces of the simulated step `sr`, and the same plan without them
// (`alone`: internode.nodes = 1).
void FillInterNode(const PlanContext& ctx, const std::vector<sim::SimStage>& stages,
                   const sim::SimResult& sr, const sim::SimResult& alone, PlanReport& r) {
  InterNodeReport& in = r.internode;
  const sim::InterNodeConfig& c = ctx.options.internode;
  in.nodes = c.nodes;
  in.link = c.link;
  in.bucket_bytes = c.bucket_bytes;
  in.allreduce_bytes = sr.allreduce_bytes;
  in.allreduce_seconds = sr.allreduce_seconds;
  for (size_t s = 0; s < stages.size() && s < sr.stages.size(); ++s) {
    const sim::StageTiming& t = sr.stages[s];
    StageAllReduce a;
    a.stage = static_cast<int>(s);
    a.bytes = stages[s].gradient_bytes;
    a.seconds = sim::StageAllReduceSeconds(a.bytes, c);
    a.backward_end = t.backward_end;
    a.start = t.allreduce_start;
    a.end = t.allreduce_end;
    a.optimizer_end = t.optimizer_end;
    in.sent_bytes += sim::RingAllReduceSentBytes(a.bytes, c.nodes);
    in.stages.push_back(a);
  }
  in.step_without_allreduce_seconds = alone.step_seconds;
  in.exposed_seconds = sr.step_seconds - alone.step_seconds;
}

}  // namespace

bool MipAvailable() {
#ifdef MOBIUS_HAVE_MIP
  return true;
#else
  return false;
#endif
}

absl::StatusOr<PlanReport> MakePlan(const model::ModelDescription& model,
                                    const topology::Topology& topology,
                                    const topology::TopologyFacts& facts, const JobShape& job,
                                    const PlanOptions& requested) {
  PlanOptions options = requested;
  if (options.devices_in_host_memory) {
    // An emulated GPU has no CUDA context or allocator slack to keep free.
    options.cost.memory_margin_bytes =
        std::min(options.cost.memory_margin_bytes, kEmulatedMemoryMarginBytes);
  }
  MOBIUS_ASSIGN_OR_RETURN(PlanContext ctx, MakeContext(model, topology, facts, job, options));
  const sim::Schedule schedule = options.schedule;

  // The partitioner's and mapper's choice (also the base of the comparison table).
  MOBIUS_ASSIGN_OR_RETURN(internal::PartitionOutcome base,
                          internal::RunPartitioner(ctx, options.partitioner));
  PlanReport r;
  r.partitioner_note = base.note;
  Plan& plan = r.plan;
  plan.shape = {job.microbatch, job.seq_len};
  plan.num_microbatches = ctx.num_microbatches;
  plan.partitioner = options.partitioner;
  plan.mapper = options.mapper;
  plan.schedule = options.schedule;
  plan.partition = base.partition;
  if (options.num_stages > 0 && runtime::Traits(schedule).takes_stage_count) {
    MOBIUS_ASSIGN_OR_RETURN(plan.partition, UniformPartition(ctx.problem, options.num_stages));
    plan.partitioner = "uniform";
  }
  if (runtime::Traits(schedule).separate_pass_partitions) {
    MOBIUS_ASSIGN_OR_RETURN(plan.round_robin, internal::RunRoundRobinPartitioner(
                                                  ctx, options.partitioner, plan.partition));
    plan.partition = plan.round_robin->forward;
  }
  if (schedule == sim::Schedule::kResident) {
    MOBIUS_ASSIGN_OR_RETURN(plan.partition, internal::ResidentPartition(ctx));
    plan.partitioner = "uniform";
  } else if (schedule == sim::Schedule::kZeroOffload) {
    plan.partition = internal::UnitPartition(ctx);
    plan.partitioner = "per-unit";
  }
  MOBIUS_ASSIGN_OR_RETURN(
      plan.mapping, internal::RunMapper(ctx, options.mapper,
                                        plan.round_robin ? plan.num_passes() : plan.num_stages()));
  if (schedule == sim::Schedule::kZeroOffload) {
    plan.mapper = "data-parallel";
    plan.mapping.method = "data-parallel";
  }
  EstimatorOptions eo;
  eo.devices_in_host_memory = options.devices_in_host_memory;
  eo.stale_weight_copy_bytes_per_parameter = options.optimizer_staleness == 1 ? 2 : 0;
  eo.checkpoint_copies = options.optimizer_staleness == 1 ? 2 : 1;
  eo.memory_margin_bytes = options.cost.memory_margin_bytes;
  const int num_gpus = static_cast<int>(plan.mapping.gpu_order.size());
  eo.every_pass_on_every_gpu =
      plan.round_robin && num_gpus > 1 &&
      (options.dispatch == "pool" || plan.num_passes() % num_gpus != 0);
  plan.memory = plan.round_robin
                    ? EstimateRoundRobinMemory(model, ctx.profile, ctx.problem, plan, eo)
                    : EstimateMemory(model, ctx.profile, ctx.problem, plan.partition, plan.mapping,
                                     ctx.num_microbatches, eo);
  r.host_memory_available_bytes = HostMemoryAvailable(topology, options);
  // The runtime fills the host store before a resident rank loads its stage, so its plans need
  // the host memory too; the published systems' resident rows keep the model on the GPUs.
  if (schedule != sim::Schedule::kResident ||
      options.cost.memory_model == MemoryModel::kRuntime) {
    MOBIUS_RETURN_IF_ERROR(CheckHostMemory(ctx, plan.memory, r.host_memory_available_bytes));
  }
  if (options.cost.memory_model == MemoryModel::kRuntime &&
      (schedule == sim::Schedule::kMobius || schedule == sim::Schedule::kRoundRobin)) {
    MOBIUS_RETURN_IF_ERROR(internal::CheckGpuMemory(ctx, plan));
  }

  MOBIUS_ASSIGN_OR_RETURN(sim::SimResult sr, internal::SimulateSchedule(
                                                 ctx, schedule, plan.partition, plan.mapping,
                                                 plan.round_robin ? &*plan.round_robin : nullptr));
  r.device = ctx.profile.device;
  r.profile_source = ctx.profile.source;
  r.gradient_bytes_per_parameter = ctx.profile.gradient_bytes_per_parameter;
  r.parameters = model::TotalParameters(model);
  if (ctx.profile.lora) {
    r.lora_rank = ctx.profile.lora->rank;
    r.lora_targets = ctx.profile.lora->target_modules;
    r.adapter_parameters = ctx.profile.lora->parameters;
    r.lora_base_nf4 = ctx.profile.lora->base_nf4;
  }
  r.num_gpus = static_cast<int>(ctx.gpus.size());
  r.objective_seconds =
      plan.round_robin ? plan.round_robin->objective_seconds : plan.partition.objective_seconds;
  for (const StageRange& s : plan.partition.stages) {
    r.stage_parameter_bytes.push_back(ctx.profile.ParameterBytes(s.begin, s.end));
  }
  if (plan.round_robin) {
    for (const StageRange& s : plan.round_robin->backward.stages) {
      r.backward_stage_parameter_bytes.push_back(ctx.profile.ParameterBytes(s.begin, s.end));
    }
  }
  FillPlacements(ctx, r);
  FillSimulation(ctx, sr, r);
  if (options.internode.enabled()) {
    internal::PlanContext alone_ctx = ctx;
    alone_ctx.options.internode = {};
    MOBIUS_ASSIGN_OR_RETURN(
        sim::SimResult alone,
        internal::SimulateSchedule(alone_ctx, schedule, plan.partition, plan.mapping,
                                   plan.round_robin ? &*plan.round_robin : nullptr));
    // The stages whose gradients are reduced: roundrobin's backward partition, else the plan's.
    const Partition& grads = plan.round_robin ? plan.round_robin->backward : plan.partition;
    FillInterNode(ctx, sim::MakeSimStages(ctx.problem, grads), sr, alone, r);
  }
  if (options.compare) {
    MOBIUS_ASSIGN_OR_RETURN(r.alternatives, internal::CompareAlternatives(ctx, base));
  }
  return r;
}

absl::StatusOr<LoraOptions> LoraFromAdapterOptions(const train::AdapterOptions& adapter) {
  LoraOptions o;
  if (!adapter.enabled()) return o;
  if (adapter.type != "lora") {
    return absl::InvalidArgumentError(absl::StrCat(
        "adapter.type: '", adapter.type, "' is not planned (lora, or none for full fine-tuning)"));
  }
  o.rank = adapter.rank;
  o.target_modules = adapter.target_modules;
  o.base_nf4 = adapter.base_nf4();
  if (o.rank < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("adapter.rank: must be >= 1 (got ", adapter.rank, ")"));
  }
  return o;
}

namespace internal {

// Each stage fits on its own (the partitioners' rule), but a worker sizes its two slots for the
// largest W + G among its passes and its activation buffers for its longest stage (pipeline_worker.cc):
// those maxima can come from different stages.
absl::Status CheckGpuMemory(const PlanContext& ctx, const Plan& plan) {
  const MemoryEstimate& m = plan.memory;
  if (m.max_gpu_bytes <= m.gpu_capacity_bytes) return absl::OkStatus();
  size_t worst = 0;
  for (size_t i = 0; i < m.gpu_bytes.size(); ++i) {
    if (m.gpu_bytes[i] > m.gpu_bytes[worst]) worst = i;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "GPU memory too small: GPU position ", worst, " needs ", GiB(m.max_gpu_bytes),
      " (reserved ", GiB(ctx.problem.reserved_bytes),
      " + two slots for its largest stage's weights and gradients + the inputs of its longest "
      "stage's units, at microbatch ", ctx.job.microbatch, ") but has ",
      GiB(m.gpu_capacity_bytes), "; a smaller microbatch or more stages fit"));
}

double TokensPerSecond(const PlanContext& ctx, double step_seconds) {
  return step_seconds > 0
             ? static_cast<double>(ctx.job.global_batch * ctx.job.seq_len) / step_seconds
             : 0;
}

std::string GiB(int64_t bytes) {
  return absl::StrFormat("%.2f GiB", static_cast<double>(bytes) / (int64_t{1} << 30));
}

}  // namespace internal
}  // namespace mobius::planner
