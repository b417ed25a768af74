// Results of the pipeline benchmark (pipeline_bench.cc): what the runs measured next to what the
// planner and the simulator predicted, summarised per variant (a schedule with a mapper, named by
// the mapper when mappers are compared, by the schedule when schedules are), with the variants'
// ratios (sequential / cross; every schedule / mobius), printed as Markdown tables and written as
// JSON. Every number is labelled EMULATED (CPU processes behind token-bucket links).
//
// Value types and pure functions.
#ifndef MOBIUS_BENCH_PIPELINE_BENCH_REPORT_H_
#define MOBIUS_BENCH_PIPELINE_BENCH_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/pipeline/bench_predict.h"
#include "bench/pipeline/bench_setup.h"
#include "host/launch/launcher.h"

namespace mobius::bench {

struct BenchSetup {
  std::string topology, model, partitioner;
  std::string gpus;  // "0,1,2" when a subset was granted; empty: all
  int64_t parameters = 0, seq = 0, batch = 0, microbatch = 0, steps = 0;
  int64_t warmup = 1;  // steps of each run not timed (the first includes start-up)
  int reps = 0, threads = 0, units_per_stage = 0, num_stages = 0, cores = 0;
  double link_scale = 0, grad_clip = 0;
};

// One Launcher run of one variant.
struct MappingRun {
  std::string name;  // Prediction::name
  int rep = 0;
  double load_average = 0;  // 1-minute, when the run started
  double wall_seconds = 0;  // Start .. Wait returned
  std::vector<runtime::StepReport> steps;
  std::vector<runtime::LinkTraffic> links;  // whole run
  std::vector<std::vector<int>> rank_links;
  std::vector<double> link_capacity;  // bytes/s per emulated link (scaled)
};

struct LinkRow {
  std::string name;
  double capacity_bytes_per_s = 0;
  double h2d_measured = 0, d2h_measured = 0;  // bytes per step
  double h2d_plan = 0, d2h_plan = 0;          // MakePlan's simulation
  double h2d_sim = 0, d2h_sim = 0;            // the runtime-matched simulation
};

struct MappingSummary {
  std::string name, schedule, mapper;
  int optimizer_staleness = 0;      // the run's training.optimizer_staleness
  std::string dispatch = "static";  // roundrobin's dispatch
  int num_backward_stages = 0;  // roundrobin: S_B (stages holds the S_F forward stages)
  std::vector<int> gpu_order;
  std::vector<std::pair<int, int>> stages;  // unit ranges [begin, end)
  double contention_score = 0;
  int64_t gpu_memory_cap_bytes = 0;
  double predicted_plan_seconds = 0;
  double predicted_sim_seconds = 0;
  double predicted_sim_busy_seconds = 0;     // max over GPUs, runtime-matched simulation
  double predicted_sim_forward_seconds = 0;  // runtime-matched simulation: last forward pass end
  std::vector<double> measured_seconds;      // timed steps of every rep
  std::vector<double> rep_medians;
  std::vector<double> run_load_averages;  // 1-minute load average at each run's start
  double measured_median = 0, measured_min = 0, measured_max = 0;
  double compute_median = 0, stall_median = 0, optimizer_median = 0;  // max over ranks, median
  double on_demand_median = 0;  // uploads on demand per step, all ranks (median over steps)
  double wall_seconds = 0;                                            // all reps
  std::vector<float> losses;                                          // first rep
  std::vector<LinkRow> links;
  // Per step over the GPUs' own links (every copy crosses exactly one): measured, plan,
  // runtime-sim.
  double h2d_measured = 0, h2d_plan = 0, h2d_sim = 0;
  double d2h_measured = 0, d2h_plan = 0, d2h_sim = 0;
  double weight_upload_plan = 0;  // the plan's weight uploads (part of h2d_plan)
};

struct BenchResult {
  BenchSetup setup;
  Calibration calibration;
  std::vector<MappingSummary> mappings;
  bool runs = false;                     // false: --plan_only
  bool losses_identical = true;          // every mapping and rep (per staleness), bit for bit
  int losses_checked_vs_standalone = 0;  // steps compared with the standalone calibration run
  bool losses_match_standalone = true;
  std::vector<std::string> not_run;  // variants whose plan failed (e.g. resident does not fit)
  double load_before = 0, load_after = 0;  // 1-minute load average around the runs
};

BenchResult Summarize(const BenchSetup& setup, const Calibration& calibration,
                      const std::vector<Prediction>& predictions,
                      const std::vector<MappingRun>& runs);

void PrintReport(const BenchResult& result, std::FILE* out);
std::string ResultJson(const BenchResult& result);

}  // namespace mobius::bench

#endif  // MOBIUS_BENCH_PIPELINE_BENCH_REPORT_H_
