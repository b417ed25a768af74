// The calibrated model against RoundPipe's published 8x RTX 4090 table, with the sensitivity of
// each row to the assumptions docs/planner.md discusses ("Predicted against published"). Prints
// markdown. Not a test: planner_published_test asserts the table; this shows what moves it.
//
//   build/bin/calibration_bench            (from the repository root, or MOBIUS_SOURCE_DIR set)
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/model/model_config_parse.h"
#include "host/planner/api/published.h"
#include "host/topology/hwloc_source.h"

namespace mobius::planner {
namespace {

std::string Source(const std::string& relative) {
  const char* dir = std::getenv("MOBIUS_SOURCE_DIR");
  return std::string(dir != nullptr ? dir : MOBIUS_SOURCE_DIR) + "/" + relative;
}

struct Variant {
  std::string name;
  std::function<void(SystemSetup&)> apply;
};

int Run() {
  auto loaded =
      topology::MakeHwlocXmlFileSource(Source("test/data/topology/rtx4090_2s_4sw_8gpu.xml"))
          ->Load();
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
    return 1;
  }
  const topology::TopologyFacts facts = topology::Analyze(loaded->topology);
  const std::vector<std::pair<std::string, std::vector<Variant>>> sensitivity = {
      {"Mobius",
       {{"as assumed", [](SystemSetup&) {}},
        {"fp16 accumulate", [](SystemSetup& s) { s.job.fp16_accumulate = true; }},
        {"fp16 accumulate, batch 64",
         [](SystemSetup& s) { s.job.fp16_accumulate = true; s.job.global_batch = 64; }},
        {"fp16 accumulate, batch 16",
         [](SystemSetup& s) { s.job.fp16_accumulate = true; s.job.global_batch = 16; }},
        {"optimizer per stage", [](SystemSetup& s) { s.options.optimizer_after_backward = false; }},
        {"optimizer on 32 cores", [](SystemSetup& s) { s.options.host->optimizer_threads = 32; }}}},
      {"ZeRO-Infinity",
       {{"as configured", [](SystemSetup&) {}},
        {"2 gathers", [](SystemSetup& s) { s.options.zero.gathers = 2; }},
        {"ideal full duplex", [](SystemSetup& s) { s.options.duplex_factor = 1.0; }},
        {"reference model (uploads, no ring)",
         [](SystemSetup& s) { s.options.zero.host_staged_collectives = false; }}}},
      {"RoundPipe",
       {{"as configured", [](SystemSetup&) {}},
        {"pool dispatch", [](SystemSetup& s) { s.options.dispatch = "pool"; }},
        {"staleness 0", [](SystemSetup& s) { s.options.optimizer_staleness = 0; }},
        {"forward stages keep all activations",
         [](SystemSetup& s) { s.options.cost.forward_keeps_boundaries_only = false; }},
        {"no host model", [](SystemSetup& s) { s.options.host.reset(); }},
        // Issue 31's bf16 bar: RoundPipe's configuration with fp32 accumulation (our bf16 mode's
        // GEMM rate); `mobius plan --precision bf16` must reach 0.95x of it.
        {"fp32 accumulate", [](SystemSetup& s) { s.job.fp16_accumulate = false; }}}},
      {"Megatron-PP", {{"as configured", [](SystemSetup&) {}}}},
      {"RoundPipe-sync",
       {{"as configured", [](SystemSetup&) {}},
        {"optimizer on 32 cores", [](SystemSetup& s) { s.options.host->optimizer_threads = 32; }}}},
  };
  std::printf("| model | system | variant | published | predicted | ratio | step s |\n"
              "|---|---|---|---:|---:|---:|---:|\n");
  for (const PublishedRow& row : PublishedRows()) {
    auto config = model::LoadModelConfig(Source("test/data/models/" + row.config_file));
    if (!config.ok()) return 1;
    auto m = model::DescribeModel(*config);
    if (!m.ok()) return 1;
    std::vector<Variant> variants = {{"as configured", [](SystemSetup&) {}}};
    for (const auto& [system, v] : sensitivity) {
      if (system == row.system) variants = v;
    }
    // The flat model of before the calibration (0.5 of the fp32-accumulate peak, no host, ideal
    // duplex) for comparison.
    variants.push_back({"flat 0.5 x 165.2, no host, duplex 1", [](SystemSetup& s) {
                          s.options.use_kernel_model = false;
                          s.job.fp16_accumulate = false;
                          s.options.host.reset();
                          s.options.duplex_factor = 1.0;
                        }});
    for (const Variant& v : variants) {
      absl::StatusOr<SystemSetup> setup = SetupFor(row, loaded->topology);
      if (!setup.ok()) return 1;
      v.apply(*setup);
      setup->options.resident_memory_check = false;
      absl::StatusOr<PlanReport> r =
          MakePlan(*m, loaded->topology, facts, setup->job, setup->options);
      if (!r.ok()) {
        std::printf("| %s | %s | %s | | %s | | |\n", row.model.c_str(), row.system.c_str(),
                    v.name.c_str(), std::string(r.status().message()).substr(0, 80).c_str());
        continue;
      }
      const double pub = row.published_tokens_per_second;
      std::printf("| %s | %s | %s | %s | %.0f | %s | %.2f |\n", row.model.c_str(),
                  row.system.c_str(), v.name.c_str(),
                  pub > 0 ? absl::StrFormat("%.0f", pub).c_str() : "OOM", r->tokens_per_second,
                  pub > 0 ? absl::StrFormat("%.2f", r->tokens_per_second / pub).c_str() : "-",
                  r->step_seconds);
    }
  }
  return 0;
}

}  // namespace
}  // namespace mobius::planner

int main() { return mobius::planner::Run(); }
