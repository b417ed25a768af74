// A worker's two stage slots are one allocation each, sized for its largest pass's weights and
// gradients together (pipeline_state.h Slot): a roundrobin rank that runs a wide forward stage
// (weights only) and a narrow backward stage (weights and gradients) needs 2 max(W + G), not
// 2 (max W + max G), which is what the planner's kRuntime memory model counts
// (host/planner/estimator.cc). Under a device cap between the two the run goes through and
// equals the standalone trainer bit for bit; the new weights of a range that reach into the
// previous range's gradients wait for their download (every step here: the wide forward stage
// follows the backward one in the same slot).
#include <algorithm>
#include <string>
#include <vector>

#include "common/model/model_config_parse.h"
#include "common/run/store_layout.h"
#include "test/worker/runtime/runtime_test_util.h"

namespace mobius::runtime {
namespace {

using testing::MakeLaunch;
using testing::MakeRoundRobinRun;
using testing::TempDir;
using testing::WriteModel;

TEST(SlotMemoryTest, WideForwardAndNarrowBackwardShareTwoSlots) {
  TempDir dir;
  train::TrainerOptions o;
  o.model_dir = WriteModel(dir / "wide", "llama", 4, 256, 1024);  // blocks dominate activations
  o.data_path = train::testing::WriteCountingTokens(dir / "data.tok", 256, 24, 70);
  o.steps = 3;
  o.batch = 4;
  o.microbatch = 2;
  o.seq = 16;
  o.lr = 3e-3;
  o.grad_clip = 1.0;
  o.threads = 1;
  // Units: embedding, 4 blocks, head. Passes: F0 [0, 6) on rank 0, B2 [4, 6) on rank 1, B1 [2, 4)
  // on rank 0, B0 [0, 2) on rank 1.
  RunConfig run = MakeRoundRobinRun(o, {0, 6}, {0, 2, 4, 6}, 2);
  run.store_path = "unused";
  auto config = model::LoadModelConfig(o.model_dir);
  ASSERT_TRUE(config.ok()) << config.status();
  auto layout = MakeStoreLayout(*config, run);
  ASSERT_TRUE(layout.ok()) << layout.status();
  uint64_t arena = 0, max_w = 0, max_g = 0;
  for (int rank = 0; rank < 2; ++rank) {
    for (const Pass& p : PassesOfRank(run, rank)) {
      const StageRange& r = p.backward ? run.backward_stages[p.stage] : run.forward_stages[p.stage];
      const uint64_t w = layout->stage_weight_bytes(r);
      const uint64_t g = p.backward ? layout->stage_grad_bytes(r) : 0;
      arena = std::max(arena, w + g);
      max_w = std::max(max_w, w);
      max_g = std::max(max_g, g);
    }
  }
  const uint64_t cap = 2 * arena + 900 * 1024;  // + one microbatch's activations and workspace
  ASSERT_LT(cap, 2 * (max_w + max_g)) << "the model is too small to tell the sizings apart";
  run.training.device_memory_bytes = cap;
  run.store_path.clear();

  std::vector<train::StepStats> want;
  ASSERT_NE(testing::RunStandalone(o, &want), nullptr);
  auto launcher = Launcher::Start(MakeLaunch(run, dir / "run"));
  ASSERT_TRUE(launcher.ok()) << launcher.status();
  LaunchResult result = (*launcher)->Wait();
  ASSERT_TRUE(result.status.ok()) << result.status;
  ASSERT_EQ(result.steps.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(result.steps[i].loss, want[i].loss) << "step " << i + 1;
    EXPECT_EQ(result.steps[i].grad_norm, want[i].grad_norm) << "step " << i + 1;
  }
}

}  // namespace
}  // namespace mobius::runtime
