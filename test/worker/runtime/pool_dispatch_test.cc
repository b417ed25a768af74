// Pool dispatch (run_config.h, dispatch "pool"): the round-robin pass stream goes to whichever
// worker claims the next ticket first (pipeline_worker.cc, RunPoolPasses). Which worker runs what
// depends on timing, so this checks what must hold whatever the timing: every pass of a step runs
// exactly once, the step reports say which worker ran how many, and the run equals the static
// assignment and the standalone trainer bit for bit (many more shapes: pipeline_equivalence_test,
// pool_*). Where the pool wins or loses is measured in bench/pipeline/run_async.sh
// (docs/benchmarks.md): it follows the claims, not the mapping.
#include <cstdio>
#include <string>
#include <vector>

#include "test/worker/runtime/runtime_test_util.h"

namespace mobius::runtime {
namespace {

using testing::MakeLaunch;
using testing::MakeRoundRobinRun;
using testing::TempDir;
using testing::WriteModel;

struct Outcome {
  std::vector<float> losses;
  std::vector<double> norms;
  std::vector<int> passes = std::vector<int>(3, 0);  // per worker, all steps
};

Outcome RunDispatch(const train::TrainerOptions& o, const std::string& dispatch,
                    const std::string& dir) {
  // 3 forward and 6 backward stages: 9 passes per step on 3 workers.
  RunConfig run = MakeRoundRobinRun(o, {0, 2, 4, 6}, {0, 1, 2, 3, 4, 5, 6}, 3);
  run.dispatch = dispatch;
  Outcome out;
  auto launcher = Launcher::Start(MakeLaunch(run, dir));
  EXPECT_TRUE(launcher.ok()) << launcher.status();
  if (!launcher.ok()) return out;
  LaunchResult result = (*launcher)->Wait();
  EXPECT_TRUE(result.status.ok()) << result.status;
  for (const StepReport& step : result.steps) {
    out.losses.push_back(step.loss);
    out.norms.push_back(step.grad_norm);
    EXPECT_EQ(step.ranks.size(), 3u);
    int total = 0;
    for (const WorkerStepReport& r : step.ranks) {
      out.passes[r.rank] += r.passes;
      total += r.passes;
    }
    EXPECT_EQ(total, 9) << dispatch << " step " << step.step << ": every pass runs exactly once";
  }
  return out;
}

TEST(PoolDispatchTest, EveryPassRunsOnceAndTheResultIsTheStaticOnes) {
  TempDir dir;
  train::TrainerOptions o;
  o.model_dir = WriteModel(dir / "model", "llama", 4);
  o.data_path = train::testing::WriteCountingTokens(dir / "data.tok", 256, 24, 70);
  o.steps = 4;
  o.batch = 4;
  o.microbatch = 2;
  o.seq = 16;
  o.lr = 3e-3;
  o.threads = 1;
  const Outcome fixed = RunDispatch(o, "static", dir / "static");
  const Outcome pool = RunDispatch(o, "pool", dir / "pool");
  std::printf("  passes per worker over 4 steps: static %d / %d / %d, pool %d / %d / %d\n",
              fixed.passes[0], fixed.passes[1], fixed.passes[2], pool.passes[0], pool.passes[1],
              pool.passes[2]);
  // Static: pass j of step r on worker (j + 9 (r - 1)) mod 3 = j mod 3 (3 divides 9).
  EXPECT_EQ(fixed.passes, (std::vector<int>{12, 12, 12}));

  std::vector<train::StepStats> want;
  ASSERT_NE(testing::RunStandalone(o, &want), nullptr);
  ASSERT_EQ(pool.losses.size(), want.size());
  ASSERT_EQ(fixed.losses.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(fixed.losses[i], want[i].loss) << "step " << i + 1;
    EXPECT_EQ(pool.losses[i], want[i].loss) << "step " << i + 1;
    EXPECT_EQ(pool.norms[i], want[i].grad_norm) << "step " << i + 1;
  }
}

}  // namespace
}  // namespace mobius::runtime
