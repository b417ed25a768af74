#include "client/plan_command.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/daemon_client.h"
#include "client/exit_codes.h"
#include "client/flags.h"
#include "client/plan_command_internal.h"
#include "common/run/schedule.h"
#include "common/jobspec/yaml.h"
#include "common/model/model_config_parse.h"
#include "nlohmann/json.hpp"
#include "host/run/job_planning.h"
#include "host/planner/api/choose_config.h"
#include "host/planner/api/longest_sequence.h"
#include "host/planner/api/make_plan.h"
#include "host/planner/measured_profile.h"
#include "common/run/profile_cache.h"
#include "common/run/profile_runner.h"
#include "host/topology/topology_convert.h"
#include "host/topology/analysis.h"
#include "host/topology/hwloc_source.h"

// `mobius plan`'s profile flags. They live here rather than in client/flags.cc so that the plan
// command owns them; PlanCommandOptions reads them as its defaults (--worker_binary, which
// `mobius export` shares, is client/flags.cc's).
ABSL_FLAG(std::string, profile, "analytic",
          "plan: profile source: analytic (FLOPs / device spec), measured (mobius-worker profile, "
          "cached) or a profile JSON file.");
ABSL_FLAG(std::string, profile_cache_dir, "",
          "plan: measured-profile cache directory; empty: $XDG_CACHE_HOME/mobius/profiles or "
          "~/.cache/mobius/profiles.");

namespace mobius::cli {

std::string PlanProfileFlagDefault() { return absl::GetFlag(FLAGS_profile); }
std::string PlanProfileCacheDirFlagDefault() { return absl::GetFlag(FLAGS_profile_cache_dir); }
std::string PlanWorkerBinaryFlagDefault() { return absl::GetFlag(FLAGS_worker_binary); }

// The helpers; plan_command_internal.h names the ones `mobius plan --nodes` (plan_nodes.cc)
// shares.
namespace plan_internal {

using planner::PlanReport;

constexpr double kGiB = double(int64_t{1} << 30);
constexpr int64_t kDefaultLoraRank = 8;  // PEFT's default r (train::AdapterOptions::rank)

absl::StatusOr<Server> LoadServer(const PlanCommandOptions& o) {
  Server s;
  if (!o.topology_file.empty()) {
    auto loaded = topology::MakeHwlocXmlFileSource(o.topology_file)->Load();
    if (!loaded.ok()) return loaded.status();
    s.topology = std::move(loaded->topology);
  } else {
    auto resp = DaemonClient::For(o.daemon, o.timeout)->GetTopology(false);
    if (!resp.ok()) return resp.status();
    auto t = TopologyFromProto(resp->topology());
    if (!t.ok()) {
      return absl::InternalError(
          absl::StrCat("the daemon sent an inconsistent topology: ", t.status().message()));
    }
    s.topology = *std::move(t);
  }
  s.facts = topology::Analyze(s.topology);
  return s;
}

absl::StatusOr<std::vector<int>> ParseGpus(const std::string& text) {
  std::vector<int> gpus;
  if (text.empty()) return gpus;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int g = 0;
    if (!absl::SimpleAtoi(part, &g)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--gpus: '", std::string(part), "' is not a GPU index (expected e.g. --gpus 0,1,2)"));
    }
    gpus.push_back(g);
  }
  return gpus;
}

std::string WorkerBinary(const PlanCommandOptions& o) {
  if (!o.worker_binary.empty()) return o.worker_binary;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "mobius-worker";
  return (self.parent_path() / "mobius-worker").string();
}

// Runs `mobius-worker profile` for the job's shape; it answers from the cache or measures.
absl::StatusOr<planner::MeasuredProfile> RunWorkerProfile(const PlanCommandOptions& o,
                                                          std::string* cache_path) {
  planner::WorkerProfileRequest req;
  req.worker = WorkerBinary(o);
  req.model = o.model;
  req.microbatch = o.microbatch;
  req.seq = o.seq;
  req.backend = "cpu";
  req.precision = o.precision;  // ResolveFree: pinned, or bf16
  req.cache_dir = o.profile_cache_dir;
  if (::access(req.worker.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--profile=measured needs mobius-worker, not found at ", req.worker,
        "; build it next to mobius, pass --worker_binary, or use --profile=analytic or a file"));
  }
  absl::StatusOr<planner::MeasuredProfile> m = planner::RunWorkerProfile(req);
  if (!m.ok()) return m.status();
  absl::StatusOr<std::string> dir = planner::ResolveProfileCacheDir(o.profile_cache_dir);
  *cache_path = dir.ok() ? planner::ProfileCachePath(*dir, planner::CacheKeyOf(*m))
                         : std::string("(the worker's cache)");
  return m;
}

