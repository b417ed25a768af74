// The checkpoint protocol of checkpoint_writer.h: two writers on two threads produce byte for byte
// the files SaveCheckpoint produces (one file per set or shards, bf16 or fp32 model); keep_last
// prunes checkpoints, exports and leftovers; the model-only export holds the model and the
// tokenizer as hard links; failures name the path and publish nothing; OpenCheckpoint streams and
// the checksums split into parts. Also TensorSetReader's sub-range reads.
#include "worker/checkpoint/checkpoint_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/numeric/bf16.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/worker/checkpoint/test_util.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/checkpoint/model_init.h"
#include "worker/checkpoint/tensor_files.h"

namespace mobius::checkpoint {
namespace {

namespace fs = std::filesystem;
using model::Family;
using testing::ExpectBitEqual;
using testing::ReadAll;
using testing::TempDir;
using testing::WriteAll;

model::ModelConfig TinyConfig(Family family, const SizeOverrides& overrides = {}) {
  auto config = PresetConfig(family, "tiny", overrides);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

// The names in `dir` (not recursive), sorted; empty for a missing directory.
std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Same file names, and every file the same bytes (DONE included).
void ExpectSameFiles(const std::string& a, const std::string& b) {
  const std::vector<std::string> names = ListDir(a);
  ASSERT_EQ(names, ListDir(b)) << a << " vs " << b;
  ASSERT_TRUE(Contains(names, "DONE")) << a;
  for (const std::string& name : names) {
    const std::string x = ReadAll(a + "/" + name), y = ReadAll(b + "/" + name);
    EXPECT_EQ(x.size(), y.size()) << name;
    EXPECT_TRUE(x == y) << name << " differs between " << a << " and " << b;
  }
}

int64_t Inode(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return static_cast<int64_t>(st.st_ino);
}

// checkpoint_writer.h's protocol by hand: one plan, the files created, two writers on two threads
// (each opened by its thread) writing the first and the second half of the tensor names, then the
// coordinator's finish. `m` and `v` null: no optimizer state.
absl::StatusOr<std::string> SaveWithTwoWriters(
    const std::string& root, const model::ModelConfig& config, const reference::Parameters& master,
    const reference::Parameters* m, const reference::Parameters* v, const TrainingState& state,
    const SaveOptions& options, const std::string& tag) {
  const bool moments = m != nullptr;
  absl::StatusOr<CheckpointPlan> plan = PlanCheckpoint(config, options, moments);
  if (!plan.ok()) return plan.status();
  absl::Status created = CreateCheckpointFiles(root, *plan, state.step, tag);
  if (!created.ok()) return created;
  const std::string dir = PartialCheckpointDir(root, state.step, tag);
  std::vector<std::string> names;
  for (const auto& [name, t] : master.tensors) names.push_back(name);
  const size_t half = names.size() / 2;
  absl::Status results[2];
  uint64_t bytes[2] = {0, 0};
  auto write_share = [&](int part) {
    auto writer = CheckpointTensorWriter::Open(dir, *plan);
    if (!writer.ok()) {
      results[part] = writer.status();
      return;
    }
    const size_t begin = part == 0 ? 0 : half, end = part == 0 ? half : names.size();
    for (size_t i = begin; i < end && results[part].ok(); ++i) {
      const std::string& name = names[i];
      results[part] =
          (*writer)->WriteTensor(name, master.data(name), moments ? m->data(name) : nullptr,
                                 moments ? v->data(name) : nullptr);
    }
    bytes[part] = (*writer)->bytes_written();
  };
  std::thread first(write_share, 0), second(write_share, 1);
  first.join();
  second.join();
  for (const absl::Status& st : results) {
    if (!st.ok()) return st;
  }
  // Every byte of every tensor file was written once, headers aside.
  uint64_t headers = 0;
  for (const CheckpointPlan::File& f : plan->files) headers += f.header.size();
  EXPECT_EQ(bytes[0] + bytes[1], plan->total_bytes() - headers);
  return FinishCheckpoint(root, config, *plan, state, options, tag);
}

// Both save paths side by side: SaveCheckpoint into root A, two writers into root B.
class ParallelWritersTest : public ::testing::TestWithParam<Family> {
 protected:
  void SaveBothWays(const SaveOptions& options, std::string* a, std::string* b) {
    const TrainingState state{7, 6, std::string("\x01rng\xff", 5), {{"epoch", "1"}}};
    auto saved = SaveCheckpoint(tmp_ / "a", config_, {&params_, &m_, &v_}, state, options);
    ASSERT_TRUE(saved.ok()) << saved.status();
    auto written =
        SaveWithTwoWriters(tmp_ / "b", config_, params_, &m_, &v_, state, options, "writers");
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_EQ(*saved, tmp_ / "a/checkpoint-00000007");
    EXPECT_EQ(*written, tmp_ / "b/checkpoint-00000007");
    // Nothing partial left behind by either.
    EXPECT_EQ(ListDir(tmp_ / "a"), std::vector<std::string>{"checkpoint-00000007"});
    EXPECT_EQ(ListDir(tmp_ / "b"), std::vector<std::string>{"checkpoint-00000007"});
    *a = *saved;
    *b = *written;
  }

  model::ModelConfig config_ = TinyConfig(GetParam());
  reference::Parameters params_ = InitModelParameters(config_, 1);
  reference::Parameters m_ = InitModelParameters(config_, 2);
  reference::Parameters v_ = InitModelParameters(config_, 3);
  TempDir tmp_;
};

TEST_P(ParallelWritersTest, TwoWritersWriteExactlyWhatSaveCheckpointWrites) {
  std::string a, b;
  ASSERT_NO_FATAL_FAILURE(SaveBothWays({}, &a, &b));
  EXPECT_EQ(ListDir(a),
            (std::vector<std::string>{"DONE", "config.json", "master.safetensors",
                                      "model.safetensors", "optimizer_m.safetensors",
                                      "optimizer_v.safetensors", "trainer_state.json"}));
  ExpectSameFiles(a, b);
  auto loaded = LoadCheckpoint(b, config_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectBitEqual(loaded->master, params_, "master");
  ExpectBitEqual(loaded->adam_m, m_, "m");
  ExpectBitEqual(loaded->adam_v, v_, "v");
}

TEST_P(ParallelWritersTest, SmallShardsAreIdenticalAndLoadBackExactly) {
  SaveOptions options;
  options.max_shard_bytes = 40000;  // the embedding alone is 128 KiB in fp32
  std::string a, b;
  ASSERT_NO_FATAL_FAILURE(SaveBothWays(options, &a, &b));
  const std::vector<std::string> names = ListDir(a);
  for (const char* base : {"model", "master", "optimizer_m", "optimizer_v"}) {
    SCOPED_TRACE(base);
    EXPECT_FALSE(Contains(names, std::string(base) + ".safetensors"));
    EXPECT_TRUE(Contains(names, std::string(base) + ".safetensors.index.json"));
    const int64_t shards = std::count_if(names.begin(), names.end(), [&](const std::string& n) {
      return n.rfind(std::string(base) + "-", 0) == 0;
    });
    EXPECT_GT(shards, 2);
  }
  ExpectSameFiles(a, b);
  auto loaded = LoadCheckpoint(b, config_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectBitEqual(loaded->master, params_, "master");
  ExpectBitEqual(loaded->adam_m, m_, "m");
  ExpectBitEqual(loaded->adam_v, v_, "v");
  // The layout is tensor_files.h's: WriteTensorSet writes the same shards, byte for byte.
  const TensorShapes shapes = reference::ParameterShapes(config_);
  const std::string sets = tmp_ / "sets";
  ASSERT_TRUE(fs::create_directory(sets));
  auto model = WriteTensorSet(sets, "model", params_, shapes, io::DType::kBF16, 40000);
  ASSERT_TRUE(model.ok()) << model.status();
  auto master = WriteTensorSet(sets, "master", params_, shapes, io::DType::kF32, 40000);
  ASSERT_TRUE(master.ok()) << master.status();
  auto m = WriteTensorSet(sets, "optimizer_m", m_, shapes, io::DType::kF32, 40000);
  ASSERT_TRUE(m.ok()) << m.status();
  for (const std::vector<std::string>* files : {&*model, &*master, &*m}) {
    for (const std::string& f : *files) {
      EXPECT_TRUE(ReadAll(sets + "/" + f) == ReadAll(b + "/" + f)) << f;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ParallelWritersTest,
                         ::testing::Values(Family::kLlama, Family::kGpt2),
                         [](const ::testing::TestParamInfo<Family>& info) {
                           return info.param == Family::kLlama ? "llama" : "gpt2_tied";
                         });

class CheckpointWriterTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::string> Save(int64_t step, const SaveOptions& options = {}) {
    return SaveCheckpoint(root_, config_, {&params_, &m_, &v_},
                          TrainingState{step, step, "rng", {}}, options);
  }
  model::ModelConfig config_ = TinyConfig(Family::kLlama);
  reference::Parameters params_ = InitModelParameters(config_, 1);
  reference::Parameters m_ = InitModelParameters(config_, 2);
  reference::Parameters v_ = InitModelParameters(config_, 3);
  TempDir tmp_;
  std::string root_ = tmp_ / "root";
};

TEST_F(CheckpointWriterTest, Fp32ModelHasNoMasterFileAndLoadsTheMasterBack) {
  SaveOptions options;
  options.model_dtype = io::DType::kF32;
  auto plan = PlanCheckpoint(config_, options, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const auto& [name, t] : plan->tensors) {
    EXPECT_EQ(t.master.file, t.model.file) << name;
    EXPECT_EQ(t.master.offset, t.model.offset) << name;
  }
  const TrainingState state{3, 3, "", {}};
  auto a = SaveCheckpoint(tmp_ / "a", config_, {&params_, &m_, &v_}, state, options);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = SaveWithTwoWriters(tmp_ / "b", config_, params_, &m_, &v_, state, options, "f32");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(fs::exists(*b + "/master.safetensors"));
  EXPECT_TRUE(fs::exists(*b + "/model.safetensors"));
  ExpectSameFiles(*a, *b);
  auto loaded = LoadCheckpoint(*b, config_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectBitEqual(loaded->master, params_, "master");
  ExpectBitEqual(loaded->adam_m, m_, "m");
}

// The model's config.json is kept as it is (its unknown keys too), less a quantization_config: a
// gpt-oss run from OpenAI's MXFP4 checkpoint writes bf16 tensors, which transformers would read as
// MXFP4 if the config still said so.
TEST_F(CheckpointWriterTest, ConfigIsKeptVerbatimLessItsQuantizationConfig) {
  SaveOptions options;
  options.config_json = "{\"model_type\": \"llama\", \"custom_key\": 7}";
  auto a = Save(1, options);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(ReadAll(*a + "/config.json"), options.config_json);
  options.config_json =
      "{\"model_type\": \"llama\", \"quantization_config\": {\"quant_method\": \"mxfp4\"}, "
      "\"custom_key\": 7}";
  auto b = Save(2, options);
  ASSERT_TRUE(b.ok()) << b.status();
  const nlohmann::json j = nlohmann::json::parse(ReadAll(*b + "/config.json"));
  EXPECT_FALSE(j.contains("quantization_config"));
  EXPECT_EQ(j.at("custom_key"), 7);
  EXPECT_EQ(j.at("model_type"), "llama");
}

TEST_F(CheckpointWriterTest, KeepLastPrunesCheckpointsExportsAndLeftovers) {
  SaveOptions options;
  options.keep_last = 2;
  options.export_model = true;
  for (int64_t step = 1; step <= 5; ++step) {
    if (step == 5) {  // an interrupted save of step 3 (another process, long gone)
      ASSERT_TRUE(fs::create_directories(root_ + "/checkpoint-00000003.tmp-999"));
      WriteAll(root_ + "/checkpoint-00000003.tmp-999/model.safetensors", "partial");
    }
    auto dir = Save(step, options);
    ASSERT_TRUE(dir.ok()) << "step " << step << ": " << dir.status();
  }
  const auto complete = CompleteCheckpoints(root_);
  ASSERT_EQ(complete.size(), 2u);
  EXPECT_EQ(complete[0], std::make_pair(int64_t{4}, root_ + "/checkpoint-00000004"));
  EXPECT_EQ(complete[1], std::make_pair(int64_t{5}, root_ + "/checkpoint-00000005"));
  EXPECT_EQ(ListDir(root_), (std::vector<std::string>{"checkpoint-00000004", "checkpoint-00000005",
                                                      "export-00000004", "export-00000005"}));
  EXPECT_EQ(ExportDirName(4), "export-00000004");
}

TEST_F(CheckpointWriterTest, ExportHoldsTheModelAndTheTokenizerAsLinks) {
  const std::string tok = tmp_ / "tokenizer";
  ASSERT_TRUE(fs::create_directory(tok));
  WriteAll(tok + "/tokenizer.json", "{\"model\": {\"type\": \"BPE\"}}\n");
  WriteAll(tok + "/tokenizer_config.json", "{\"model_max_length\": 256}\n");
  WriteAll(tok + "/notes.txt", "not a tokenizer file\n");
  const std::vector<std::string> tokenizer = {tok + "/tokenizer.json",
                                              tok + "/tokenizer_config.json"};
  EXPECT_EQ(TokenizerFiles(tok), tokenizer);
  EXPECT_EQ(TokenizerFiles(tok + "/tokenizer.json"), tokenizer);  // a file: its directory
  EXPECT_TRUE(TokenizerFiles(tmp_ / "nowhere").empty());

  // GPT-2: tied embeddings, the export has no lm_head.
  config_ = TinyConfig(Family::kGpt2);
  params_ = InitModelParameters(config_, 1);
  m_ = InitModelParameters(config_, 2);
  v_ = InitModelParameters(config_, 3);
  for (const int64_t max_shard_bytes : {kDefaultMaxShardBytes, int64_t{40000}}) {
    SCOPED_TRACE(max_shard_bytes == kDefaultMaxShardBytes ? "one file" : "shards");
    SaveOptions options;
    options.copy_files = TokenizerFiles(tok);
    options.export_model = true;
    options.max_shard_bytes = max_shard_bytes;
    root_ = tmp_ / (max_shard_bytes == kDefaultMaxShardBytes ? "one" : "sharded");
    auto dir = Save(12, options);
    ASSERT_TRUE(dir.ok()) << dir.status();
    const std::string exported = root_ + "/" + ExportDirName(12);
    EXPECT_EQ(ListDir(root_), (std::vector<std::string>{"checkpoint-00000012", "export-00000012"}));

    const std::vector<std::string> in_checkpoint = ListDir(*dir);
    EXPECT_FALSE(Contains(in_checkpoint, "notes.txt"));
    std::vector<std::string> expected = {"config.json", "tokenizer.json", "tokenizer_config.json"};
    for (const std::string& name : in_checkpoint) {
      if (name.rfind("model", 0) == 0) expected.push_back(name);
    }
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(ListDir(exported), expected);
    EXPECT_EQ(Contains(expected, "model.safetensors"), max_shard_bytes == kDefaultMaxShardBytes);
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
      EXPECT_EQ(ReadAll(*dir + "/" + name), ReadAll(tok + "/" + name)) << name;
      EXPECT_EQ(ReadAll(exported + "/" + name), ReadAll(tok + "/" + name)) << name;
    }
    for (const std::string& name : expected) {
      if (name.rfind("model", 0) != 0) continue;
      EXPECT_EQ(Inode(exported + "/" + name), Inode(*dir + "/" + name)) << name << " not a link";
    }

    auto model = ReadModelDirectory(exported);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(model->config.family, Family::kGpt2);
    EXPECT_EQ(model->config.num_layers, config_.num_layers);
    EXPECT_EQ(model->config.hidden_size, config_.hidden_size);
    EXPECT_EQ(model->config.vocab_size, config_.vocab_size);
    EXPECT_TRUE(model->config.tie_word_embeddings);
    // The bf16 model: the master rounded to nearest even.
    ASSERT_EQ(model->params.tensors.size(), params_.tensors.size());
    for (const auto& [name, t] : params_.tensors) {
      const std::vector<float>& got = model->params.at(name).data;
      ASSERT_EQ(got.size(), t.data.size()) << name;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i], numeric::Bf16ToFp32(numeric::Fp32ToBf16(t.data[i])))
            << name << "[" << i << "]";
      }
    }
  }
}

TEST_F(CheckpointWriterTest, UnknownTensorAndBadDtypeAreInvalidArgument) {
  SaveOptions f16;
  f16.model_dtype = io::DType::kF16;
  EXPECT_EQ(PlanCheckpoint(config_, f16, true).status().code(), absl::StatusCode::kInvalidArgument);

  auto plan = PlanCheckpoint(config_, {}, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(CreateCheckpointFiles(root_, *plan, 1, "x").ok());
  auto writer = CheckpointTensorWriter::Open(PartialCheckpointDir(root_, 1, "x"), *plan);
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::vector<float> zeros(1 << 16);
  const absl::Status st = (*writer)->WriteTensor("model.layers.9.mlp.up_proj.weight", zeros.data(),
                                                 zeros.data(), zeros.data());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("model.layers.9.mlp.up_proj.weight"), std::string::npos) << st;
  EXPECT_EQ((*writer)->bytes_written(), 0u);

  EXPECT_EQ(
      CheckpointTensorWriter::Open(PartialCheckpointDir(root_, 2, "x"), *plan).status().code(),
      absl::StatusCode::kNotFound);
}

// Writes every tensor of a plan created in `root` with `tag` at `step`.
void WriteEverything(const std::string& root, const CheckpointPlan& plan, int64_t step,
                     const std::string& tag, const reference::Parameters& master,
                     const reference::Parameters& m, const reference::Parameters& v) {
  ASSERT_TRUE(CreateCheckpointFiles(root, plan, step, tag).ok());
  auto writer = CheckpointTensorWriter::Open(PartialCheckpointDir(root, step, tag), plan);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const auto& [name, t] : master.tensors) {
    ASSERT_TRUE((*writer)->WriteTensor(name, t.data.data(), m.data(name), v.data(name)).ok());
  }
}

// Failures that do not depend on permissions (this test may run as root): a tensor file gone
// from the temporary directory, a copied file that does not exist.
TEST_F(CheckpointWriterTest, FailedFinishNamesThePathAndPublishesNothing) {
  auto plan = PlanCheckpoint(config_, {}, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const TrainingState state{6, 6, "", {}};
  ASSERT_NO_FATAL_FAILURE(WriteEverything(root_, *plan, 6, "gone", params_, m_, v_));
  const std::string tmp = PartialCheckpointDir(root_, 6, "gone");
  ASSERT_TRUE(fs::remove(tmp + "/optimizer_v.safetensors"));
  auto done = FinishCheckpoint(root_, config_, *plan, state, {}, "gone");
  ASSERT_FALSE(done.ok());
  EXPECT_EQ(done.status().code(), absl::StatusCode::kNotFound) << done.status();
  EXPECT_NE(done.status().message().find(tmp + "/optimizer_v.safetensors"), std::string::npos)
      << done.status();
  EXPECT_TRUE(CompleteCheckpoints(root_).empty());
  EXPECT_FALSE(fs::exists(root_ + "/checkpoint-00000006"));
  EXPECT_FALSE(fs::exists(tmp)) << "a failed finish removes its temporary directory";

  SaveOptions options;
  options.copy_files = {tmp_ / "missing/tokenizer.json"};
  ASSERT_NO_FATAL_FAILURE(WriteEverything(root_, *plan, 6, "copy", params_, m_, v_));
  done = FinishCheckpoint(root_, config_, *plan, state, options, "copy");
  ASSERT_FALSE(done.ok());
  EXPECT_NE(done.status().message().find(tmp_ / "missing/tokenizer.json"), std::string::npos)
      << done.status();
  EXPECT_TRUE(CompleteCheckpoints(root_).empty());
  EXPECT_TRUE(ListDir(root_).empty()) << ListDir(root_).front();
}

TEST_F(CheckpointWriterTest, FinishIntoAnUnwritableDirectoryFailsNamingIt) {
  auto plan = PlanCheckpoint(config_, {}, true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_NO_FATAL_FAILURE(WriteEverything(root_, *plan, 6, "ro", params_, m_, v_));
  if (geteuid() == 0) GTEST_SKIP() << "running as root: directory permissions do not apply";
  const std::string tmp = PartialCheckpointDir(root_, 6, "ro");
  ASSERT_EQ(chmod(tmp.c_str(), 0500), 0);
  auto done = FinishCheckpoint(root_, config_, *plan, TrainingState{6, 6, "", {}}, {}, "ro");
  chmod(tmp.c_str(), 0700);  // so that the temp dir can be removed
  ASSERT_FALSE(done.ok());
  EXPECT_EQ(done.status().code(), absl::StatusCode::kPermissionDenied) << done.status();
  EXPECT_NE(done.status().message().find(tmp), std::string::npos) << done.status();
  EXPECT_TRUE(CompleteCheckpoints(root_).empty());
  EXPECT_FALSE(fs::exists(root_ + "/checkpoint-00000006"));
}

TEST_F(CheckpointWriterTest, OpenStreamsAndChecksumsSplitIntoParts) {
  auto dir = Save(9);
  ASSERT_TRUE(dir.ok()) << dir.status();
  {
    auto opened = OpenCheckpoint(*dir, config_);
    ASSERT_TRUE(opened.ok()) << opened.status();
    EXPECT_EQ(opened->directory, *dir);
    EXPECT_EQ(opened->state.step, 9);
    EXPECT_EQ(opened->state.rng_state, "rng");
    ASSERT_NE(opened->master, nullptr);
    ASSERT_NE(opened->adam_m, nullptr);
    ASSERT_NE(opened->adam_v, nullptr);
    EXPECT_EQ(opened->master->files(), std::vector<std::string>{"master.safetensors"});
    EXPECT_EQ(opened->adam_m->files(), std::vector<std::string>{"optimizer_m.safetensors"});
    const std::string name = "model.layers.1.mlp.down_proj.weight";
    std::vector<float> got(params_.at(name).data.size());
    opened->adam_m->ReadF32(name, got.data());
    EXPECT_EQ(got, m_.at(name).data);
  }
  for (int part = 0; part < 3; ++part) {
    EXPECT_TRUE(VerifyCheckpointChecksums(*dir, part, 3).ok()) << part;
  }
  EXPECT_TRUE(VerifyCheckpointChecksums(*dir, 0, 1).ok());

  // One byte in the middle of the first moments' data, in place (same size).
  const std::string corrupt = *dir + "/optimizer_m.safetensors";
  const uint64_t size = fs::file_size(corrupt);
  {
    std::fstream f(corrupt, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(size / 2));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(size / 2));
    f.put(static_cast<char>(c ^ 0x5a));
    ASSERT_TRUE(f.good());
  }
  ASSERT_EQ(fs::file_size(corrupt), size);
  // DONE lists every other file by name; its position decides which part re-hashes it.
  std::vector<std::string> listed = ListDir(*dir);
  listed.erase(std::find(listed.begin(), listed.end(), "DONE"));
  const int expected_part = static_cast<int>(
      (std::find(listed.begin(), listed.end(), "optimizer_m.safetensors") - listed.begin()) % 3);
  int failures = 0;
  for (int part = 0; part < 3; ++part) {
    const absl::Status st = VerifyCheckpointChecksums(*dir, part, 3);
    if (st.ok()) continue;
    ++failures;
    EXPECT_EQ(part, expected_part);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
    EXPECT_NE(st.message().find("optimizer_m.safetensors"), std::string::npos) << st;
  }
  EXPECT_EQ(failures, 1);
  const absl::Status all = VerifyCheckpointChecksums(*dir, 0, 1);
  EXPECT_EQ(all.code(), absl::StatusCode::kDataLoss) << all;
  EXPECT_NE(all.message().find("optimizer_m.safetensors"), std::string::npos) << all;
  // Opening verifies sizes, not checksums.
  EXPECT_TRUE(OpenCheckpoint(*dir, config_).ok());

  for (const auto& [part, parts] : {std::pair{3, 3}, std::pair{-1, 3}, std::pair{0, 0}}) {
    EXPECT_EQ(VerifyCheckpointChecksums(*dir, part, parts).code(),
              absl::StatusCode::kInvalidArgument)
        << part << " of " << parts;
  }
}

// Sub-ranges read through a TensorSetReader equal the slices of the whole tensor, in bf16 and f32,
// also across the reader's 1 Mi-element chunks (the embedding here has 1,088,000 elements).
TEST(TensorSetReaderTest, SubRangeReadsEqualSlicesOfTheWholeTensor) {
  const model::ModelConfig config = TinyConfig(Family::kLlama, {.vocab = 17000});
  const reference::Parameters params = InitModelParameters(config, 5);
  const TensorShapes shapes = reference::ParameterShapes(config);
  constexpr int64_t kChunk = int64_t{1} << 20;
  TempDir tmp;
  for (const io::DType dtype : {io::DType::kBF16, io::DType::kF32}) {
    SCOPED_TRACE(io::DTypeName(dtype));
    const std::string dir = tmp / io::DTypeName(dtype);
    ASSERT_TRUE(fs::create_directory(dir));
    ASSERT_TRUE(WriteTensorSet(dir, "model", params, shapes, dtype, kDefaultMaxShardBytes).ok());
    auto reader = TensorSetReader::Open(dir, "model", shapes, dtype);
    ASSERT_TRUE(reader.ok()) << reader.status();
    for (const auto& [name, shape] : shapes) {
      const int64_t n = (*reader)->view(name).num_elements();
      ASSERT_EQ(n, params.at(name).numel()) << name;
      std::vector<float> whole(static_cast<size_t>(n));
      (*reader)->ReadF32(name, whole.data());
      if (dtype == io::DType::kF32) EXPECT_EQ(whole, params.at(name).data) << name;
      std::vector<std::pair<int64_t, int64_t>> ranges = {{0, n},         {1, n - 1}, {n - 1, 1},
                                                         {n / 3, n / 3}, {n / 2, 0}, {7, n - 20}};
      if (n > kChunk) ranges.push_back({kChunk - 5, 10});
      for (const auto& [begin, count] : ranges) {
        std::vector<float> part(static_cast<size_t>(count) + 1, -1.0f);
        (*reader)->ReadF32(name, begin, count, part.data());
        EXPECT_EQ(std::memcmp(part.data(), whole.data() + begin, count * sizeof(float)), 0)
            << name << " [" << begin << ", " << begin + count << ")";
        EXPECT_EQ(part[count], -1.0f) << name << ": wrote past " << count << " elements";
      }
    }
  }
}

}  // namespace
}  // namespace mobius::checkpoint
