#include "bench/pipeline/bench_report.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace mobius::bench {
namespace {

using Json = nlohmann::ordered_json;

double MB(double bytes) { return bytes / 1e6; }

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

std::map<std::string, const planner::LinkTraffic*> PlanLinks(const planner::PlanReport& r) {
  std::map<std::string, const planner::LinkTraffic*> m;
  for (const planner::LinkTraffic& l : r.links) m[l.name] = &l;
  return m;
}

std::map<std::string, const planner::sim::LinkStats*> SimLinks(const RuntimeSim& r) {
  std::map<std::string, const planner::sim::LinkStats*> m;
  for (const planner::sim::LinkStats& l : r.links) m[l.name] = &l;
  return m;
}

// A step's time: the slowest rank's own wall time for it. (The launcher's interval between
// aggregated reports is the same for a synchronous run; with optimizer staleness a rank sends its
// report of step k at the end of step k + 1, so the last two arrive together.)
double StepSeconds(const runtime::StepReport& s) {
  double t = 0;
  for (const runtime::WorkerStepReport& r : s.ranks) t = std::max(t, r.step_seconds);
  return s.ranks.empty() ? s.step_seconds : t;
}

// {h2d, d2h} bytes per timed step on emulated link i: the cumulative counts after the last step
// minus those after the warm-up (start-up copies, e.g. resident's state upload, excluded); the
// whole run's average where the steps do not carry link counts. The launcher reads the counts
// when it aggregates a step's reports, which with optimizer staleness (`lag` 1) happens a step
// late except for the last step: the window then spans one step fewer.
std::pair<double, double> TimedLinkBytes(const MappingRun& r, size_t i, int64_t warmup, int lag) {
  const size_t n = r.steps.size(), w = static_cast<size_t>(warmup);
  if (n > w + lag && w >= 1 && r.steps.back().link_bytes.size() > i &&
      r.steps[w - 1].link_bytes.size() > i) {
    const auto& last = r.steps.back().link_bytes[i];
    const auto& first = r.steps[w - 1].link_bytes[i];
    const double k = static_cast<double>(n - w - lag);
    return {static_cast<double>(last.first - first.first) / k,
            static_cast<double>(last.second - first.second) / k};
  }
  const double steps = static_cast<double>(std::max<size_t>(1, n));
  return {r.links[i].h2d_bytes / steps, r.links[i].d2h_bytes / steps};
}

// Measured bytes per timed step (averaged over runs) next to both simulations, per emulated link.
std::vector<LinkRow> Links(const Prediction& p, const std::vector<const MappingRun*>& runs,
                           int64_t warmup) {
  std::vector<LinkRow> rows;
  const auto plan = PlanLinks(p.report);
  const auto sim = SimLinks(p.runtime_sim);
  auto bytes = [](const auto& m, const std::string& name) -> double {
    auto it = m.find(name);
    return it == m.end() ? 0.0 : static_cast<double>(it->second->bytes);
  };
  if (runs.empty()) {  // --plan_only: the simulator's links, by name
    for (const auto& [name, l] : plan) {
      if (name.size() < 4 || name.substr(name.size() - 4) != ".h2d") continue;
      const std::string base = name.substr(0, name.size() - 4);
      rows.push_back({base, l->capacity_bytes_per_s, 0, 0, bytes(plan, name),
                      bytes(plan, base + ".d2h"), bytes(sim, name), bytes(sim, base + ".d2h")});
    }
    return rows;
  }
  const MappingRun& first = *runs.front();
  for (size_t i = 0; i < first.links.size(); ++i) {
    LinkRow row;
    row.name = first.links[i].name;
    row.capacity_bytes_per_s = i < first.link_capacity.size() ? first.link_capacity[i] : 0;
    for (const MappingRun* r : runs) {
      const auto [h2d, d2h] = TimedLinkBytes(*r, i, warmup, p.optimizer_staleness);
      row.h2d_measured += h2d / static_cast<double>(runs.size());
      row.d2h_measured += d2h / static_cast<double>(runs.size());
    }
    row.h2d_plan = bytes(plan, row.name + ".h2d");
    row.d2h_plan = bytes(plan, row.name + ".d2h");
    row.h2d_sim = bytes(sim, row.name + ".h2d");
    row.d2h_sim = bytes(sim, row.name + ".d2h");
    rows.push_back(row);
  }
  return rows;
}

bool OwnGpuLink(const std::string& name) {  // "gpu3", not "uplink0" or "gpu3.nvlink"
  return name.rfind("gpu", 0) == 0 && name.find('.') == std::string::npos;
}

MappingSummary SummarizeMapping(const Prediction& p, const std::vector<const MappingRun*>& runs,
                                int64_t warmup) {
  MappingSummary m;
  m.name = p.name;
  m.schedule = p.schedule;
  m.mapper = p.mapper;
  m.optimizer_staleness = p.optimizer_staleness;
  m.dispatch = p.dispatch;
  const planner::Plan& plan = p.report.plan;
  if (plan.round_robin) m.num_backward_stages = plan.round_robin->backward.num_stages();
  m.gpu_order = plan.mapping.gpu_order;
  for (const planner::StageRange& s : plan.partition.stages) m.stages.push_back({s.begin, s.end});
  m.contention_score = plan.mapping.contention_score;
  m.gpu_memory_cap_bytes = p.gpu_memory_cap_bytes;
  m.predicted_plan_seconds = plan.predicted_step_seconds;
  m.predicted_sim_seconds = p.runtime_sim.step_seconds;
  m.predicted_sim_busy_seconds = p.runtime_sim.max_busy_seconds;
  m.predicted_sim_forward_seconds = p.runtime_sim.forward_end_seconds;
  std::vector<double> compute, stall, opt, on_demand;
  for (const MappingRun* r : runs) {
    std::vector<double> rep;
    for (size_t i = static_cast<size_t>(warmup); i < r->steps.size(); ++i) {
      rep.push_back(StepSeconds(r->steps[i]));
      compute.push_back(r->steps[i].compute_seconds);
      stall.push_back(r->steps[i].stall_seconds);
      opt.push_back(r->steps[i].optimizer_seconds);
      on_demand.push_back(r->steps[i].uploads_on_demand);
    }
    m.measured_seconds.insert(m.measured_seconds.end(), rep.begin(), rep.end());
    m.rep_medians.push_back(Median(rep));
    m.run_load_averages.push_back(r->load_average);
    m.wall_seconds += r->wall_seconds;
  }
  if (!m.measured_seconds.empty()) {
    m.measured_median = Median(m.measured_seconds);
    m.measured_min = *std::min_element(m.measured_seconds.begin(), m.measured_seconds.end());
    m.measured_max = *std::max_element(m.measured_seconds.begin(), m.measured_seconds.end());
  }
  m.compute_median = Median(compute);
  m.stall_median = Median(stall);
  m.optimizer_median = Median(opt);
  m.on_demand_median = Median(on_demand);
  if (!runs.empty()) {
    for (const runtime::StepReport& s : runs.front()->steps) m.losses.push_back(s.loss);
  }
  m.links = Links(p, runs, warmup);
  for (const LinkRow& l : m.links) {
    if (!OwnGpuLink(l.name)) continue;
    m.h2d_measured += l.h2d_measured;
    m.h2d_plan += l.h2d_plan;
    m.h2d_sim += l.h2d_sim;
    m.d2h_measured += l.d2h_measured;
    m.d2h_plan += l.d2h_plan;
    m.d2h_sim += l.d2h_sim;
  }
  m.weight_upload_plan = static_cast<double>(p.report.weight_upload_bytes);
  return m;
}

}  // namespace

