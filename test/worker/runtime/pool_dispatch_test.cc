// Pool dispatch (run_config.h, dispatch "pool"): the round-robin pass stream goes to whichever
// worker is ready first. With worker 0's link emulated slow (0.2 s per stage upload) and worker
// 1's free, worker 0 must run fewer passes than the static assignment gives it (pass j on worker
// j mod 2: 5 of 9 per step). Not many fewer: every pass needs the previous one's output, and a
// worker claims its next pass when it starts computing (one ahead, for the prefetch), so in a
// chain of passes the claims mostly alternate (measured 16-18 of 36 instead of 20). Every pass
// runs exactly once per step, and both runs equal the standalone trainer bit for bit
// (bit-exactness over many shapes: pipeline_equivalence_test, pool_*).
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
  int passes[2] = {0, 0};  // per worker, all steps
};

Outcome RunDispatch(const train::TrainerOptions& o, const std::string& dispatch, const std::string& dir) {
  // 3 forward stages and 6 backward stages: 9 passes per step, 5 and 4 per worker if static.
  RunConfig run = MakeRoundRobinRun(o, {0, 2, 4, 6}, {0, 1, 2, 3, 4, 5, 6}, 2);
  run.dispatch = dispatch;
  run.links = {{"gpu0", 5e5}};  // worker 0 only: ~0.2 s per stage upload of this model
  run.rank_links = {{0}, {}};
  Outcome out;
  auto launcher = Launcher::Start(MakeLaunch(run, dir));
  EXPECT_TRUE(launcher.ok()) << launcher.status();
  if (!launcher.ok()) return out;
  LaunchResult result = (*launcher)->Wait();
  EXPECT_TRUE(result.status.ok()) << result.status;
  for (const StepReport& step : result.steps) {
    out.losses.push_back(step.loss);
    out.norms.push_back(step.grad_norm);
    EXPECT_EQ(step.ranks.size(), 2u);
    int total = 0;
    for (const WorkerStepReport& r : step.ranks) {
      out.passes[r.rank] += r.passes;
      total += r.passes;
    }
    EXPECT_EQ(total, 9) << "step " << step.step << ": every pass runs exactly once";
    std::printf("  %s step %lld: worker passes %d / %d, %.3f s\n", dispatch.c_str(),
                static_cast<long long>(step.step), step.ranks[0].passes, step.ranks[1].passes,
                step.step_seconds);
  }
  return out;
}

TEST(PoolDispatchTest, TheReadyWorkerTakesThePassesAndTheResultIsTheSame) {
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
  std::printf("  passes per worker over %lld steps: static %d / %d, pool %d / %d\n",
              static_cast<long long>(o.steps), fixed.passes[0], fixed.passes[1], pool.passes[0],
              pool.passes[1]);
  EXPECT_EQ(fixed.passes[0], 20);
  EXPECT_EQ(fixed.passes[1], 16);
  EXPECT_LT(pool.passes[0], fixed.passes[0]) << "the slow worker took as many passes as static";
  EXPECT_EQ(pool.passes[0] + pool.passes[1], 36);

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