absl::StatusOr<ProfileChoice> ResolveProfile(const PlanCommandOptions& o,
                                             const model::ModelDescription& model) {
  ProfileChoice c;
  if (o.profile.empty() || o.profile == "analytic") return c;
  absl::StatusOr<planner::MeasuredProfile> m;
  if (o.profile == "measured") {
    m = RunWorkerProfile(o, &c.path);
  } else {
    c.path = o.profile;
    m = planner::ReadProfileFile(o.profile);
    if (absl::IsNotFound(m.status())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--profile ", o.profile,
          ": no such file (--profile takes analytic, measured or a profile JSON file)"));
    }
  }
  if (!m.ok()) return m.status();
  c.backend = m->backend;
  absl::StatusOr<planner::Profile> p = planner::MeasuredToProfile(*m, model);
  if (!p.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("profile ", c.path, ": ", p.status().message()));
  }
  c.profile = *std::move(p);
  return c;
}

absl::StatusOr<planner::PlanOptions> MakeOptions(const PlanCommandOptions& o) {
  planner::PlanOptions p;
  // "auto" values (RunPlan chooses them by simulation) stand in as the fixed defaults here.
  // --schedule: the name parsed here, at the edge (the planner takes the type).
  absl::StatusOr<runtime::Schedule> schedule =
      runtime::ParseSchedule(o.schedule == "auto" ? "mobius" : o.schedule);
  if (!schedule.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--schedule: ", schedule.status().message()));
  }
  p.schedule = *schedule;
  p.partitioner = o.partitioner;
  p.mapper = o.mapper;
  p.optimizer_staleness = std::max(o.optimizer_staleness, 0);
  p.dispatch = o.dispatch == "auto" ? "static" : o.dispatch;
  // The runtime's optimizer needs the global norm to clip: it starts after the whole backward.
  p.optimizer_after_backward = o.clip;
  if (o.lora_rank < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--lora-rank must be >= 1, or 0 for full fine-tuning (got ", o.lora_rank, ")"));
  }
  if (o.lora_base != "bf16" && o.lora_base != "nf4") {
    return absl::InvalidArgumentError(
        absl::StrCat("--lora-base must be bf16 or nf4 (got \"", o.lora_base, "\")"));
  }
  if (o.lora || o.lora_rank > 0 || !o.lora_targets.empty() || o.lora_base == "nf4") {
    p.lora.rank = o.lora_rank > 0 ? o.lora_rank : kDefaultLoraRank;
    p.lora.base_nf4 = o.lora_base == "nf4";
    if (!o.lora_targets.empty()) {
      p.lora.target_modules = absl::StrSplit(o.lora_targets, ',', absl::SkipWhitespace());
    }
  }
  auto gpus = ParseGpus(o.gpus);
  if (!gpus.ok()) return gpus.status();
  p.gpus = *gpus;
  p.gpu_memory_bytes = static_cast<int64_t>(o.gpu_memory_gib * kGiB);
  p.host_memory_bytes = static_cast<int64_t>(o.host_memory_gib * kGiB);
  p.devices_in_host_memory = o.emulated_gpus;
  p.efficiency = o.efficiency;
  if (o.peak_tflops > 0) {
    planner::DeviceSpec d;
    d.name = absl::StrFormat("custom %.1f TFLOPS", o.peak_tflops);
    d.peak_flops_per_s = o.peak_tflops * 1e12;
    d.memory_bytes = p.gpu_memory_bytes;
    p.device = d;
  }
  p.mip_time_limit_seconds = o.mip_time_limit_seconds;
  if (!(o.link_scale > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--link-scale must be > 0 (got ", o.link_scale, ")"));
  }
  // The emulated links run at the simulator's bandwidth times the scale (run_builder.cc).
  p.cost.dma_efficiency *= o.link_scale;
  p.num_stages = o.stages;
  p.trace = !o.trace.empty();
  return p;
}

std::string Gib(int64_t bytes) { return absl::StrFormat("%.2f GiB", bytes / kGiB); }

std::string UnitLabel(const model::ModelDescription& m, int unit) {
  const model::LayerUnit& u = m.units[unit];
  if (u.kind == model::UnitKind::kDecoderBlock) return absl::StrCat("block ", u.layer);
  return model::UnitKindName(u.kind);
}

std::string Join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) absl::StrAppend(&s, i ? "," : "", v[i]);
  return s;
}

