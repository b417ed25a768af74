// The resident schedule (S == G) keeps each rank's stage on its device (pipeline_state.h,
// pipeline_resident.cc): after the one-time upload no step moves weights, gradients or optimizer
// state, only boundary activations, their gradients, tokens, targets and norm partials (and, for a
// tied model split across ranks, the shared matrix's head gradient and new bf16 weights); its
// checkpoints resume exactly; a device too small for its ~18 bytes per parameter is refused before
// any step. Bit-exactness against the standalone trainer is in pipeline_equivalence_test.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/model/model_config_parse.h"
#include "test/worker/runtime/runtime_test_util.h"
#include "worker/checkpoint/checkpoint.h"
#include "common/run/store_layout.h"

namespace mobius::runtime {
namespace {

using testing::MakeLaunch;
using testing::MakeRun;
using testing::TempDir;
using testing::WriteModel;

struct Bytes {
  uint64_t h2d = 0, d2h = 0;
};

// What one step of rank `rank` must copy under resident: per microbatch, each of its two passes
// takes its input (tokens or the boundary activation; not the forward of a stage of the head
// alone, which runs nothing) and the head's backward the targets; the forward
// sends its output activation, the backward receives its output gradient and sends its input
// gradient; the norm partials go to the store; a tied matrix split across ranks sends the head's
// fp32 gradient to the embedding's rank and its bf16 weights back.
Bytes ResidentStepBytes(const StoreLayout& l, const RunConfig& run, int stage) {
  const StageRange r = run.stages[stage];
  const int64_t units = static_cast<int64_t>(l.units.size());
  const uint64_t n = static_cast<uint64_t>(run.training.microbatch * run.training.seq);
  const uint64_t act = 2 * l.boundary_elements, dact = 4 * l.boundary_elements;
  Bytes b;
  const uint64_t input = r.begin == 0 ? 4 * n : act;
  const uint64_t forward_input = r.begin == units - 1 ? 0 : input;
  const uint64_t targets = r.end == units ? 4 * n : 0;
  b.h2d = l.num_microbatches * (forward_input + input + targets + (r.end == units ? 0 : dact));
  b.d2h = l.num_microbatches * ((r.end == units ? 0 : act) + (r.begin == 0 ? 0 : dact));
  for (const auto& [name, t] : l.tensors) {
    if (t.owner_unit >= r.begin && t.owner_unit < r.end) b.d2h += 8 * t.num_chunks;
  }
  if (run.stages.size() > 1) {
    for (const units::UnitParam& p : l.units[units - 1].params) {
      if (!p.shared) continue;
      if (r.begin == 0) {
        b.h2d += 4 * p.num_elements;
        b.d2h += 2 * p.num_elements;
      }
      if (r.end == units) {
        b.h2d += 2 * p.num_elements;
        b.d2h += 4 * p.num_elements;
      }
    }
  }
  return b;
}

// The one-time upload: the stage's bf16 weights, fp32 master, m and v.
uint64_t ResidentLoadBytes(const StoreLayout& l, const RunConfig& run, int stage) {
  const StageRange r = run.stages[stage];
  uint64_t bytes = l.stage_weight_bytes(r);
  uint64_t begin = UINT64_MAX, end = 0;
  for (const auto& [name, t] : l.tensors) {
    if (t.owner_unit < r.begin || t.owner_unit >= r.end) continue;
    begin = std::min(begin, t.master);
    end = std::max(end, t.v + 4 * static_cast<uint64_t>(t.num_elements));
  }
  return bytes + (end - begin);
}

class ResidentScheduleTest : public ::testing::Test {
 protected:
  train::TrainerOptions Options(const std::string& family, int layers) {
    train::TrainerOptions o;
    o.model_dir = WriteModel(dir_ / family, family, layers);
    o.data_path = train::testing::WriteCountingTokens(dir_ / "data.tok", 256, 24, 70);
    o.steps = 4;
    o.batch = 4;
    o.microbatch = 2;
    o.seq = 16;
    o.lr = 3e-3;
    o.grad_clip = 1.0;
    o.threads = 1;
    return o;
  }
  StoreLayout Layout(RunConfig run) {
    run.store_path = "unused";
    auto config = model::LoadModelConfig(run.training.model_dir);
    EXPECT_TRUE(config.ok()) << config.status();
    auto layout = MakeStoreLayout(*config, run);
    EXPECT_TRUE(layout.ok()) << layout.status();
    return *layout;
  }
  LaunchResult Launch(const RunConfig& run, const std::string& name) {
    auto l = Launcher::Start(MakeLaunch(run, dir_ / name));
    EXPECT_TRUE(l.ok()) << l.status();
    if (!l.ok()) return {};
    return (*l)->Wait();
  }
  TempDir dir_;
};

// Per rank and step, exactly the activation traffic above; the first step adds the one-time
// upload; the mobius schedule on the same stages uploads every stage's weights every step and
// offloads its gradients. Same losses either way.
TEST_F(ResidentScheduleTest, StepsAfterTheFirstMoveNoWeights) {
  struct Shape {
    std::string family;
    int layers;
    std::vector<int64_t> cuts;
    std::vector<int> ranks;  // stage -> rank
  };
  // GPT-2: the embedding's stage on rank 1, the tied head's on rank 0.
  for (const Shape& shape :
       {Shape{"gpt2", 2, {0, 3, 4}, {1, 0}}, Shape{"llama", 4, {0, 2, 5, 6}, {0, 1, 2}}}) {
    SCOPED_TRACE(shape.family);
    const int g = static_cast<int>(shape.cuts.size()) - 1;
    RunConfig run = MakeRun(Options(shape.family, shape.layers), shape.cuts, g, shape.ranks);
    run.schedule = runtime::Schedule::kResident;
    const StoreLayout layout = Layout(run);
    LaunchResult resident = Launch(run, shape.family + "-resident");
    ASSERT_TRUE(resident.status.ok()) << resident.status;
    run.schedule = runtime::Schedule::kMobius;
    LaunchResult mobius = Launch(run, shape.family + "-mobius");
    ASSERT_TRUE(mobius.status.ok()) << mobius.status;
    ASSERT_EQ(resident.steps.size(), 4u);
    ASSERT_EQ(mobius.steps.size(), 4u);
    for (size_t i = 0; i < resident.steps.size(); ++i) {
      const StepReport& step = resident.steps[i];
      EXPECT_EQ(step.loss, mobius.steps[i].loss) << "step " << i + 1;
      EXPECT_EQ(step.grad_norm, mobius.steps[i].grad_norm) << "step " << i + 1;
      ASSERT_EQ(step.ranks.size(), static_cast<size_t>(g));
      uint64_t weights = 0;
      for (int stage = 0; stage < g; ++stage) {
        const int rank = run.stage_rank[stage];
        SCOPED_TRACE(::testing::Message() << "step " << i + 1 << " rank " << rank);
        const Bytes want = ResidentStepBytes(layout, run, stage);
        const uint64_t load = i == 0 ? ResidentLoadBytes(layout, run, stage) : 0;
        EXPECT_EQ(step.ranks[rank].h2d_bytes, want.h2d + load);
        EXPECT_EQ(step.ranks[rank].d2h_bytes, want.d2h);
        weights += layout.stage_weight_bytes(run.stages[stage]);
      }
      EXPECT_GE(mobius.steps[i].h2d_bytes, weights) << "step " << i + 1;
      if (i > 0) EXPECT_LT(step.h2d_bytes, weights) << "step " << i + 1;
      std::printf("%s step %zu: h2d %llu (mobius %llu), d2h %llu (mobius %llu) bytes\n",
                  shape.family.c_str(), i + 1, static_cast<unsigned long long>(step.h2d_bytes),
                  static_cast<unsigned long long>(mobius.steps[i].h2d_bytes),
                  static_cast<unsigned long long>(step.d2h_bytes),
                  static_cast<unsigned long long>(mobius.steps[i].d2h_bytes));
    }
  }
}

// A resident run stopped (checkpoint and stop) and resumed gives the losses and final state of an
// uninterrupted one, which also writes checkpoints mid-run (device state copied back each time)
// and matches the standalone trainer. GPT-2: the tied head's copy of the embedding on another rank.
TEST_F(ResidentScheduleTest, CheckpointAndResumeMatchesAnUninterruptedRun) {
  train::TrainerOptions o = Options("gpt2", 2);
  o.steps = 8;
  train::TrainerOptions so = o;
  so.checkpoint_dir = dir_ / "standalone";
  std::vector<train::StepStats> expected;
  std::unique_ptr<train::StandaloneTrainer> trainer = testing::RunStandalone(so, &expected);
  ASSERT_NE(trainer, nullptr);

  o.checkpoint_dir = dir_ / "whole";
  o.checkpoint_every = 2;
  RunConfig run = MakeRun(o, {0, 2, 3, 4}, 3);
  run.schedule = runtime::Schedule::kResident;
  LaunchResult whole = Launch(run, "whole");
  ASSERT_TRUE(whole.status.ok()) << whole.status;
  ASSERT_EQ(whole.steps.size(), expected.size());
  // Checkpoints are written while training goes on: each is reported once complete, at its own
  // step or later, the last one with the last step.
  int64_t reported = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(whole.steps[i].loss, expected[i].loss) << "step " << i + 1;
    if (whole.steps[i].checkpoint.empty()) continue;
    const int64_t at = whole.steps[i].checkpoint_step;
    EXPECT_GT(at, reported) << "step " << i + 1;
    EXPECT_LE(at, whole.steps[i].step);
    EXPECT_EQ(at % 2, 0) << "step " << i + 1;
    EXPECT_EQ(whole.steps[i].checkpoint,
              o.checkpoint_dir + "/" + checkpoint::CheckpointDirName(at));
    reported = at;
  }
  EXPECT_EQ(reported, o.steps);
  EXPECT_EQ(checkpoint::CompleteCheckpoints(o.checkpoint_dir).size(), 4u);

