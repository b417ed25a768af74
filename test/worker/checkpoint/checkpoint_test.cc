// Training checkpoints: bit-exact save/load, bit-exact resume of reference training, atomicity
// (LatestCheckpoint ignores incomplete ones) and clear errors for corrupted or mismatched files.
#include "worker/checkpoint/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "test/worker/checkpoint/test_util.h"
#include "worker/checkpoint/model_init.h"
#include "worker/checkpoint/tensor_files.h"
#include "worker/reference/adamw.h"
#include "worker/reference/model.h"

namespace mobius::checkpoint {
namespace {

namespace fs = std::filesystem;
using model::Family;
using testing::ExpectBitEqual;
using testing::ReadAll;
using testing::TempDir;
using testing::WriteAll;

// A tiny training run whose batches come from an RNG, so resuming must restore the RNG too.
struct TrainingRun {
  reference::ReferenceModel model;
  reference::AdamW adamw;
  std::mt19937_64 data_rng;
  int64_t step = 0;

  static reference::AdamWOptions Options() {
    reference::AdamWOptions o;
    o.lr = 3e-3;
    o.weight_decay = 0.1;
    o.decay = [](const std::string& name) { return !name.ends_with(".bias"); };
    return o;
  }

  float TrainStep() {
    const int64_t B = 2, T = 8, V = model.config().vocab_size;
    std::vector<int32_t> tokens(B * T + 1);
    // Only 8 distinct tokens: a unigram the model learns within a few steps.
    for (auto& x : tokens) x = static_cast<int32_t>(data_rng() % std::min<int64_t>(8, V));
    std::vector<int32_t> inputs(tokens.begin(), tokens.end() - 1), targets(tokens.begin() + 1,
                                                                           tokens.end());
    const float loss = *model.Forward(inputs.data(), targets.data(), B, T);
    model.ZeroGrad();
    EXPECT_TRUE(model.Backward().ok());
    adamw.Step(&model.params(), model.grads());
    ++step;
    return loss;
  }