std::string ModelLine(const model::ModelDescription& m, const std::string& path,
                      int64_t parameters) {
  std::string line = absl::StrFormat("Model: %s (%s), %.2fB parameters", m.config.model_type,
                                     path, parameters / 1e9);
  const model::MoeConfig& moe = m.config.moe;
  if (moe.enabled()) {
    absl::StrAppendFormat(&line, ", %.2fB active per token (%d of %d experts)%s",
                          model::ActiveParameters(m) / 1e9, moe.experts_per_token,
                          moe.num_experts,
                          moe.output_router_logits
                              ? "; output_router_logits: the load-balancing loss is not trained "
                                "yet (issue 32), set it false to run"
                              : "");
  }
  return line + "\n";
}

std::string ProfileLine(const PlanReport& r, const ProfileChoice& c) {
  std::string line = absl::StrCat(r.profile_source, " (", r.device);
  if (!c.path.empty()) absl::StrAppend(&line, ", ", c.path);
  absl::StrAppend(&line, "), gradients ", r.gradient_bytes_per_parameter == 4 ? "fp32" : "bf16",
                  " (", r.gradient_bytes_per_parameter, " bytes/parameter)");
  return line;
}

// "LoRA rank 8 on q_proj, v_proj: 3.41M adapter parameters (0.04%), the base frozen in bf16;
// host model state 2.00 bytes/parameter", or the full fine-tuning counterpart.
std::string TrainingLine(const PlanReport& r) {
  const double per_param = static_cast<double>(r.plan.memory.host_model_state_bytes) /
                           static_cast<double>(std::max<int64_t>(r.parameters, 1));
  if (r.lora_rank == 0) {
    return absl::StrFormat("full fine-tuning; host model state %.2f bytes/parameter", per_param);
  }
  return absl::StrFormat(
      "LoRA rank %d on %s: %.2fM adapter parameters (%.3f%%), the base frozen in %s; host "
      "model state %.2f bytes/parameter",
      r.lora_rank, absl::StrJoin(r.lora_targets, ", "), r.adapter_parameters / 1e6,
      100.0 * static_cast<double>(r.adapter_parameters) / std::max<int64_t>(r.parameters, 1),
      r.lora_base_nf4 ? "NF4 (its linears; norms, embeddings and head bf16)" : "bf16", per_param);
}

std::string RangeLabel(const model::ModelDescription& m, const planner::StageRange& st) {
  return st.end - st.begin == 1 ? UnitLabel(m, st.begin)
                                : UnitLabel(m, st.begin) + " .. " + UnitLabel(m, st.end - 1);
}

