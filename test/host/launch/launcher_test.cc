// The launcher's guarantees (launcher.h): bad input refused before any worker exists, a killed
// worker reported with its rank and signal while every other worker is taken down and the shared
// store removed, a device cap that cannot hold two stages refused before any step, and one that
// fits two stages but not three runs to the end.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <thread>

#include "absl/strings/ascii.h"
#include "test/worker/runtime/runtime_test_util.h"
#include "common/model/model_config_parse.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/train/standalone_trainer.h"
#include "common/run/host_store.h"
#include "common/run/store_layout.h"

namespace mobius::runtime {
namespace {

using testing::MakeLaunch;
using testing::MakeRun;
using testing::TempDir;
using testing::WriteModel;

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    o_.model_dir = WriteModel(dir_ / "model", "llama", 4);
    o_.data_path = train::testing::WriteCountingTokens(dir_ / "data.tok", 256, 24, 70);
    o_.steps = 2;
    o_.batch = 4;
    o_.microbatch = 2;
    o_.seq = 16;
    o_.threads = 1;
  }
  bool Alive(pid_t pid) { return kill(pid, 0) == 0; }
  // Whether this process (the launcher) still holds a job's anonymous store: once no process
  // does, the kernel frees it (host_store.h).
  static bool HoldsAStore() {
    std::error_code ec;
    for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
      const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
      if (target.find(std::string("memfd:") + kStorePrefix) != std::string::npos) return true;
    }
    return false;
  }
  TempDir dir_;
  train::TrainerOptions o_;
};

TEST_F(LauncherTest, RefusesPlansThatDoNotCoverTheModel) {
  auto l = Launcher::Start(MakeLaunch(MakeRun(o_, {0, 2, 4}, 2), dir_ / "run"));  // 6 units
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("has 6 layer units"), std::string::npos) << l.status();
  EXPECT_FALSE(std::filesystem::exists(dir_ / "run/run.json"));
}

TEST_F(LauncherTest, RefusesRoundRobinPartitionsThatDoNotCoverTheModel) {
  // 6 units; the forward partition is fine, the backward one stops at unit 5.
  auto l = Launcher::Start(
      MakeLaunch(testing::MakeRoundRobinRun(o_, {0, 3, 6}, {0, 2, 5}, 2), dir_ / "run"));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("backward_stages cover units [0, 5) but the model has 6"),
            std::string::npos)
      << l.status();
  EXPECT_FALSE(std::filesystem::exists(dir_ / "run/run.json"));
  // More workers than passes: a rank would idle.
  l = Launcher::Start(
      MakeLaunch(testing::MakeRoundRobinRun(o_, {0, 6}, {0, 6}, 3), dir_ / "run"));
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("rank 2 runs no pass"), std::string::npos) << l.status();
  EXPECT_FALSE(std::filesystem::exists(dir_ / "run/run.json"));
}

TEST_F(LauncherTest, RefusesAGpuWithoutAStage) {
  auto l = Launcher::Start(MakeLaunch(MakeRun(o_, {0, 3, 6}, 3), dir_ / "run"));
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("rank 2 runs no stage"), std::string::npos) << l.status();
}

TEST_F(LauncherTest, RefusesMissingModelAndShortData) {
  train::TrainerOptions o = o_;
  o.model_dir = dir_ / "nope";
  auto l = Launcher::Start(MakeLaunch(MakeRun(o, {0, 3, 6}, 2), dir_ / "run"));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(l.status().message().find("training.model_dir"), std::string::npos) << l.status();

  o = o_;
  o.data_path = train::testing::WriteCountingTokens(dir_ / "short.tok", 256, 1, 20);
  l = Launcher::Start(MakeLaunch(MakeRun(o, {0, 3, 6}, 2), dir_ / "run"));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("training.data_path"), std::string::npos) << l.status();
}

