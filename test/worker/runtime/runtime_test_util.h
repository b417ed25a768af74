// Helpers for the pipeline runtime tests: a tiny model with a chosen depth, a token file, a run
// config over them, and the standalone trainer's results for the same options (the oracle).
#ifndef MOBIUS_TEST_WORKER_RUNTIME_RUNTIME_TEST_UTIL_H_
#define MOBIUS_TEST_WORKER_RUNTIME_RUNTIME_TEST_UTIL_H_

#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test/testing/paths.h"
#include "test/worker/train/train_test_util.h"
#include "worker/checkpoint/model_init.h"
#include "host/launch/launcher.h"
#include "common/run/run_config.h"
#include "worker/train/standalone_trainer.h"

namespace mobius::runtime::testing {

using train::testing::TempDir;

// `family` may end in "+aux": a mixture of experts trained with its load-balancing loss
// (output_router_logits true, router_aux_loss_coef 0.05).
inline std::string WriteModel(const std::string& dir, const std::string& family, int layers,
                              int64_t vocab = 256, int64_t intermediate = 0) {
  std::filesystem::create_directories(dir);
  const size_t plus = family.find("+aux");
  auto fam = checkpoint::ParseFamily(family.substr(0, plus));
  EXPECT_TRUE(fam.ok());
  auto config = checkpoint::PresetConfig(*fam, "tiny", {.layers = layers,
                                                               .intermediate = intermediate > 0
                                                                   ? std::optional(intermediate)
                                                                   : std::nullopt,
                                                               .vocab = vocab});
  EXPECT_TRUE(config.ok()) << config.status();
  if (plus != std::string::npos) {
    config->moe.output_router_logits = true;
    config->moe.router_aux_loss_coef = 0.05;
  }
  auto params = checkpoint::InitModelParameters(*config, 3);
  absl::Status s = checkpoint::WriteModelDirectory(dir, *config, params, {});
  EXPECT_TRUE(s.ok()) << s;
  return dir;
}

// Stages given as unit boundaries, e.g. {0, 2, 3, 6} -> [0,2) [2,3) [3,6); ranks cycle over
// `workers` (the Mobius mapping) unless `ranks` is given.
inline RunConfig MakeRun(const train::TrainerOptions& training, const std::vector<int64_t>& cuts,
                         int workers, std::vector<int> ranks = {}) {
  RunConfig run;
  run.job_id = "test";
  run.training = training;
  run.backend = "cpu";  // the oracle is the CPU trainer: never pick up a GPU where there is one
  run.num_workers = workers;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    run.stages.push_back({cuts[i], cuts[i + 1]});
    run.stage_rank.push_back(ranks.empty() ? static_cast<int>(i % workers) : ranks[i]);
  }
  return run;
}

// The roundrobin schedule: forward and backward stages as unit boundaries; pass j runs on rank
// j mod workers (the plan's mapping).
inline RunConfig MakeRoundRobinRun(const train::TrainerOptions& training,
                                   const std::vector<int64_t>& forward_cuts,
                                   const std::vector<int64_t>& backward_cuts, int workers) {
  RunConfig run;
  run.job_id = "test";
  run.training = training;
  run.backend = "cpu";
  run.num_workers = workers;
  run.schedule = runtime::Schedule::kRoundRobin;
  for (size_t i = 0; i + 1 < forward_cuts.size(); ++i) {
    run.forward_stages.push_back({forward_cuts[i], forward_cuts[i + 1]});
  }
  for (size_t i = 0; i + 1 < backward_cuts.size(); ++i) {
    run.backward_stages.push_back({backward_cuts[i], backward_cuts[i + 1]});
  }
  const size_t passes = run.forward_stages.size() + run.backward_stages.size();
  for (size_t j = 0; j < passes; ++j) run.pass_rank.push_back(static_cast<int>(j % workers));
  return run;
}

// Runs the standalone trainer (the oracle) to its last step, appending each step's stats to
// `steps`; nullptr (with a test failure recorded) if it cannot be created or a step fails.
inline std::unique_ptr<train::StandaloneTrainer> RunStandalone(
    const train::TrainerOptions& options, std::vector<train::StepStats>* steps) {
  absl::StatusOr<std::unique_ptr<train::StandaloneTrainer>> trainer =
      train::StandaloneTrainer::Create(options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return nullptr;
  while (!(*trainer)->done()) {
    absl::StatusOr<train::StepStats> st = (*trainer)->Step();
    EXPECT_TRUE(st.ok()) << st.status();
    if (!st.ok()) return nullptr;
    steps->push_back(*st);
  }
  return *std::move(trainer);
}

inline LaunchOptions MakeLaunch(const RunConfig& run, const std::string& run_dir) {
  LaunchOptions o;
  o.run = run;
  o.worker_binary = mobius::testing::BinaryPath("bin/mobius-worker");
  o.run_dir = run_dir;
  return o;
}

}  // namespace mobius::runtime::testing

#endif  // MOBIUS_TEST_WORKER_RUNTIME_RUNTIME_TEST_UTIL_H_