void PrintText(const PlanCommandOptions& o, const model::ModelDescription& m, const PlanReport& r,
               const ProfileChoice& profile, std::ostream& out) {
  const planner::Plan& p = r.plan;
  const planner::MemoryEstimate& mem = p.memory;
  out << ModelLine(m, o.model, r.parameters);
  out << absl::StrFormat(
      "Job: global batch %d = %d microbatches x %d sequences x %d tokens, %d GPUs (%s), %s\n",
      o.batch, p.num_microbatches, p.shape.microbatch_size, p.shape.seq_len, r.num_gpus, r.device,
      o.precision == "fp16" ? "fp16 (dynamic loss scaling; GEMMs into fp16 outputs, forward, "
                              "backward and logits, sum in fp16 where the GPU is faster so)"
                            : "bf16 (fp32 accumulation)");
  out << absl::StrFormat("Profile: %s\n", ProfileLine(r, profile));
  out << absl::StrFormat("Training: %s\n", TrainingLine(r));
  out << absl::StrFormat("Plan: schedule %s, partitioner %s, mapper %s (%s)%s\n\n",
                         runtime::ScheduleName(p.schedule),
                         p.partitioner, p.mapper, p.mapping.method,
                         r.partitioner_note.empty() ? "" : "; " + r.partitioner_note);

  out << (p.round_robin ? "Forward stages (" : "Stages (") << p.num_stages() << "):\n";
  out << absl::StrFormat("  %-5s %-9s %-28s %12s %5s\n", "stage", "units", "", "parameters", "GPU");
  for (int s = 0; s < p.num_stages(); ++s) {
    const planner::StageRange& st = p.partition.stages[s];
    out << absl::StrFormat("  %-5d %-9s %-28s %12s %5d\n", s,
                           absl::StrCat(st.begin, "-", st.end - 1), RangeLabel(m, st),
                           Gib(r.stage_parameter_bytes[s]), p.GpuOfStage(s));
  }
  if (p.round_robin) {
    const planner::Partition& b = p.round_robin->backward;
    out << "\nBackward stages (" << b.num_stages() << ", run last to first):\n";
    out << absl::StrFormat("  %-5s %-9s %-28s %12s %5s\n", "stage", "units", "", "parameters",
                           "GPU");
    for (int s = 0; s < b.num_stages(); ++s) {
      const planner::StageRange& st = b.stages[s];
      out << absl::StrFormat("  %-5d %-9s %-28s %12s %5d\n", s,
                             absl::StrCat(st.begin, "-", st.end - 1), RangeLabel(m, st),
                             Gib(r.backward_stage_parameter_bytes[s]),
                             p.GpuOfPass(p.num_passes() - 1 - s));
    }
    out << "\nMapping (pass j runs on position j mod N; forward stages are passes 0..S_F-1, "
           "backward stage b is pass S_F+S_B-1-b):\n";
  } else {
    out << "\nMapping (stage s runs on position s mod N):\n";
  }
  out << absl::StrFormat("  %-3s %-4s %-26s %-5s %-7s %-6s %-12s %s\n", "pos", "GPU", "name",
                         "root", "socket", "group", "GPU memory", "stages");
  for (size_t i = 0; i < r.placements.size(); ++i) {
    const planner::GpuPlacement& g = r.placements[i];
    const std::string stages =
        p.round_robin ? absl::StrCat("F ", Join(g.stages), " / B ", Join(g.backward_stages))
                      : Join(g.stages);
    out << absl::StrFormat("  %-3d %-4d %-26s %-5d %-7d %-6d %-12s %s\n", i, g.gpu, g.name,
                           g.root_complex, g.package, g.contention_group, Gib(g.memory_bytes),
                           stages);
  }
  out << absl::StrFormat(
      "\nMemory: GPU max %s of %s; host RAM %s (model state %s + checkpoints %s + activation "
      "gradients %s + worker processes %s%s) of %s; pinned %s\n",
      Gib(mem.max_gpu_bytes), Gib(mem.gpu_capacity_bytes), Gib(mem.host_bytes),
      Gib(mem.host_model_state_bytes), Gib(mem.host_activation_bytes),
      Gib(mem.host_activation_grad_bytes), Gib(mem.host_process_bytes),
      mem.host_emulated_device_bytes > 0
          ? absl::StrCat(" + emulated GPUs ", Gib(mem.host_emulated_device_bytes))
          : "",
      r.host_memory_available_bytes > 0 ? Gib(r.host_memory_available_bytes) : "unknown",
      Gib(mem.pinned_bytes));
  out << absl::StrFormat(
      "Predicted step: %.3f s simulated (cost model J %.3f s), %.0f tokens/s, bubble %.1f%%%s\n",
      r.step_seconds, r.objective_seconds, r.tokens_per_second, 100 * r.bubble_fraction,
      o.link_scale != 1.0 ? absl::StrFormat("; PCIe links x%g (emulated)", o.link_scale) : "");
  out << absl::StrFormat("Traffic per step: H2D %s (weights %s), D2H %s, P2P %s\n\n",
                         Gib(r.h2d_bytes), Gib(r.weight_upload_bytes), Gib(r.d2h_bytes),
                         Gib(r.p2p_bytes));

  out << "Links:\n";
  out << absl::StrFormat("  %-22s %10s %12s %8s %6s\n", "link", "GB/s", "bytes", "busy s", "busy");
  for (const planner::LinkTraffic& l : r.links) {
    if (l.bytes == 0) continue;
    out << absl::StrFormat("  %-22s %10.2f %12s %8.3f %5.0f%%\n", l.name,
                           l.capacity_bytes_per_s / 1e9, Gib(l.bytes), l.busy_seconds,
                           r.step_seconds > 0 ? 100 * l.busy_seconds / r.step_seconds : 0.0);
  }
  if (r.alternatives.empty()) return;
  out << "\nAlternatives (same cost model; * = this plan):\n";
  out << absl::StrFormat("  %-12s %-11s %6s %9s %9s %10s %11s %12s  %s\n", "dimension", "name",
                         "stages", "J s", "step s", "tokens/s", "contention", "H2D", "note");
  for (const planner::Alternative& a : r.alternatives) {
    const std::string name = absl::StrCat(a.chosen ? "*" : " ", a.name);
    if (!a.available) {
      out << absl::StrFormat("  %-12s %-11s %6s %9s %9s %10s %11s %12s  %s\n", a.dimension, name,
                             "-", "-", "-", "-", "-", "-", a.note);
      continue;
    }
    out << absl::StrFormat("  %-12s %-11s %6d %9s %9.3f %10.0f %11s %12s  %s\n", a.dimension, name,
                           a.num_stages,
                           a.objective_seconds > 0 ? absl::StrFormat("%.3f", a.objective_seconds)
                                                   : "-",
                           a.step_seconds, a.tokens_per_second,
                           a.dimension == "schedule" ? "-"
                                                     : absl::StrFormat("%.2f", a.contention_score),
                           Gib(a.h2d_bytes), a.note);
  }
}