// A job needing more host memory than this machine has now is refused before anything starts:
// no run.json, no store, no worker.
TEST_F(LauncherTest, RefusesAJobThatNeedsMoreHostMemoryThanThisMachineHas) {
  LaunchOptions lo = MakeLaunch(MakeRun(o_, {0, 2, 4, 6}, 2), dir_ / "run");
  lo.host_bytes_needed = std::numeric_limits<int64_t>::max() / 4;
  auto l = Launcher::Start(lo);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kResourceExhausted) << l.status();
  const std::string message(l.status().message());
  EXPECT_NE(message.find("host memory"), std::string::npos) << message;
  // "MemAvailable" today: what the machine has available, whatever the capitalisation.
  EXPECT_NE(absl::AsciiStrToLower(message).find("available"), std::string::npos) << message;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "run/run.json"));
  EXPECT_FALSE(HoldsAStore());
}

TEST_F(LauncherTest, KilledWorkerTakesTheJobDownCleanly) {
  train::TrainerOptions o = o_;
  o.steps = 100000;  // runs until killed
  auto l = Launcher::Start(MakeLaunch(MakeRun(o, {0, 1, 2, 3, 4, 5, 6}, 3), dir_ / "run"));
  ASSERT_TRUE(l.ok()) << l.status();
  const std::vector<pid_t> pids = (*l)->worker_pids();
  ASSERT_EQ((*l)->store_path().rfind("memfd:", 0), 0u) << (*l)->store_path();
  EXPECT_TRUE(HoldsAStore());
  ASSERT_EQ(pids.size(), 3u);
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    kill(pids[1], SIGKILL);
  });
  const auto start = std::chrono::steady_clock::now();
  LaunchResult r = (*l)->Wait();
  killer.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("rank 1"), std::string::npos) << r.status;
  EXPECT_NE(r.status.message().find("signal 9 (SIGKILL)"), std::string::npos) << r.status;
  EXPECT_LT(seconds, 10.0);
  for (pid_t p : pids) EXPECT_FALSE(Alive(p)) << "worker " << p << " survived";
  EXPECT_FALSE(HoldsAStore());
}

// The watchdog: a SIGSTOPped rank stops heartbeating (the heartbeat timeout names it); with the
// heartbeat check off, the step timeout catches the same hang. Both tear everything down.
TEST_F(LauncherTest, WatchdogCatchesAFrozenRankAndAHungJob) {
  for (const bool heartbeat : {true, false}) {
    SCOPED_TRACE(heartbeat ? "heartbeat timeout" : "step timeout");
    train::TrainerOptions o = o_;
    o.steps = 100000;
    LaunchOptions lo = MakeLaunch(MakeRun(o, {0, 2, 4, 6}, 2),
                                  dir_ / (heartbeat ? "run-hb" : "run-step"));
    lo.heartbeat_timeout = heartbeat ? absl::Seconds(2) : absl::ZeroDuration();
    // In the heartbeat case the step timeout is a backstop (a worker that never heartbeats must
    // fail the test, not hang it); the heartbeat must fire long before.
    lo.step_timeout = heartbeat ? absl::Seconds(60) : absl::Seconds(3);
    int64_t steps_seen = 0;
    lo.on_step = [&](const StepReport&) { ++steps_seen; };
    auto l = Launcher::Start(lo);
    ASSERT_TRUE(l.ok()) << l.status();
    const std::vector<pid_t> pids = (*l)->worker_pids();
    std::thread freezer([&] {
      // After the first steps (so the worker has heartbeated), freeze rank 1.
      for (int i = 0; i < 200 && steps_seen < 2; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      kill(pids[1], SIGSTOP);
    });
    LaunchResult r = (*l)->Wait();
    freezer.join();
    ASSERT_EQ(r.status.code(), absl::StatusCode::kInternal) << r.status;
    if (heartbeat) {
      EXPECT_NE(r.status.message().find("rank 1"), std::string::npos) << r.status;
      EXPECT_NE(r.status.message().find("no heartbeat"), std::string::npos) << r.status;
    } else {
      EXPECT_NE(r.status.message().find("no step completed"), std::string::npos) << r.status;
      EXPECT_NE(r.status.message().find("last step"), std::string::npos) << r.status;
    }
    for (pid_t p : pids) EXPECT_FALSE(Alive(p)) << "worker " << p << " survived";
    EXPECT_FALSE(HoldsAStore());
  }
}

TEST_F(LauncherTest, CancelStopsEveryWorker) {
  train::TrainerOptions o = o_;
  o.steps = 100000;
  auto l = Launcher::Start(MakeLaunch(MakeRun(o, {0, 2, 4, 6}, 2), dir_ / "run"));
  ASSERT_TRUE(l.ok()) << l.status();
  const std::vector<pid_t> pids = (*l)->worker_pids();
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    (*l)->Cancel();
  });
  LaunchResult r = (*l)->Wait();
  canceller.join();
  EXPECT_EQ(r.status.code(), absl::StatusCode::kCancelled) << r.status;
  EXPECT_TRUE(r.cancelled);
  for (pid_t p : pids) EXPECT_FALSE(Alive(p));
}

