// PrepareDataset with the real `mobius-worker tokenize` child: SentencePiece and byte-level BPE
// tokenizers, the cache (reuse, invalidation by a changed input), bad lines, interruption.
#include "host/launch/dataset_prep.h"

#include "common/inspect/dataset_descriptor.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"
#include "common/data/token_file.h"

namespace mobius::launch {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::SizeIs;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

class DatasetPrepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dataset_prep_test-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "model");
    // A model directory with its own SentencePiece tokenizer; eos_token_id 2 is </s> there.
    WriteFile(dir_ / "model/config.json", R"({"eos_token_id": 2, "vocab_size": 600})");
    fs::copy_file(testing::SourcePath("test/data/tokenizers/sentencepiece/tokenizer.model"),
                  dir_ / "model/tokenizer.model");
    WriteFile(dir_ / "a.jsonl", "{\"text\": \"hello world\"}\n{\"text\": \"second doc\"}\n");
    WriteFile(dir_ / "b.jsonl", "{\"text\": \"third\"}\n");
    spec_.model_dir = dir_ / "model";
    spec_.dataset.format = "jsonl";
    spec_.dataset.paths = {dir_ / "a.jsonl", dir_ / "b.jsonl"};
    spec_.dataset.tokenizer = spec_.model_dir;
    options_.worker_binary = testing::BinaryPath("bin/mobius-worker");
    options_.cache_dir = dir_ / "cache";
    options_.threads = 2;
    options_.on_log = [this](const std::string& line) { logs_.push_back(line); };
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  jobspec::JobSpec spec_;
  DatasetPrepOptions options_;
  std::vector<std::string> logs_;
};

TEST_F(DatasetPrepTest, TokenizesWithSentencePieceThenReuses) {
  absl::StatusOr<PreparedDataset> first = PrepareDataset(spec_, options_);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->reused);
  EXPECT_EQ(first->summary.documents, 3);
  EXPECT_EQ(first->summary.eos_id, 2);
  EXPECT_EQ(first->summary.vocab_size, 600);
  auto file = data::TokenFile::Open(first->token_file);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->num_docs(), 3);
  EXPECT_EQ((*file)->num_tokens(), first->summary.tokens);
  EXPECT_EQ((*file)->token((*file)->doc_start(1) - 1), 2u);  // each document ends with EOS
  EXPECT_THAT(fs::path(first->token_file).parent_path().string(), options_.cache_dir);

  absl::StatusOr<PreparedDataset> again = PrepareDataset(spec_, options_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->reused);
  EXPECT_EQ(again->token_file, first->token_file);

  // A changed input is a different dataset.
  WriteFile(dir_ / "b.jsonl", "{\"text\": \"third, edited\"}\n{\"text\": \"fourth\"}\n");
  absl::StatusOr<PreparedDataset> changed = PrepareDataset(spec_, options_);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(changed->reused);
  EXPECT_NE(changed->token_file, first->token_file);
  EXPECT_EQ(changed->summary.documents, 4);
  // So is another field choice.
  spec_.dataset.skip_bad_lines = true;
  absl::StatusOr<std::string> a = inspect::DatasetDescriptor(spec_);
  spec_.dataset.skip_bad_lines = false;
  absl::StatusOr<std::string> b = inspect::DatasetDescriptor(spec_);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  // No request file is left behind.
  for (const auto& e : fs::directory_iterator(options_.cache_dir)) {
    EXPECT_THAT(e.path().filename().string(), ::testing::Not(HasSubstr("request")));
  }
}

TEST_F(DatasetPrepTest, ByteLevelBpeAndPromptCompletion) {
  spec_.dataset.tokenizer = testing::SourcePath("test/data/tokenizers/gpt2");
  spec_.dataset.format = "prompt_completion";
  spec_.dataset.paths = {testing::SourcePath("test/data/datasets/prompt_completion.jsonl")};
  spec_.model_dir = dir_ / "no-config";  // EOS from the tokenizer (<|endoftext|>)
  absl::StatusOr<PreparedDataset> p = PrepareDataset(spec_, options_);
  ASSERT_TRUE(p.ok()) << p.status();
  auto file = data::TokenFile::Open(p->token_file);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->has_mask());  // the prompt is not a target
  EXPECT_FALSE((*file)->is_target(0));
}

TEST_F(DatasetPrepTest, BadLinesFailWithTheLineOrAreSkipped) {
  WriteFile(dir_ / "b.jsonl", "{\"text\": \"ok\"}\n{\"txt\": \"typo\"}\nnot json\n");
  absl::StatusOr<PreparedDataset> p = PrepareDataset(spec_, options_);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("b.jsonl line 2: missing field \"text\""));
  spec_.dataset.skip_bad_lines = true;
  p = PrepareDataset(spec_, options_);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->summary.skipped_lines, 2);
  EXPECT_EQ(p->summary.documents, 3);
}

TEST_F(DatasetPrepTest, MissingFilesAndBadTokenizer) {
  spec_.dataset.paths = {dir_ / "missing.jsonl"};
  absl::StatusOr<PreparedDataset> p = PrepareDataset(spec_, options_);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound) << p.status();
  EXPECT_THAT(p.status().message(), HasSubstr("missing.jsonl"));

  spec_.dataset.paths = {dir_ / "a.jsonl"};
  WriteFile(dir_ / "model/tokenizer.model", "not a sentencepiece model");
  p = PrepareDataset(spec_, options_);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
  EXPECT_THAT(p.status().message(), HasSubstr("not a SentencePiece model"));

  options_.worker_binary = (dir_ / "no-such-worker").string();
  p = PrepareDataset(spec_, options_);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound) << p.status();
  EXPECT_THAT(p.status().message(), HasSubstr("no-such-worker"));
}

TEST_F(DatasetPrepTest, InterruptionKillsTheTokenizer) {
  options_.interrupted = [] { return absl::CancelledError("job cancelled"); };
  absl::StatusOr<PreparedDataset> p = PrepareDataset(spec_, options_);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kCancelled) << p.status();
  // Nothing counts as cached: the next call tokenizes.
  options_.interrupted = nullptr;
  p = PrepareDataset(spec_, options_);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->reused);
}

TEST_F(DatasetPrepTest, TokenFilesPassThroughAndWithTokenFileResetsTheTextFields) {
  jobspec::JobSpec tokens = spec_;
  tokens.dataset = {};
  tokens.dataset.path = "/data/train.tok";
  absl::StatusOr<PreparedDataset> p = PrepareDataset(tokens, options_);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->token_file, "/data/train.tok");
  EXPECT_FALSE(fs::exists(options_.cache_dir));

  spec_.dataset.eval_fraction = 0.1;
  spec_.dataset.text_field = "body";
  jobspec::JobSpec prepared = WithTokenFile(spec_, "/cache/x.tok");
  EXPECT_EQ(prepared.dataset.format, "tokens");
  EXPECT_EQ(prepared.dataset.path, "/cache/x.tok");
  EXPECT_THAT(prepared.dataset.paths, SizeIs(0));
  EXPECT_EQ(prepared.dataset.text_field, "text");
  EXPECT_EQ(prepared.dataset.tokenizer, "");
  EXPECT_DOUBLE_EQ(prepared.dataset.eval_fraction, 0.1);
}

}  // namespace
}  // namespace mobius::launch