nlohmann::ordered_json ToJson(const PlanCommandOptions& o, const model::ModelDescription& m,
                              const PlanReport& r, const ProfileChoice& profile) {
  using nlohmann::ordered_json;
  const planner::Plan& p = r.plan;
  ordered_json j;
  j["model"] = {{"path", o.model}, {"model_type", m.config.model_type},
                {"parameters", r.parameters}, {"units", m.num_units()}};
  j["job"] = {{"global_batch", o.batch}, {"microbatch", p.shape.microbatch_size},
              {"seq_len", p.shape.seq_len}, {"num_microbatches", p.num_microbatches},
              {"precision", o.precision == "fp16" ? "fp16" : "bf16"}};
  j["device"] = r.device;
  j["profile"] = {{"source", r.profile_source},
                  {"path", profile.path},
                  {"backend", profile.backend},
                  {"gradient_bytes_per_parameter", r.gradient_bytes_per_parameter}};
  j["training"] = {{"mode", r.lora_rank > 0 ? "lora" : "full"},
                   {"lora_rank", r.lora_rank},
                   {"lora_targets", r.lora_targets},
                   {"lora_base", r.lora_rank == 0 ? "" : r.lora_base_nf4 ? "nf4" : "bf16"},
                   {"adapter_parameters", r.adapter_parameters},
                   {"host_model_state_bytes_per_parameter",
                    static_cast<double>(p.memory.host_model_state_bytes) /
                        static_cast<double>(std::max<int64_t>(r.parameters, 1))}};
  j["schedule"] = runtime::ScheduleName(p.schedule);
  j["partitioner"] = p.partitioner;
  j["partitioner_note"] = r.partitioner_note;
  j["mapper"] = p.mapper;
  j["mapping_method"] = p.mapping.method;
  j["contention_score"] = p.mapping.contention_score;
  j["gpu_order"] = p.mapping.gpu_order;
  ordered_json stages = ordered_json::array();
  for (int s = 0; s < p.num_stages(); ++s) {
    stages.push_back({{"stage", s}, {"unit_begin", p.partition.stages[s].begin},
                      {"unit_end", p.partition.stages[s].end},
                      {"parameter_bytes", r.stage_parameter_bytes[s]}, {"gpu", p.GpuOfStage(s)},
                      {"slot_seconds", p.partition.costs[s].slot_seconds}});
  }
  j["stages"] = stages;
  if (p.round_robin) {
    ordered_json bwd = ordered_json::array();
    const planner::Partition& b = p.round_robin->backward;
    for (int s = 0; s < b.num_stages(); ++s) {
      bwd.push_back({{"stage", s},
                     {"unit_begin", b.stages[s].begin},
                     {"unit_end", b.stages[s].end},
                     {"parameter_bytes", r.backward_stage_parameter_bytes[s]},
                     {"gpu", p.GpuOfPass(p.num_passes() - 1 - s)},
                     {"slot_seconds", b.costs[s].slot_seconds}});
    }
    j["round_robin"] = {{"forward_stages", p.round_robin->forward.num_stages()},
                        {"backward_stages", bwd},
                        {"num_passes", p.num_passes()},
                        {"checkpoint_units", p.CheckpointUnits()},
                        {"objective_seconds", p.round_robin->objective_seconds}};
  }
  ordered_json gpus = ordered_json::array();
  for (const planner::GpuPlacement& g : r.placements) {
    gpus.push_back({{"gpu", g.gpu},
                    {"name", g.name},
                    {"root_complex", g.root_complex},
                    {"package", g.package},
                    {"numa_node", g.numa_node},
                    {"contention_group", g.contention_group},
                    {"stages", g.stages},
                    {"backward_stages", g.backward_stages},
                    {"memory_bytes", g.memory_bytes}});
  }
  j["gpus"] = gpus;
  const planner::MemoryEstimate& mem = p.memory;
  j["memory"] = {{"max_gpu_bytes", mem.max_gpu_bytes},
                 {"gpu_capacity_bytes", mem.gpu_capacity_bytes},
                 {"host_bytes", mem.host_bytes},
                 {"host_model_state_bytes", mem.host_model_state_bytes},
                 {"host_activation_bytes", mem.host_activation_bytes},
                 {"host_activation_grad_bytes", mem.host_activation_grad_bytes},
                 {"host_process_bytes", mem.host_process_bytes},
                 {"host_emulated_device_bytes", mem.host_emulated_device_bytes},
                 {"pinned_bytes", mem.pinned_bytes},
                 {"host_available_bytes", r.host_memory_available_bytes}};
  j["link_scale"] = o.link_scale;
  j["predicted"] = {{"step_seconds", r.step_seconds},
                    {"objective_seconds", r.objective_seconds},
                    {"tokens_per_second", r.tokens_per_second},
                    {"bubble_fraction", r.bubble_fraction}};
  j["traffic"] = {{"h2d_bytes", r.h2d_bytes}, {"d2h_bytes", r.d2h_bytes},
                  {"p2p_bytes", r.p2p_bytes}, {"weight_upload_bytes", r.weight_upload_bytes}};
  ordered_json links = ordered_json::array();
  for (const planner::LinkTraffic& l : r.links) {
    links.push_back({{"name", l.name}, {"capacity_bytes_per_s", l.capacity_bytes_per_s},
                     {"bytes", l.bytes}, {"busy_seconds", l.busy_seconds}});
  }
  j["links"] = links;
  ordered_json alts = ordered_json::array();
  for (const planner::Alternative& a : r.alternatives) {
    alts.push_back({{"dimension", a.dimension}, {"name", a.name}, {"chosen", a.chosen},
                    {"available", a.available}, {"note", a.note}, {"num_stages", a.num_stages},
                    {"objective_seconds", a.objective_seconds},
                    {"contention_score", a.contention_score}, {"step_seconds", a.step_seconds},
                    {"tokens_per_second", a.tokens_per_second}, {"h2d_bytes", a.h2d_bytes},
                    {"d2h_bytes", a.d2h_bytes}, {"weight_upload_bytes", a.weight_upload_bytes}});
  }
  j["alternatives"] = alts;
  return j;
}