TEST_F(LauncherTest, DeviceCapBelowTwoStagesIsRefusedBeforeAnyStep) {
  train::TrainerOptions o = o_;
  o.device_memory_bytes = 64 << 10;  // far below two stage slots
  auto l = Launcher::Start(MakeLaunch(MakeRun(o, {0, 1, 2, 3, 4, 5, 6}, 2), dir_ / "run"));
  ASSERT_TRUE(l.ok()) << l.status();
  LaunchResult r = (*l)->Wait();
  EXPECT_EQ(r.status.code(), absl::StatusCode::kResourceExhausted) << r.status;
  EXPECT_NE(r.status.message().find("cannot hold two stage slots"), std::string::npos) << r.status;
  EXPECT_TRUE(r.steps.empty());
}

TEST_F(LauncherTest, CapForTwoStagesButNotThreeRuns) {
  // Rank 0 runs three decoder blocks (stages 1, 2, 3), rank 1 the embedding, a block and the head.
  // Wide MLPs make a block's weights dominate the activations.
  o_.model_dir = WriteModel(dir_ / "wide", "llama", 4, 256, 1024);
  RunConfig run = MakeRun(o_, {0, 1, 2, 3, 4, 5, 6}, 2, {1, 0, 0, 0, 1, 1});
  run.store_path = "unused";
  auto config = model::LoadModelConfig(o_.model_dir);
  ASSERT_TRUE(config.ok());
  auto layout = MakeStoreLayout(*config, run);
  ASSERT_TRUE(layout.ok()) << layout.status();
  auto stage_bytes = [&](int s) {
    return layout->stage_weight_bytes(run.stages[s]) + layout->stage_grad_bytes(run.stages[s]);
  };
  const uint64_t two = 2 * std::max({stage_bytes(1), stage_bytes(2), stage_bytes(3)});
  const uint64_t three = stage_bytes(1) + stage_bytes(2) + stage_bytes(3);
  const uint64_t cap = two + 900 * 1024;  // + one microbatch's activations and workspace
  ASSERT_LT(cap, three) << "the model is too small to tell two stages from three";
  run.store_path.clear();
  run.training.device_memory_bytes = cap;
  auto l = Launcher::Start(MakeLaunch(run, dir_ / "run"));
  ASSERT_TRUE(l.ok()) << l.status();
  LaunchResult r = (*l)->Wait();
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.steps.size(), 2u);
}