BenchResult Summarize(const BenchSetup& setup, const Calibration& calibration,
                      const std::vector<Prediction>& predictions,
                      const std::vector<MappingRun>& runs) {
  BenchResult r;
  r.setup = setup;
  r.calibration = calibration;
  r.runs = !runs.empty();
  for (const Prediction& p : predictions) {
    std::vector<const MappingRun*> mine;
    for (const MappingRun& run : runs) {
      if (run.name == p.name) mine.push_back(&run);
    }
    r.mappings.push_back(SummarizeMapping(p, mine, setup.warmup));
  }
  // Every run with the same optimizer staleness, training mode (full, LoRA over a bf16 base or
  // over an NF4 one) and precision trains the same model on the same batches with the same
  // arithmetic: the losses must agree bit for bit, across variants and reps, and the synchronous
  // full bf16 ones with the standalone trainer's.
  using Group = std::tuple<int, int, std::string>;
  std::map<std::string, Group> staleness;
  for (const Prediction& p : predictions) {
    staleness[p.name] = {p.optimizer_staleness,
                         p.lora.enabled() ? (p.lora.base_nf4 ? 2 : 1) : 0, p.precision};
  }
  std::map<Group, std::vector<float>> firsts;
  for (const MappingRun& run : runs) {
    std::vector<float> l;
    for (const runtime::StepReport& s : run.steps) l.push_back(s.loss);
    std::vector<float>& ref = firsts[staleness[run.name]];
    if (ref.empty()) {
      ref = l;
      continue;
    }
    if (l.size() != ref.size()) r.losses_identical = false;
    for (size_t i = 0; i < std::min(l.size(), ref.size()); ++i) {
      if (!SameBits(l[i], ref[i])) r.losses_identical = false;
    }
  }
  const Group plain{0, false, "bf16"};
  const std::vector<float> first = firsts.count(plain) ? firsts[plain] : std::vector<float>();
  if (!first.empty() && calibration.large_batch == setup.batch) {
    const size_t n = std::min(first.size(), calibration.large_losses.size());
    r.losses_checked_vs_standalone = static_cast<int>(n);
    for (size_t i = 0; i < n; ++i) {
      if (!SameBits(first[i], calibration.large_losses[i])) r.losses_match_standalone = false;
    }
  }
  return r;
}