// Planning is local: every error MakePlan returns is about the input (or a job that does not fit).
int PlanExitCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
      return kExitUsage;
    default:
      return ExitCodeFor(s);
  }
}

absl::Status WriteTrace(const std::string& path, const std::string& json) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << json;
  f.close();
  if (!f) return absl::InvalidArgumentError(absl::StrCat("cannot write the trace to ", path));
  return absl::OkStatus();
}

}  // namespace plan_internal

using namespace plan_internal;  // NOLINT: this file's own helpers

// The longest sequences that plan at the job's batch, microbatch 1: full fine-tuning and LoRA
// (the job's adapter, else PEFT's default rank 8 and targets; staleness 0, which LoRA needs).
struct Longest {
  std::optional<planner::LongestSequence> full, lora;
  int64_t lora_rank = 0;
};

Longest FindLongest(const model::ModelDescription& m, const Server& server,
                    const planner::JobShape& job, const planner::PlanOptions& options) {
  Longest l;
  planner::JobShape one = job;
  one.microbatch = 1;
  planner::PlanOptions full = options;
  full.lora = {};
  if (auto r = planner::FindLongestSequence(m, server.topology, server.facts, one, full); r.ok()) {
    l.full = *r;
  }
  planner::PlanOptions lora = options;
  if (!lora.lora.enabled()) lora.lora.rank = 8;
  lora.optimizer_staleness = 0;
  l.lora_rank = lora.lora.rank;
  if (auto r = planner::FindLongestSequence(m, server.topology, server.facts, one, lora); r.ok()) {
    l.lora = *r;
  }
  return l;
}

std::string LongestText(const planner::LongestSequence& s) {
  if (s.seq_len == 0) return "none (not even 1,024 tokens)";
  return absl::StrCat(s.seq_len, " tokens", s.seq_len >= s.limit ? " (the model's context)" : "");
}

std::string LongestLine(const Longest& l, const PlanCommandOptions& o) {
  return absl::StrFormat(
      "Longest sequence (microbatch 1, global batch %d, this hardware): full fine-tuning %s; "
      "LoRA rank %d %s\n",
      o.batch, l.full ? LongestText(*l.full) : "unknown", l.lora_rank,
      l.lora ? LongestText(*l.lora) : "unknown");
}

nlohmann::ordered_json LongestJson(const Longest& l) {
  auto one = [](const std::optional<planner::LongestSequence>& s) -> nlohmann::ordered_json {
    if (!s) return nullptr;
    return {{"seq_len", s->seq_len}, {"limit", s->limit}, {"refusal", s->refusal}};
  };
  return {{"microbatch", 1}, {"full", one(l.full)}, {"lora_rank", l.lora_rank},
          {"lora", one(l.lora)}};
}

// What `mobius plan` leaves to the planner (issue 31): "auto" schedule and dispatch, staleness < 0,
// microbatch 0. With --nodes, or a measured profile (one microbatch shape), the free dimensions
// take the fixed defaults instead (mobius, static, 0; microbatch 1).
struct Free {
  bool schedule = false, dispatch = false, staleness = false, microbatch = false;
  bool precision = false;
  bool any() const { return schedule || dispatch || staleness || microbatch || precision; }
};