// Checkpoint and stop (the daemon's shutdown): the workers finish a step, write a checkpoint and
// exit; a run resumed from it ends with exactly the weights of a run never stopped.
TEST_F(LauncherTest, CheckpointAndStopThenResumeMatchesAnUninterruptedRun) {
  train::TrainerOptions o = o_;
  o.steps = 30;
  o.lr = 3e-3;
  o.checkpoint_dir = dir_ / "ckpt";
  o.checkpoint_every = 0;  // only the end, and the stop
  auto l = Launcher::Start(MakeLaunch(MakeRun(o, {0, 1, 2, 3, 4, 5, 6}, 2), dir_ / "run1"));
  ASSERT_TRUE(l.ok()) << l.status();
  int64_t seen = 0;
  // Asked at once: rank 0 answers at the end of its first step, so the run stops after step 2.
  (*l)->RequestCheckpointAndStop(absl::Seconds(60));
  LaunchResult r = (*l)->Wait();
  ASSERT_TRUE(r.stopped) << r.status;
  EXPECT_EQ(r.status.code(), absl::StatusCode::kAborted);
  ASSERT_FALSE(r.steps.empty());
  seen = r.steps.back().step;
  ASSERT_LT(seen, 30) << "the run ended before the stop request";
  EXPECT_FALSE(r.steps.back().checkpoint.empty());
  auto latest = checkpoint::LatestCheckpoint(o.checkpoint_dir);
  ASSERT_TRUE(latest.ok());
  EXPECT_NE(latest->find(checkpoint::CheckpointDirName(seen)), std::string::npos) << *latest;

  o.resume = true;
  auto l2 = Launcher::Start(MakeLaunch(MakeRun(o, {0, 1, 2, 3, 4, 5, 6}, 2), dir_ / "run2"));
  ASSERT_TRUE(l2.ok()) << l2.status();
  LaunchResult r2 = (*l2)->Wait();
  ASSERT_TRUE(r2.status.ok()) << r2.status;
  ASSERT_EQ(r2.steps.front().step, seen + 1);
  EXPECT_EQ(r2.steps.back().step, 30);

  train::TrainerOptions so = o_;
  so.steps = 30;
  so.lr = 3e-3;
  std::vector<train::StepStats> steps;
  std::unique_ptr<train::StandaloneTrainer> trainer = testing::RunStandalone(so, &steps);
  ASSERT_NE(trainer, nullptr);
  auto resumed = checkpoint::LoadCheckpoint(*checkpoint::LatestCheckpoint(o.checkpoint_dir),
                                            trainer->config());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  for (const auto& [name, t] : trainer->master().tensors) {
    EXPECT_EQ(0, std::memcmp(t.data.data(), resumed->master.at(name).data.data(),
                             4 * t.data.size()))
        << name;
  }
}

// Pool dispatch (passes to the next free worker): rank 0 need not run the next step's first
// pass, so the others wait for its stop decision (StoreLayout::decided_word) before ending a
// step; a stopped and resumed run still ends exactly where an uninterrupted one does.
TEST_F(LauncherTest, PoolDispatchCheckpointAndStopThenResumeMatchesAnUninterruptedRun) {
  train::TrainerOptions o = o_;
  o.steps = 20;
  o.lr = 3e-3;
  o.checkpoint_dir = dir_ / "ckpt";
  auto make = [&](const train::TrainerOptions& opts, const std::string& run_dir) {
    RunConfig run = testing::MakeRoundRobinRun(opts, {0, 3, 6}, {0, 2, 4, 6}, 3);
    run.dispatch = "pool";
    return MakeLaunch(run, run_dir);
  };
  auto l = Launcher::Start(make(o, dir_ / "run1"));
  ASSERT_TRUE(l.ok()) << l.status();
  (*l)->RequestCheckpointAndStop(absl::Seconds(60));
  LaunchResult r = (*l)->Wait();
  ASSERT_TRUE(r.stopped) << r.status;
  ASSERT_FALSE(r.steps.empty());
  const int64_t seen = r.steps.back().step;
  ASSERT_LT(seen, 20) << "the run ended before the stop request";
  EXPECT_FALSE(r.steps.back().checkpoint.empty());

  o.resume = true;
  auto l2 = Launcher::Start(make(o, dir_ / "run2"));
  ASSERT_TRUE(l2.ok()) << l2.status();
  LaunchResult r2 = (*l2)->Wait();
  ASSERT_TRUE(r2.status.ok()) << r2.status;
  ASSERT_EQ(r2.steps.front().step, seen + 1);
  EXPECT_EQ(r2.steps.back().step, 20);

  train::TrainerOptions so = o_;
  so.steps = 20;
  so.lr = 3e-3;
  std::vector<train::StepStats> steps;
  std::unique_ptr<train::StandaloneTrainer> trainer = testing::RunStandalone(so, &steps);
  ASSERT_NE(trainer, nullptr);
  auto resumed = checkpoint::LoadCheckpoint(*checkpoint::LatestCheckpoint(o.checkpoint_dir),
                                            trainer->config());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  for (const auto& [name, t] : trainer->master().tensors) {
    EXPECT_EQ(0, std::memcmp(t.data.data(), resumed->master.at(name).data.data(),
                             4 * t.data.size()))
        << name;
  }
}

