// Results of the pipeline benchmark (pipeline_bench.cc): what the runs measured next to what the
// planner and the simulator predicted, summarised per mapping, printed as Markdown tables and
// written as JSON. Every number is labelled EMULATED (CPU processes behind token-bucket links).
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
#include "worker/runtime/launcher.h"

namespace mobius::bench {

struct BenchSetup {
  std::string topology, model, partitioner;
  int64_t parameters = 0, seq = 0, batch = 0, microbatch = 0, steps = 0;
  int reps = 0, threads = 0, units_per_stage = 0, num_stages = 0, cores = 0;
  double link_scale = 0, grad_clip = 0;
};

// One Launcher run of one mapping.
struct MappingRun {
  std::string mapper;
  int rep = 0;
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
  std::string mapper;
  std::vector<int> gpu_order;
  std::vector<std::pair<int, int>> stages;  // unit ranges [begin, end)
  double contention_score = 0;
  int64_t gpu_memory_cap_bytes = 0;
  double predicted_plan_seconds = 0;
  double predicted_sim_seconds = 0;
  double predicted_sim_busy_seconds = 0;  // max over GPUs, runtime-matched simulation
  std::vector<double> measured_seconds;   // timed steps of every rep
  std::vector<double> rep_medians;
  double measured_median = 0, measured_min = 0, measured_max = 0;
  double compute_median = 0, stall_median = 0, optimizer_median = 0;  // max over ranks, median
  double wall_seconds = 0;                                            // all reps
  std::vector<float> losses;                                          // first rep
  std::vector<LinkRow> links;
};

struct BenchResult {
  BenchSetup setup;
  Calibration calibration;
  std::vector<MappingSummary> mappings;
  bool runs = false;                     // false: --plan_only
  bool losses_identical = true;          // every mapping and rep, bit for bit
  int losses_checked_vs_standalone = 0;  // steps compared with the standalone calibration run
  bool losses_match_standalone = true;
};

BenchResult Summarize(const BenchSetup& setup, const Calibration& calibration,
                      const std::vector<Prediction>& predictions,
                      const std::vector<MappingRun>& runs);

void PrintReport(const BenchResult& result, std::FILE* out);
std::string ResultJson(const BenchResult& result);

}  // namespace mobius::bench

#endif  // MOBIUS_BENCH_PIPELINE_BENCH_REPORT_H_