Free ResolveFree(PlanCommandOptions& o) {
  Free f{o.schedule == "auto", o.dispatch == "auto", o.optimizer_staleness < 0, o.microbatch == 0,
         o.precision == "auto"};
  const bool fixed = !o.nodes.empty();
  if (fixed || o.profile != "analytic") {
    if (f.microbatch) o.microbatch = 1;
    f.microbatch = false;
    // A measured profile is one precision's kernels: bf16 unless --precision pins fp16.
    if (f.precision) o.precision = "bf16";
    f.precision = false;
  }
  if (fixed) {
    if (f.schedule) o.schedule = "mobius";
    if (f.dispatch) o.dispatch = "static";
    if (f.staleness) o.optimizer_staleness = 0;
    f = Free{};
  }
  return f;
}

std::string ChoiceText(const planner::ConfigChoice& c) {
  int planned = 0;
  for (const planner::ConfigCandidate& k : c.candidates) planned += k.planned;
  const planner::ConfigCandidate& best = c.candidates.front();
  std::string s = absl::StrFormat(
      "Configuration: chosen by simulation among %d that fit (%d do not): %s, %.0f tokens/s",
      planned, static_cast<int>(c.candidates.size()) - planned, best.Label(),
      best.tokens_per_second);
  if (planned > 1) {
    const planner::ConfigCandidate& next = c.candidates[1];
    s += absl::StrFormat("; runner-up %s, %.0f tokens/s (%.3fx)", next.Label(),
                         next.tokens_per_second,
                         next.tokens_per_second / std::max(best.tokens_per_second, 1e-9));
  }
  return s + "; pin with --schedule, --dispatch, --optimizer-staleness, --microbatch, "
             "--precision\n";
}

nlohmann::ordered_json ChoiceJson(const planner::ConfigChoice& c) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const planner::ConfigCandidate& k : c.candidates) {
    list.push_back({{"schedule", runtime::ScheduleName(k.schedule)}, {"dispatch", k.dispatch},
                    {"optimizer_staleness", k.optimizer_staleness}, {"microbatch", k.microbatch},
                    {"precision", k.precision},
                    {"fits", k.planned}, {"tokens_per_second", k.tokens_per_second},
                    {"step_seconds", k.step_seconds}, {"refusal", k.refusal}});
  }
  return {{"chosen", c.candidates.front().Label()}, {"candidates", std::move(list)}};
}

int RunPlan(const PlanCommandOptions& given, std::ostream& out, std::ostream& err) {
  PlanCommandOptions o = given;
  const Free free = ResolveFree(o);
  if (o.model.empty()) {
    err << "mobius plan: --model DIR|config.json is required\n";
    return kExitUsage;
  }
  auto config = model::LoadModelConfig(o.model);
  if (!config.ok()) {
    err << "mobius plan: " << config.status().message() << "\n";
    return ExitCodeFor(config.status());
  }
  auto model = model::DescribeModel(*config);
  if (!model.ok()) {
    err << "mobius plan: " << model.status().message() << "\n";
    return kExitUsage;
  }
  auto options = MakeOptions(o);
  if (!options.ok()) {
    err << "mobius plan: " << options.status().message() << "\n";
    return kExitUsage;
  }
  auto profile = ResolveProfile(o, *model);
  if (!profile.ok()) {
    err << "mobius plan: " << profile.status().message() << "\n";
    return PlanExitCode(profile.status());
  }
  options->profile = profile->profile;
  auto server = LoadServer(o);
  if (!server.ok()) {
    err << "mobius plan: " << server.status().message() << "\n";
    return ExitCodeFor(server.status());
  }
  planner::JobShape job;
  job.global_batch = o.batch;
  job.microbatch = o.microbatch;
  job.seq_len = o.seq;
  if (o.precision != "auto" && o.precision != "bf16" && o.precision != "fp16") {
    err << "mobius plan: --precision must be auto, bf16 or fp16 (got \"" << o.precision << "\")\n";
    return kExitUsage;
  }
  job.dtype = free.precision ? "bf16" : o.precision;
  job.fp16_accumulate = job.dtype == "fp16";
  if (!o.nodes.empty()) return RunPlanNodes(o, *model, *server, job, *options, *profile, out, err);
  std::optional<planner::ConfigChoice> choice;
  absl::StatusOr<planner::PlanReport> report;
  if (free.any()) {
    planner::ConfigSpace space;
    if (!free.schedule) space.schedules = {options->schedule};
    if (!free.dispatch) space.dispatches = {o.dispatch};
    if (!free.staleness) space.staleness = {o.optimizer_staleness};
    if (!free.microbatch) space.microbatches = {o.microbatch};
    if (!free.precision) space.precisions = {o.precision};
    absl::StatusOr<planner::ConfigChoice> c = planner::ChooseConfiguration(
        *model, server->topology, server->facts, job, *options, space);
    if (c.ok()) {
      choice = *std::move(c);
      job = choice->job;
      *options = choice->options;
      o.microbatch = job.microbatch;
      o.schedule = runtime::ScheduleName(options->schedule);
      o.dispatch = options->dispatch;
      o.optimizer_staleness = options->optimizer_staleness;
      o.precision = job.dtype;
      report = choice->report;
    } else {
      report = c.status();
      if (free.microbatch) job.microbatch = 1;  // for the longest-sequence search below
    }
  } else {
    report = planner::MakePlan(*model, server->topology, server->facts, job, *options);
  }
  if (!report.ok()) {
    err << "mobius plan: " << report.status().message();
    if (o.longest && absl::IsFailedPrecondition(report.status())) {  // does not fit: how long does
      const Longest l = FindLongest(*model, *server, job, *options);
      if (l.full && l.full->seq_len > 0) {
        err << "; the longest sequence that plans here at microbatch 1: "
            << LongestText(options->lora.enabled() && l.lora ? *l.lora : *l.full);
      }
    }
    err << "\n";
    return PlanExitCode(report.status());
  }
  std::optional<Longest> longest;
  if (o.longest) longest = FindLongest(*model, *server, job, *options);
  const std::optional<BaseComparison> base = CompareBase(*model, *server, job, *options);
  if (!o.trace.empty()) {
    if (absl::Status s = WriteTrace(o.trace, report->chrome_trace_json); !s.ok()) {
      err << "mobius plan: " << s.message() << "\n";
      return kExitUsage;
    }
  }
  if (o.json) {
    nlohmann::ordered_json j = ToJson(o, *model, *report, *profile);
    if (choice) j["configuration"] = ChoiceJson(*choice);
    if (longest) j["longest_sequence"] = LongestJson(*longest);
    if (base) j["other_base"] = BaseJson(*base);
    out << j.dump(2) << "\n";
  } else {
    if (choice) out << ChoiceText(*choice) << "\n";
    PrintText(o, *model, *report, *profile, out);
    if (base) out << "\n" << BaseLine(*base, *report);
    if (longest) out << "\n" << LongestLine(*longest, o);
    if (!o.trace.empty()) out << "\nTrace: " << o.trace << " (open in https://ui.perfetto.dev)\n";
  }
  return kExitOk;
}