// Optimizer staleness 1: a scheduled checkpoint is a sync step, so a run that stops there and is
// resumed continues exactly like the reference that went straight through (the standalone trainer
// with the same staleness and checkpoint_every). The store holds two bf16 weight copies.
TEST_F(LauncherTest, StalenessResumeFromAScheduledCheckpointMatchesTheReference) {
  train::TrainerOptions o = o_;
  o.lr = 3e-3;
  o.schedule = "constant";  // the first run's 4 steps end where the 8-step run checkpoints
  o.optimizer_staleness = 1;
  o.checkpoint_every = 2;
  o.checkpoint_dir = dir_ / "ckpt";
  o.steps = 4;
  const std::vector<int64_t> cuts = {0, 1, 2, 3, 4, 5, 6};
  auto l = Launcher::Start(MakeLaunch(MakeRun(o, cuts, 2), dir_ / "run1"));
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_TRUE((*l)->Wait().status.ok());
  o.steps = 8;
  o.resume = true;
  auto l2 = Launcher::Start(MakeLaunch(MakeRun(o, cuts, 2), dir_ / "run2"));
  ASSERT_TRUE(l2.ok()) << l2.status();
  LaunchResult r2 = (*l2)->Wait();
  ASSERT_TRUE(r2.status.ok()) << r2.status;
  ASSERT_EQ(r2.steps.front().step, 5);

  train::TrainerOptions so = o;
  so.resume = false;
  so.checkpoint_dir = dir_ / "reference";
  std::vector<train::StepStats> want;
  std::unique_ptr<train::StandaloneTrainer> trainer = testing::RunStandalone(so, &want);
  ASSERT_NE(trainer, nullptr);
  ASSERT_EQ(want.size(), 8u);
  for (size_t i = 0; i < r2.steps.size(); ++i) {
    EXPECT_EQ(r2.steps[i].loss, want[4 + i].loss) << "step " << 5 + i;
    EXPECT_EQ(r2.steps[i].grad_norm, want[4 + i].grad_norm) << "step " << 5 + i;
  }
  auto resumed = checkpoint::LoadCheckpoint(*checkpoint::LatestCheckpoint(o.checkpoint_dir),
                                            trainer->config());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  for (const auto& [name, t] : trainer->master().tensors) {
    EXPECT_EQ(0, std::memcmp(t.data.data(), resumed->master.at(name).data.data(),
                             4 * t.data.size()))
        << name;
  }
}

TEST(HostStoreTest, CleansOrphansOnly) {
  TempDir dir;
  const std::string live = dir / (std::string(kStorePrefix) + "live");
  auto store = HostStore::Create(live, 1 << 16);
  ASSERT_TRUE(store.ok()) << store.status();
  // An orphan: a store whose creator is gone (a child that exits right away).
  const std::string orphan = dir / (std::string(kStorePrefix) + "orphan");
  const pid_t child = fork();
  if (child == 0) {
    auto s = HostStore::Create(orphan, 1 << 16);
    _exit(s.ok() ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  auto removed = CleanOrphanStores(dir / "");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_FALSE(std::filesystem::exists(orphan));
}

}  // namespace
}  // namespace mobius::runtime