  TrainingState State() const {
    std::ostringstream rng;
    rng << data_rng;
    return TrainingState{step, step, rng.str(), {{"batches_consumed", std::to_string(step)}}};
  }
};

model::ModelConfig Config(Family family) {
  auto config = PresetConfig(family, "tiny", {.vocab = 96, .max_positions = 32});
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

TrainingRun FreshRun(const model::ModelConfig& config) {
  return TrainingRun{*reference::ReferenceModel::Create(config, InitModelParameters(config, 42)),
             reference::AdamW(TrainingRun::Options()), std::mt19937_64(9)};
}

class ResumeTest : public ::testing::TestWithParam<Family> {};

TEST_P(ResumeTest, SaveLoadRoundTripAndResumeAreBitExact) {
  const model::ModelConfig config = Config(GetParam());
  constexpr int kTotal = 6, kBreak = 3;
  TrainingRun straight = FreshRun(config);
  std::vector<float> straight_losses;
  for (int i = 0; i < kTotal; ++i) straight_losses.push_back(straight.TrainStep());

  TrainingRun first = FreshRun(config);
  std::vector<float> losses;
  for (int i = 0; i < kBreak; ++i) losses.push_back(first.TrainStep());
  TempDir root;
  auto saved = SaveCheckpoint(root.path(), config,
                              {&first.model.params(), &first.adamw.m(), &first.adamw.v()},
                              first.State(), {});
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(*saved, root / "checkpoint-00000003");

  // A new process: find, load, rebuild model, optimizer and data order from the checkpoint only.
  auto latest = LatestCheckpoint(root.path());
  ASSERT_TRUE(latest.ok()) << latest.status();
  auto loaded = LoadCheckpoint(*latest, config);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectBitEqual(loaded->master, first.model.params(), "master");
  ExpectBitEqual(loaded->adam_m, first.adamw.m(), "m");
  ExpectBitEqual(loaded->adam_v, first.adamw.v(), "v");
  EXPECT_EQ(loaded->state.step, kBreak);
  EXPECT_EQ(loaded->state.lr_step, kBreak);
  EXPECT_EQ(loaded->state.rng_state, first.State().rng_state);
  EXPECT_EQ(loaded->state.data_position.at("batches_consumed"), "3");

  TrainingRun resumed = FreshRun(config);
  resumed.model = *reference::ReferenceModel::Create(config, std::move(loaded->master));
  resumed.adamw.RestoreState(loaded->state.step, std::move(loaded->adam_m),
                             std::move(loaded->adam_v));
  std::istringstream(loaded->state.rng_state) >> resumed.data_rng;
  resumed.step = loaded->state.step;
  for (int i = kBreak; i < kTotal; ++i) losses.push_back(resumed.TrainStep());

  ASSERT_EQ(losses.size(), straight_losses.size());
  for (int i = 0; i < kTotal; ++i) {
    EXPECT_EQ(std::memcmp(&losses[i], &straight_losses[i], sizeof(float)), 0)
        << "step " << i + 1 << ": " << losses[i] << " vs " << straight_losses[i];
  }
  EXPECT_LT(straight_losses.back(), straight_losses.front());  // it does train
  ExpectBitEqual(resumed.model.params(), straight.model.params(), "params after resume");
  ExpectBitEqual(resumed.adamw.m(), straight.adamw.m(), "m after resume");
  EXPECT_EQ(resumed.adamw.step(), straight.adamw.step());
}

INSTANTIATE_TEST_SUITE_P(Families, ResumeTest,
                         ::testing::Values(Family::kGpt2, Family::kLlama, Family::kQwen3),
                         [](const auto& info) { return model::FamilyName(info.param); });

class CheckpointTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::string> Save(int64_t step, SaveOptions options = {}) {
    return SaveCheckpoint(root_.path(), config_, {&params_, &m_, &v_},
                          TrainingState{step, step, "rng", {}}, options);
  }
  model::ModelConfig config_ = Config(Family::kLlama);
  reference::Parameters params_ = InitModelParameters(config_, 1);
  reference::Parameters m_ = InitModelParameters(config_, 2);
  reference::Parameters v_ = InitModelParameters(config_, 3);
  TempDir root_;
};

TEST_F(CheckpointTest, DirectoryIsAHuggingFaceModel) {
  auto dir = Save(5);
  ASSERT_TRUE(dir.ok()) << dir.status();
  for (const char* f : {"config.json", "model.safetensors", "master.safetensors",
                        "optimizer_m.safetensors", "optimizer_v.safetensors", "trainer_state.json",
                        "DONE"}) {
    EXPECT_TRUE(fs::exists(*dir + "/" + f)) << f;
  }
  auto model = ReadModelDirectory(*dir);  // config.json + bf16 model.safetensors
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->config.num_kv_heads, config_.num_kv_heads);
  // bf16 export next to the fp32 master: about half the bytes.
  EXPECT_LT(fs::file_size(*dir + "/model.safetensors"), fs::file_size(*dir + "/master.safetensors"));
}

TEST_F(CheckpointTest, Fp32ModelIsTheMasterCopyAndShardsWork) {
  SaveOptions options;
  options.model_dtype = io::DType::kF32;
  options.max_shard_bytes = 60000;
  auto dir = Save(1, options);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_FALSE(fs::exists(*dir + "/master.safetensors"));
  EXPECT_TRUE(fs::exists(*dir + "/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(*dir + "/optimizer_m.safetensors.index.json"));
  auto loaded = LoadCheckpoint(*dir, config_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectBitEqual(loaded->master, params_, "master");
  ExpectBitEqual(loaded->adam_v, v_, "v");
}

// ReadTensorSet with the tensors wanted: those read, exactly; the others checked, not read.
TEST_F(CheckpointTest, ReadTensorSetReadsOnlyTheTensorsWanted) {
  auto dir = Save(1, {});
  ASSERT_TRUE(dir.ok()) << dir.status();
  TensorShapes shapes;
  for (const auto& [name, t] : params_.tensors) shapes.emplace_back(name, t.shape);
  ASSERT_GE(shapes.size(), 2u);
  const std::set<std::string> only = {shapes[0].first, shapes.back().first};
  auto part = ReadTensorSet(*dir, "optimizer_v", shapes, io::DType::kF32, &only);
  ASSERT_TRUE(part.ok()) << part.status();
  ASSERT_EQ(part->tensors.size(), 2u);
  for (const std::string& name : only) {
    EXPECT_EQ(part->at(name).data, v_.at(name).data) << name;
  }
  shapes.pop_back();  // a tensor of the file the caller does not expect: still an error
  EXPECT_EQ(ReadTensorSet(*dir, "optimizer_v", shapes, io::DType::kF32, &only).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CheckpointTest, NoOptimizerStateBeforeTheFirstStep) {
  auto dir = SaveCheckpoint(root_.path(), config_, {&params_, nullptr, nullptr}, {}, {});
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_FALSE(fs::exists(*dir + "/optimizer_m.safetensors"));
  auto loaded = LoadCheckpoint(*dir, config_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->adam_m.tensors.empty());
  EXPECT_EQ(loaded->state.step, 0);
}

TEST_F(CheckpointTest, LatestIgnoresIncompleteAndTemporaryDirectories) {
  EXPECT_EQ(LatestCheckpoint(root_.path()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LatestCheckpoint(root_ / "missing").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(Save(10).ok());
  ASSERT_TRUE(Save(20).ok());
  // A save that crashed before DONE, and one that crashed before its rename.
  auto third = Save(30);
  ASSERT_TRUE(third.ok());
  fs::remove(*third + "/DONE");
  fs::create_directory(root_ / "checkpoint-00000040.tmp-1234");
  WriteAll(root_ / "checkpoint-00000040.tmp-1234/DONE", "{}");
  auto latest = LatestCheckpoint(root_.path());
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, root_ / "checkpoint-00000020");
  EXPECT_EQ(LoadCheckpoint(*third, config_).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(CheckpointTest, ResavingAStepAndKeepLast) {
  ASSERT_TRUE(Save(1).ok());
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(2).ok());  // replaces the complete step-2 directory
  SaveOptions keep;
  keep.keep_last = 2;
  ASSERT_TRUE(Save(3, keep).ok());
  EXPECT_FALSE(fs::exists(root_ / "checkpoint-00000001"));
  EXPECT_TRUE(fs::exists(root_ / "checkpoint-00000002/DONE"));
  EXPECT_TRUE(fs::exists(root_ / "checkpoint-00000003/DONE"));
  for (const auto& e : fs::directory_iterator(root_.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
    EXPECT_EQ(e.path().filename().string().find(".old-"), std::string::npos) << e.path();
  }
}

TEST_F(CheckpointTest, CorruptedFilesAreReportedByName) {
  auto dir = Save(7);
  ASSERT_TRUE(dir.ok());
  const std::string master = *dir + "/master.safetensors";
  const std::string original = ReadAll(master);

  std::string flipped = original;
  flipped[flipped.size() - 5] ^= 0x10;  // a bit in the last tensor's data
  WriteAll(master, flipped);
  auto status = LoadCheckpoint(*dir, config_).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find("master.safetensors"), std::string::npos) << status;

  WriteAll(master, original.substr(0, original.size() / 2));  // truncated
  status = LoadCheckpoint(*dir, config_, {.verify_checksums = false}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;

  std::string bad_header = original;
  bad_header[9] = '!';  // the JSON header, same size; caught by the parser without checksums
  WriteAll(master, bad_header);
  status = LoadCheckpoint(*dir, config_, {.verify_checksums = false}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("master.safetensors"), std::string::npos) << status;

  WriteAll(master, original);
  ASSERT_TRUE(LoadCheckpoint(*dir, config_).ok());
  WriteAll(*dir + "/trainer_state.json", "{not json");
  status = LoadCheckpoint(*dir, config_).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("trainer_state.json"), std::string::npos) << status;
}

TEST_F(CheckpointTest, MismatchedConfigNamesTheTensor) {
  auto dir = Save(4);
  ASSERT_TRUE(dir.ok());
  auto deeper = PresetConfig(Family::kLlama, "tiny", {.layers = 3, .vocab = 96,
                                                      .max_positions = 32});
  auto status = LoadCheckpoint(*dir, *deeper).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("model.layers.2."), std::string::npos) << status;

  auto wider = PresetConfig(Family::kLlama, "tiny", {.intermediate = 128, .vocab = 96,
                                                     .max_positions = 32});
  status = LoadCheckpoint(*dir, *wider).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("mlp.gate_proj.weight has shape"), std::string::npos) << status;

  // Saving tensors that do not fit the config is refused up front, naming the tensor.
  reference::Parameters missing = params_;
  missing.tensors.erase("model.norm.weight");
  auto refused = SaveCheckpoint(root_.path(), config_, {&missing, nullptr, nullptr}, {}, {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("model.norm.weight"), std::string::npos);
}

}  // namespace
}  // namespace mobius::checkpoint