absl::Status SetAdapter(const train::AdapterOptions& adapter, PlanCommandOptions& o) {
  absl::StatusOr<planner::LoraOptions> lora = planner::LoraFromAdapterOptions(adapter);
  if (!lora.ok()) return lora.status();
  o.lora = lora->enabled();
  o.lora_rank = lora->rank;
  o.lora_targets = absl::StrJoin(lora->target_modules, ",");
  o.lora_base = lora->base_nf4 ? "nf4" : "bf16";
  return absl::OkStatus();
}

int RunPlanSpec(const std::string& spec_path, PlanCommandOptions o, std::ostream& out,
                std::ostream& err) {
  absl::StatusOr<jobspec::JobSpec> spec = jobspec::ParseJobSpecFile(spec_path);
  if (!spec.ok()) {
    err << "mobius plan: " << spec.status().message() << "\n";
    return ExitCodeFor(spec.status());
  }
  o.model = spec->model_dir;
  o.batch = spec->training.global_batch;
  o.microbatch = spec->training.EffectiveMicrobatch();
  o.seq = spec->training.seq_len;
  o.schedule = spec->plan.schedule;
  o.partitioner = spec->plan.partitioner;
  o.mapper = spec->plan.mapper;
  o.stages = spec->plan.stages;
  o.optimizer_staleness = static_cast<int>(spec->training.optimizer_staleness);
  o.dispatch = spec->plan.dispatch;
  o.precision = spec->training.precision;
  o.clip = spec->training.grad_clip > 0;
  // The adapter section (LoRA, its base's format) as a job gets it; its targets are checked
  // against the model by the planner.
  if (absl::Status s = SetAdapter(jobs::AdapterOptionsFromSpec(*spec), o); !s.ok()) {
    err << "mobius plan: " << s.message() << "\n";
    return kExitUsage;
  }
  if (spec->resources.device_memory_bytes > 0) {
    o.gpu_memory_gib = spec->resources.device_memory_bytes / 1073741824.0;
  }
  if (spec->resources.gpus > 0 && o.gpus.empty()) {
    // The first N GPUs (the daemon's scheduler may choose others; `mobius describe` shows them).
    for (int g = 0; g < spec->resources.gpus; ++g) {
      o.gpus += absl::StrCat(g == 0 ? "" : ",", g);
    }
  }
  return RunPlan(o, out, err);
}

}  // namespace mobius::cli