namespace {

std::string Order(const std::vector<int>& v) { return absl::StrJoin(v, ","); }

std::string Stages(const std::vector<std::pair<int, int>>& s) {
  std::vector<std::string> parts;
  for (const auto& [b, e] : s) {
    parts.push_back(e - b == 1 ? absl::StrCat(b) : absl::StrCat(b, "-", e - 1));
  }
  return absl::StrJoin(parts, " ");
}

const MappingSummary* Find(const BenchResult& r, const std::string& name) {
  for (const MappingSummary& m : r.mappings) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::string StageCount(const MappingSummary& m) {
  return m.schedule == "roundrobin" ? absl::StrCat(m.stages.size(), "+", m.num_backward_stages)
                                    : absl::StrCat(m.stages.size());
}

// The first synchronous mobius variant, when the variants differ in schedule or optimizer mode.
const MappingSummary* MobiusReference(const BenchResult& r) {
  const MappingSummary* ref = nullptr;
  bool others = false;
  for (const MappingSummary& m : r.mappings) {
    const bool plain = m.schedule == "mobius" && m.optimizer_staleness == 0;
    if (plain && ref == nullptr) ref = &m;
    if (!plain) others = true;
  }
  return others ? ref : nullptr;
}

// Each schedule against mobius: predicted (plan, runtime-sim) and measured step-time ratios.
void PrintScheduleComparison(const BenchResult& r, std::FILE* out) {
  const MappingSummary* ref = MobiusReference(r);
  if (ref == nullptr) return;
  std::fprintf(out,
               "\nschedules side by side, step time relative to %s (> 1: slower than mobius)\n"
               "| schedule | S | measured / plan | plan / mobius plan | runtime-sim / mobius | "
               "measured / mobius (per rep) | H2D MB/step meas / plan / rt-sim | "
               "D2H MB/step meas / plan / rt-sim | rt-sim forward phase s |\n"
               "|---|---|---|---|---|---|---|---|---|\n",
               ref->name.c_str());
  for (const MappingSummary& m : r.mappings) {
    std::string measured = "-", ratio = "-";
    if (r.runs && ref->measured_median > 0) {
      ratio = absl::StrFormat("%.2f", m.measured_median / m.predicted_plan_seconds);
      std::vector<std::string> per_rep;
      for (size_t i = 0; i < std::min(m.rep_medians.size(), ref->rep_medians.size()); ++i) {
        per_rep.push_back(absl::StrFormat("%.3f", m.rep_medians[i] / ref->rep_medians[i]));
      }
      measured = absl::StrFormat("**%.3f** (%s)", m.measured_median / ref->measured_median,
                                 absl::StrJoin(per_rep, ", "));
    }
    std::fprintf(
        out,
        "| %s | %s | %s | %.3f | %.3f | %s | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | %.3f |\n",
        m.name.c_str(), StageCount(m).c_str(), ratio.c_str(),
        m.predicted_plan_seconds / ref->predicted_plan_seconds,
        m.predicted_sim_seconds / ref->predicted_sim_seconds, measured.c_str(), MB(m.h2d_measured),
        MB(m.h2d_plan), MB(m.h2d_sim), MB(m.d2h_measured), MB(m.d2h_plan), MB(m.d2h_sim),
        m.predicted_sim_forward_seconds);
  }
}

}  // namespace

void PrintReport(const BenchResult& r, std::FILE* out) {
  const BenchSetup& s = r.setup;
  const Calibration& c = r.calibration;
  std::fprintf(out,
               "EMULATED paper testbed (%s), %s: CPU worker processes behind token-bucket PCIe "
               "links scaled by %g; %d CPU cores\n",
               s.topology.c_str(), s.gpus.empty() ? "all GPUs" : ("GPUs " + s.gpus).c_str(),
               s.link_scale, s.cores);
  std::fprintf(out,
               "model %s (%.2fM params), seq %lld, batch %lld, microbatch %lld (M = %lld), %lld "
               "steps (%lld warm-up, not timed) x %d reps, threads %d per worker, grad_clip %g, "
               "partitioner %s, units per "
               "stage <= %d, stages requested %d (0: partitioner's choice)\n",
               s.model.c_str(), s.parameters / 1e6, static_cast<long long>(s.seq),
               static_cast<long long>(s.batch), static_cast<long long>(s.microbatch),
               static_cast<long long>(s.batch / s.microbatch), static_cast<long long>(s.steps),
               static_cast<long long>(s.warmup), s.reps, s.threads, s.grad_clip,
               s.partitioner.c_str(), s.units_per_stage, s.num_stages);
  std::fprintf(out,
               "calibration (standalone, %zu + %zu timed steps): step %.3f s at M=1, %.3f s at "
               "M=%lld -> %.4f s per microbatch (%.2f GFLOP/s effective), %.4f s fixed per step "
               "(%.2f s per billion params)\n\n",
               c.small_step_seconds.size(), c.large_step_seconds.size(),
               Median(c.small_step_seconds), Median(c.large_step_seconds),
               static_cast<long long>(c.large_microbatches), c.microbatch_seconds,
               c.effective_flops_per_s / 1e9, c.fixed_seconds, c.fixed_seconds_per_billion_params);
  std::fprintf(out,
               "| variant | schedule | S | GPU order | contention | predicted plan s | "
               "predicted runtime-sim s | measured s median (min-max) | measured / plan | "
               "measured / runtime-sim | "
               "compute s | stall s | optimizer s | uploads on demand | sim busy s |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const MappingSummary& m : r.mappings) {
    std::string measured = "-", ratio_plan = "-", ratio_sim = "-";
    if (r.runs) {
      measured =
          absl::StrFormat("%.3f (%.3f-%.3f)", m.measured_median, m.measured_min, m.measured_max);
      ratio_plan = absl::StrFormat("%.2f", m.measured_median / m.predicted_plan_seconds);
      ratio_sim = absl::StrFormat("%.2f", m.measured_median / m.predicted_sim_seconds);
    }
    std::fprintf(
        out,
        "| %s | %s | %s | %s | %.2f | %.3f | %.3f | %s | %s | %s | %.3f | %.3f | %.3f | %.1f | "
        "%.3f |\n",
        m.name.c_str(), m.schedule.c_str(), StageCount(m).c_str(), Order(m.gpu_order).c_str(),
        m.contention_score, m.predicted_plan_seconds, m.predicted_sim_seconds, measured.c_str(),
        ratio_plan.c_str(), ratio_sim.c_str(), m.compute_median, m.stall_median, m.optimizer_median,
        m.on_demand_median, m.predicted_sim_busy_seconds);
  }
  for (const std::string& why : r.not_run) std::fprintf(out, "not run: %s\n", why.c_str());
  std::fprintf(out, "\n");
  for (const MappingSummary& m : r.mappings) {
    std::fprintf(out, "%s: stages (units)%s %s\n", m.name.c_str(),
                 m.schedule == "roundrobin" ? " forward" : "", Stages(m.stages).c_str());
  }
  PrintScheduleComparison(r, out);
  const MappingSummary* seq = Find(r, "sequential");
  const MappingSummary* cross = Find(r, "cross");
  if (seq != nullptr && cross != nullptr) {
    std::fprintf(out,
                 "speedup sequential / cross: predicted plan %.3fx, predicted runtime-sim "
                 "%.3fx",
                 seq->predicted_plan_seconds / cross->predicted_plan_seconds,
                 seq->predicted_sim_seconds / cross->predicted_sim_seconds);
    if (r.runs) {
      std::fprintf(out,
                   ", measured %.3fx (per rep:", seq->measured_median / cross->measured_median);
      for (size_t i = 0; i < std::min(seq->rep_medians.size(), cross->rep_medians.size()); ++i) {
        std::fprintf(out, " %.3f", seq->rep_medians[i] / cross->rep_medians[i]);
      }
      std::fprintf(out, ")");
    }
    std::fprintf(out, "\n");
  }
  if (r.runs) {
    std::fprintf(out,
                 "load average (1 min): %.2f before the runs, %.2f after; at each run's start:",
                 r.load_before, r.load_after);
    for (const MappingSummary& m : r.mappings) {
      std::fprintf(out, " %s %s;", m.name.c_str(),
                   absl::StrJoin(m.run_load_averages, " ", [](std::string* o, double v) {
                     absl::StrAppendFormat(o, "%.2f", v);
                   }).c_str());
    }
    std::fprintf(out, "\n");
    std::fprintf(out,
                 "losses bit-identical across variants and reps (within each optimizer "
                 "staleness, training mode and precision): %s; synchronous runs equal to the standalone trainer's for the first "
                 "%d steps: %s\n",
                 r.losses_identical ? "yes" : "NO", r.losses_checked_vs_standalone,
                 r.losses_checked_vs_standalone == 0 ? "n/a"
                 : r.losses_match_standalone         ? "yes"
                                                     : "NO");
  }
  for (const MappingSummary& m : r.mappings) {
    std::fprintf(
        out,
        "\n%s: MB per step per emulated link (h2d / d2h): measured, plan sim, "
        "runtime sim (GPU links summed: h2d %.2f / %.2f / %.2f, of which plan weights "
        "%.2f; d2h %.2f / %.2f / %.2f)\n| link | MB/s | h2d meas | h2d plan | h2d rt-sim | "
        "d2h meas | d2h plan | d2h rt-sim |\n|---|---|---|---|---|---|---|---|\n",
        m.name.c_str(), MB(m.h2d_measured), MB(m.h2d_plan), MB(m.h2d_sim), MB(m.weight_upload_plan),
        MB(m.d2h_measured), MB(m.d2h_plan), MB(m.d2h_sim));
    for (const LinkRow& l : m.links) {
      std::fprintf(out, "| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", l.name.c_str(),
                   MB(l.capacity_bytes_per_s), MB(l.h2d_measured), MB(l.h2d_plan), MB(l.h2d_sim),
                   MB(l.d2h_measured), MB(l.d2h_plan), MB(l.d2h_sim));
    }
  }
}

std::string ResultJson(const BenchResult& r) {
  const BenchSetup& s = r.setup;
  const Calibration& c = r.calibration;
  Json j;
  j["emulated"] = true;
  j["setup"] = {{"topology", s.topology},
                {"model", s.model},
                {"parameters", s.parameters},
                {"seq", s.seq},
                {"batch", s.batch},
                {"microbatch", s.microbatch},
                {"steps", s.steps},
                {"warmup_steps", s.warmup},
                {"reps", s.reps},
                {"threads_per_worker", s.threads},
                {"cores", s.cores},
                {"link_scale", s.link_scale},
                {"grad_clip", s.grad_clip},
                {"partitioner", s.partitioner},
                {"units_per_stage", s.units_per_stage},
                {"num_stages", s.num_stages},
                {"gpus", s.gpus}};
  j["calibration"] = {{"small_batch", c.small_batch},
                      {"large_batch", c.large_batch},
                      {"small_step_seconds", c.small_step_seconds},
                      {"large_step_seconds", c.large_step_seconds},
                      {"microbatch_seconds", c.microbatch_seconds},
                      {"fixed_seconds", c.fixed_seconds},
                      {"flops_per_microbatch", c.flops_per_microbatch},
                      {"effective_flops_per_s", c.effective_flops_per_s},
                      {"fixed_seconds_per_billion_params", c.fixed_seconds_per_billion_params}};
  Json maps = Json::array();
  for (const MappingSummary& m : r.mappings) {
    Json links = Json::array();
    for (const LinkRow& l : m.links) {
      links.push_back(
          {{"name", l.name},
           {"bytes_per_second", l.capacity_bytes_per_s},
           {"h2d_bytes_per_step",
            {{"measured", l.h2d_measured}, {"plan_sim", l.h2d_plan}, {"runtime_sim", l.h2d_sim}}},
           {"d2h_bytes_per_step",
            {{"measured", l.d2h_measured}, {"plan_sim", l.d2h_plan}, {"runtime_sim", l.d2h_sim}}}});
    }
    Json stages = Json::array();
    for (const auto& [b, e] : m.stages) stages.push_back({b, e});
    Json jm = {{"name", m.name},
               {"schedule", m.schedule},
               {"optimizer_staleness", m.optimizer_staleness},
               {"dispatch", m.dispatch},
               {"mapper", m.mapper},
               {"gpu_order", m.gpu_order},
               {"stages", stages},
               {"num_backward_stages", m.num_backward_stages},
               {"contention_score", m.contention_score},
               {"gpu_memory_cap_bytes", m.gpu_memory_cap_bytes},
               {"predicted_plan_seconds", m.predicted_plan_seconds},
               {"predicted_runtime_sim_seconds", m.predicted_sim_seconds},
               {"runtime_sim_max_busy_seconds", m.predicted_sim_busy_seconds},
               {"runtime_sim_forward_end_seconds", m.predicted_sim_forward_seconds}};
    if (r.runs) {
      jm["measured"] = {{"step_seconds", m.measured_seconds},
                        {"rep_medians", m.rep_medians},
                        {"median", m.measured_median},
                        {"min", m.measured_min},
                        {"max", m.measured_max},
                        {"compute_seconds_median", m.compute_median},
                        {"stall_seconds_median", m.stall_median},
                        {"optimizer_seconds_median", m.optimizer_median},
                        {"uploads_on_demand_median", m.on_demand_median},
                        {"wall_seconds", m.wall_seconds},
                        {"load_averages", m.run_load_averages},
                        {"losses", m.losses}};
      jm["measured_over_plan"] = m.measured_median / m.predicted_plan_seconds;
      jm["measured_over_runtime_sim"] = m.measured_median / m.predicted_sim_seconds;
    }
    jm["gpu_links_bytes_per_step"] = {
        {"h2d",
         {{"measured", m.h2d_measured},
          {"plan_sim", m.h2d_plan},
          {"runtime_sim", m.h2d_sim},
          {"plan_weight_uploads", m.weight_upload_plan}}},
        {"d2h",
         {{"measured", m.d2h_measured}, {"plan_sim", m.d2h_plan}, {"runtime_sim", m.d2h_sim}}}};
    jm["links"] = links;
    maps.push_back(jm);
  }
  j["mappings"] = maps;
  const MappingSummary* seq = Find(r, "sequential");
  const MappingSummary* cross = Find(r, "cross");
  if (seq != nullptr && cross != nullptr) {
    Json sp = {{"plan", seq->predicted_plan_seconds / cross->predicted_plan_seconds},
               {"runtime_sim", seq->predicted_sim_seconds / cross->predicted_sim_seconds}};
    if (r.runs) sp["measured"] = seq->measured_median / cross->measured_median;
    j["speedup_sequential_over_cross"] = sp;
  }
  if (const MappingSummary* ref = MobiusReference(r); ref != nullptr) {
    Json rel = Json::object();
    for (const MappingSummary& m : r.mappings) {
      Json x = {{"plan", m.predicted_plan_seconds / ref->predicted_plan_seconds},
                {"runtime_sim", m.predicted_sim_seconds / ref->predicted_sim_seconds}};
      if (r.runs) x["measured"] = m.measured_median / ref->measured_median;
      rel[m.name] = x;
    }
    j["step_time_relative_to_mobius"] = rel;
  }
  j["not_run"] = r.not_run;
  j["load_average"] = {{"before", r.load_before}, {"after", r.load_after}};
  if (r.runs) {
    j["losses_identical_across_runs"] = r.losses_identical;
    j["losses_checked_vs_standalone"] = r.losses_checked_vs_standalone;
    j["losses_match_standalone"] = r.losses_match_standalone;
  }
  return j.dump(2);
}

}  // namespace mobius::bench