  run.training.checkpoint_dir = dir_ / "parts";
  run.training.checkpoint_every = 0;
  auto first = Launcher::Start(MakeLaunch(run, dir_ / "part1"));
  ASSERT_TRUE(first.ok()) << first.status();
  (*first)->RequestCheckpointAndStop(absl::Seconds(60));  // rank 0 answers: stop after step 2
  LaunchResult r1 = (*first)->Wait();
  ASSERT_TRUE(r1.stopped) << r1.status;
  ASSERT_FALSE(r1.steps.empty());
  const int64_t seen = r1.steps.back().step;
  ASSERT_LT(seen, o.steps);
  run.training.resume = true;
  LaunchResult r2 = Launch(run, "part2");
  ASSERT_TRUE(r2.status.ok()) << r2.status;
  ASSERT_EQ(r2.steps.front().step, seen + 1);
  ASSERT_EQ(r2.steps.back().step, o.steps);
  for (const StepReport& step : r2.steps) {
    EXPECT_EQ(step.loss, expected[step.step - 1].loss) << "step " << step.step;
    EXPECT_EQ(step.grad_norm, expected[step.step - 1].grad_norm) << "step " << step.step;
  }

  const auto config = trainer->config();
  auto a = checkpoint::LoadCheckpoint(*checkpoint::LatestCheckpoint(so.checkpoint_dir), config);
  auto b = checkpoint::LoadCheckpoint(*checkpoint::LatestCheckpoint(dir_ / "whole"), config);
  auto c = checkpoint::LoadCheckpoint(*checkpoint::LatestCheckpoint(dir_ / "parts"), config);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(c.ok()) << c.status();
  for (const auto& [name, t] : a->master.tensors) {
    for (const auto* other : {&*b, &*c}) {
      EXPECT_EQ(other->state.step, a->state.step);
      EXPECT_EQ(0,
                std::memcmp(t.data.data(), other->master.at(name).data.data(), 4 * t.data.size()))
          << name;
      EXPECT_EQ(0, std::memcmp(a->adam_m.at(name).data.data(), other->adam_m.at(name).data.data(),
                               4 * t.data.size()))
          << name;
      EXPECT_EQ(0, std::memcmp(a->adam_v.at(name).data.data(), other->adam_v.at(name).data.data(),
                               4 * t.data.size()))
          << name;
    }
  }
}

// A device cap that holds mobius's two stage slots (12 bytes per parameter of the largest stage)
// but not resident's model state (~18 bytes per parameter) runs mobius and refuses resident
// before any step, naming the bytes.
TEST_F(ResidentScheduleTest, CapBelowTheModelStateIsRefusedUpFront) {
  train::TrainerOptions o = Options("llama", 4);
  o.model_dir = WriteModel(dir_ / "wide", "llama", 4, 256, 1024);  // blocks dominate activations
  o.steps = 2;
  RunConfig run = MakeRun(o, {0, 3, 6}, 2);
  const StoreLayout layout = Layout(run);
  uint64_t two_slots = 0, state = 0;
  for (const StageRange& r : run.stages) {
    const uint64_t slot = layout.stage_weight_bytes(r) + layout.stage_grad_bytes(r);
    uint64_t optimizer = 0;
    for (const auto& [name, t] : layout.tensors) {
      if (t.owner_unit >= r.begin && t.owner_unit < r.end) optimizer += 12 * t.num_elements;
    }
    two_slots = std::max(two_slots, 2 * slot);
    state = std::max(state, slot + optimizer);
  }
  const uint64_t cap = two_slots + 900 * 1024;  // + one microbatch's activations and workspace
  ASSERT_LT(cap, state) << "the model is too small to tell the schedules apart";
  run.training.device_memory_bytes = cap;
  LaunchResult mobius = Launch(run, "mobius");
  ASSERT_TRUE(mobius.status.ok()) << mobius.status;
  EXPECT_EQ(mobius.steps.size(), 2u);

  run.schedule = runtime::Schedule::kResident;
  LaunchResult resident = Launch(run, "resident");
  EXPECT_EQ(resident.status.code(), absl::StatusCode::kResourceExhausted) << resident.status;
  for (const char* part : {"schedule resident keeps stage", "18 bytes per parameter",
                           "bytes needed, but the device memory cap is"}) {
    EXPECT_NE(resident.status.message().find(part), std::string::npos) << resident.status;
  }
  EXPECT_TRUE(resident.steps.empty());
}

}  // namespace
}  // namespace mobius::runtime
