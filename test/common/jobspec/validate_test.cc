#include "common/jobspec/validate.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mobius::jobspec {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

JobSpec Valid() {
  JobSpec s;
  s.model_dir = "/models/m";
  s.dataset.path = "/data/train.tok";
  s.training.steps = 100;
  s.training.global_batch = 8;
  s.training.seq_len = 256;
  return s;
}

std::vector<std::string> Fields(const JobSpec& s, const ValidateOptions& o = {}) {
  std::vector<std::string> fields;
  for (const FieldError& e : FindJobSpecErrors(s, o)) fields.push_back(e.field);
  return fields;
}

std::string Message(const JobSpec& s, const ValidateOptions& o = {}) {
  return std::string(ValidateJobSpec(s, o).message());
}

TEST(ValidateJobSpecTest, DefaultsWithRequiredFieldsAreValid) {
  EXPECT_TRUE(ValidateJobSpec(Valid()).ok()) << ValidateJobSpec(Valid());
}

// checkpoint.group: a POSIX group name or a gid; membership is checked as the user, not here.
TEST(ValidateJobSpecTest, CheckpointGroupIsAGroupNameOrGid) {
  for (const char* ok : {"", "mobius-share", "_ml.team", "1005"}) {
    JobSpec s = Valid();
    s.checkpoint.group = ok;
    EXPECT_TRUE(ValidateJobSpec(s).ok()) << ok << ": " << ValidateJobSpec(s);
  }
  for (const char* bad : {"-x", "a b", "team/ml", "9abc!", "averyveryveryverylonggroupname0123"}) {
    JobSpec s = Valid();
    s.checkpoint.group = bad;
    absl::Status st = ValidateJobSpec(s);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("checkpoint.group"), std::string::npos) << st;
  }
}

TEST(ValidateJobSpecTest, EmptySpecListsEveryRequiredField) {
  absl::Status st = ValidateJobSpec(JobSpec{});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Fields(JobSpec{}), ElementsAre("model_dir", "dataset.path", "training.steps",
                                             "training.global_batch", "training.seq_len"));
  EXPECT_THAT(st.message(), HasSubstr("model_dir: required"));
  EXPECT_THAT(st.message(), HasSubstr("\ntraining.seq_len: required"));
}

TEST(ValidateJobSpecTest, EveryProblemIsReportedOnItsOwnLine) {
  JobSpec s = Valid();
  s.training.microbatch = 3;
  s.training.lr = -1;
  s.plan.mapper = "random";
  EXPECT_EQ(Message(s),
            "training.microbatch: must divide training.global_batch 8 (got 3)\n"
            "training.lr: must be a finite number > 0 (got -1)\n"
            "plan.mapper: must be one of cross, sequential (got \"random\")");
}

TEST(ValidateJobSpecTest, StepsAndEpochs) {
  JobSpec s = Valid();
  s.training.steps = 0;
  s.training.epochs = 3;
  EXPECT_THAT(Fields(s), IsEmpty());
  s.training.steps = 10;
  EXPECT_THAT(Fields(s), ElementsAre("training.epochs"));
  EXPECT_THAT(Message(s), HasSubstr("set only one of training.steps and training.epochs"));
  s.training.epochs = -1;
  EXPECT_THAT(Fields(s), ElementsAre("training.epochs"));
  s.training.epochs = 0;
  s.training.steps = kMaxSteps + 1;
  EXPECT_THAT(Fields(s), ElementsAre("training.steps"));
  // The runtime's limit (2^31 - 1: run-local steps live in 32-bit futex words) is the spec's; 2^32
  // used to pass here and then wrap to "all 0 steps" in the pipeline worker.
  EXPECT_EQ(kMaxSteps, (int64_t{1} << 31) - 1);
  s.training.steps = int64_t{1} << 32;
  EXPECT_THAT(Fields(s), ElementsAre("training.steps"));
  s.training.steps = kMaxSteps;
  EXPECT_THAT(Fields(s), IsEmpty());
}

TEST(ValidateJobSpecTest, Microbatch) {
  JobSpec s = Valid();
  s.training.microbatch = 0;  // = global_batch
  EXPECT_THAT(Fields(s), IsEmpty());
  s.training.microbatch = 4;
  EXPECT_THAT(Fields(s), IsEmpty());
  s.training.microbatch = 16;
  EXPECT_THAT(Fields(s), ElementsAre("training.microbatch"));
  s.training.microbatch = -1;
  EXPECT_THAT(Message(s), HasSubstr("training.microbatch: must be in [1, 1048576]; 0 means "
                                    "global_batch (got -1)"));
}

TEST(ValidateJobSpecTest, NumbersRejectNanAndInfinity) {
  JobSpec s = Valid();
  s.training.lr = NAN;
  s.training.weight_decay = INFINITY;
  s.dataset.eval_fraction = NAN;
  EXPECT_THAT(Fields(s), ElementsAre("dataset.eval_fraction", "training.lr",
                                     "training.weight_decay"));
}

TEST(ValidateJobSpecTest, OptimizerRanges) {
  JobSpec s = Valid();
  s.training.lr = 1e-4;
  s.training.min_lr = 1e-3;
  s.training.beta1 = 1;
  s.training.beta2 = -0.1;
  s.training.eps = 0;
  s.training.grad_clip = -1;
  s.training.warmup_steps = 101;
  EXPECT_THAT(Fields(s), ElementsAre("training.min_lr", "training.warmup_steps", "training.grad_clip",
                                     "training.beta1", "training.beta2", "training.eps"));
  EXPECT_THAT(Message(s), HasSubstr("training.beta1: must be a finite number in [0, 1) (got 1)"));
}

TEST(ValidateJobSpecTest, EvalEveryNeedsAnEvalSplit) {
  JobSpec s = Valid();
  s.training.eval_every = 10;
  EXPECT_THAT(Fields(s), ElementsAre("training.eval_every"));
  s.dataset.eval_fraction = 0.05;
  EXPECT_THAT(Fields(s), IsEmpty());
  s.dataset.eval_fraction = 0.6;
  EXPECT_THAT(Fields(s), ElementsAre("dataset.eval_fraction"));
}

TEST(ValidateJobSpecTest, DatasetFormatAndTokenizer) {
  JobSpec s = Valid();
  s.dataset.format = "csv";
  EXPECT_THAT(Message(s), HasSubstr("dataset.format: must be one of tokens, jsonl, "
                                    "prompt_completion, chat, text (got \"csv\")"));
  s.dataset.format = "tokens";
  s.dataset.tokenizer = "/tok";
  EXPECT_THAT(Fields(s), ElementsAre("dataset.tokenizer"));
  for (const char* format : {"jsonl", "prompt_completion", "chat", "text"}) {
    s.dataset.format = format;
    EXPECT_THAT(Fields(s), IsEmpty()) << format;
  }
}

TEST(ValidateJobSpecTest, DatasetFilesAndFields) {
  JobSpec s = Valid();
  s.dataset.format = "jsonl";
  s.dataset.paths = {"/d/a.jsonl", "/d/b.jsonl"};
  EXPECT_THAT(Message(s), HasSubstr("dataset.paths: set only one of dataset.path and dataset.paths"));
  s.dataset.path.clear();
  EXPECT_THAT(Fields(s), IsEmpty());
  s.dataset.paths = {"/d/a.jsonl", "relative.jsonl", ""};
  EXPECT_THAT(Fields(s, {.require_absolute_paths = true}),
              ElementsAre("dataset.paths[1]", "dataset.paths[2]"));
  s.dataset.paths = {"/d/a.tok", "/d/b.tok"};
  s.dataset.format = "tokens";
  EXPECT_THAT(Message(s), HasSubstr("dataset.paths: a token dataset is one file (got 2)"));
  s.dataset.paths.assign(kMaxDatasetFiles + 1, "/d/a.jsonl");
  s.dataset.format = "text";
  EXPECT_THAT(Fields(s), ElementsAre("dataset.paths"));
  s.dataset.paths = {"/d/a.jsonl"};
  s.dataset.text_field = "";
  s.dataset.prompt_field = std::string(kMaxFieldNameLength + 1, 'p');
  s.dataset.messages_field = "a\nb";
  s.dataset.chat_template = "llama";
  EXPECT_THAT(Fields(s), ElementsAre("dataset.text_field", "dataset.prompt_field",
                                     "dataset.messages_field", "dataset.chat_template"));
}

TEST(ValidateJobSpecTest, NormalizeMovesOnePathToPath) {
  JobSpec s = Valid();
  s.dataset.path.clear();
  s.dataset.paths = {"/d/only.jsonl"};
  s.dataset.format = "jsonl";
  Normalize(s);
  EXPECT_EQ(s.dataset.path, "/d/only.jsonl");
  EXPECT_THAT(s.dataset.paths, IsEmpty());
  EXPECT_EQ(s.dataset.tokenizer, s.model_dir);
}

TEST(ValidateJobSpecTest, NameAndLabels) {
  JobSpec s = Valid();
  s.name = "llama-3.sft_v2";
  s.labels = {{"team", "nlp"}, {"example.com/owner", "alice"}};
  EXPECT_THAT(Fields(s), IsEmpty());
  s.name = "Llama";
  EXPECT_THAT(Fields(s), ElementsAre("name"));
  s.name = std::string(64, 'a');
  EXPECT_THAT(Message(s), HasSubstr("name: longer than 63 characters (got 64)"));
  s.name = "";
  s.labels = {{"", "x"}, {"ok", std::string(257, 'v')}, {"ctl", "a\nb"}, {"utf8", "\xff"},
              {"fine", "caf\xc3\xa9"}};
  EXPECT_THAT(Fields(s), ElementsAre("labels", "labels.ctl", "labels.ok", "labels.utf8"));
  s.labels.clear();
  for (int i = 0; i <= kMaxLabels; ++i) s.labels["k" + std::to_string(i)] = "v";
  EXPECT_THAT(Fields(s), ElementsAre("labels"));
}

TEST(ValidateJobSpecTest, ResourcesPlanCheckpointRestarts) {
  JobSpec s = Valid();
  s.resources.gpus = -1;
  s.resources.device_memory_bytes = 1000;
  s.plan.schedule = "zero";
  s.plan.partitioner = "";
  s.plan.stages = kMaxStages + 1;
  s.checkpoint.every_steps = -1;
  s.max_restarts = 11;
  s.priority = -101;
  EXPECT_THAT(Fields(s), ElementsAre("priority", "resources.gpus", "resources.device_memory_bytes",
                                     "plan.schedule", "plan.partitioner", "plan.stages",
                                     "checkpoint.every_steps", "max_restarts"));
  EXPECT_THAT(Message(s), HasSubstr("resources.gpus: must be in [0, 1024]; 0 means all free GPUs "
                                    "(got -1)"));
}

TEST(ValidateJobSpecTest, PathsAreUtf8WithoutControlCharacters) {
  JobSpec s = Valid();
  s.model_dir = "/models/\xc0\xaf";  // overlong '/'
  s.dataset.path = std::string("/data/a\0b", 9);
  s.checkpoint.dir = std::string(kMaxPathLength + 1, 'c');
  EXPECT_THAT(Fields(s), ElementsAre("model_dir", "dataset.path", "checkpoint.dir"));
  EXPECT_THAT(Message(s), HasSubstr("model_dir: must be valid UTF-8 (got \"/models/\\xc0\\xaf\")"));
}

TEST(ValidateJobSpecTest, ServerRequiresAbsolutePaths) {
  JobSpec s = Valid();
  s.model_dir = "models/m";
  s.dataset.format = "text";
  s.dataset.tokenizer = "tok";
  s.checkpoint.dir = "ckpt";
  EXPECT_THAT(Fields(s), IsEmpty());
  ValidateOptions server;
  server.require_absolute_paths = true;
  EXPECT_THAT(Fields(s, server),
              ElementsAre("model_dir", "dataset.tokenizer", "checkpoint.dir"));
  EXPECT_THAT(Message(s, server), HasSubstr("model_dir: must be an absolute path (got \"models/m\")"));
}

TEST(ValidateJobSpecTest, NoAdapterSectionIsFullFineTuning) {
  JobSpec s = Valid();
  s.plan.schedule = "roundrobin";  // refused only with an adapter
  EXPECT_THAT(Fields(s), IsEmpty());
}

TEST(ValidateJobSpecTest, AdapterRanges) {
  JobSpec s = Valid();
  s.adapter = AdapterSpec{.type = "lora"};
  EXPECT_THAT(Fields(s), IsEmpty()) << Message(s);
  s.adapter = AdapterSpec{.type = "lora", .rank = kMaxLoraRank, .alpha = 1e-3, .dropout = 0.99,
                          .target_modules = {"q_proj", "c_attn", "model.layers.0.mlp.up_proj"},
                          .init_from = "adapters/a"};
  EXPECT_THAT(Fields(s), IsEmpty()) << Message(s);

  s.adapter = AdapterSpec{.type = "", .rank = 0, .alpha = 0, .dropout = 1};
  EXPECT_THAT(Fields(s),
              ElementsAre("adapter.type", "adapter.rank", "adapter.alpha", "adapter.dropout"));
  EXPECT_EQ(Message(s),
            "adapter.type: required in the adapter section (one of lora)\n"
            "adapter.rank: must be in [1, 4096] (got 0)\n"
            "adapter.alpha: must be a finite number > 0 (got 0)\n"
            "adapter.dropout: must be a finite number in [0, 1) (got 1)");
  s.adapter = AdapterSpec{.type = "LoRA", .rank = kMaxLoraRank + 1, .alpha = NAN,
                          .dropout = -0.1};
  EXPECT_THAT(Fields(s),
              ElementsAre("adapter.type", "adapter.rank", "adapter.alpha", "adapter.dropout"));
  EXPECT_THAT(Message(s), HasSubstr("adapter.type: must be one of lora (got \"LoRA\")"));
}

TEST(ValidateJobSpecTest, AdapterTargetModules) {
  JobSpec s = Valid();
  s.adapter = AdapterSpec{.type = "lora",
                          .target_modules = {"q_proj", "", "v proj", "q_proj", "a/b", "v_proj",
                                             "v_proj", std::string(kMaxLoraTargetLength + 1, 'x')}};
  EXPECT_THAT(Fields(s), ElementsAre("adapter.target_modules[1]", "adapter.target_modules[2]",
                                     "adapter.target_modules[3]", "adapter.target_modules[4]",
                                     "adapter.target_modules[6]", "adapter.target_modules[7]"));
  EXPECT_THAT(Message(s), HasSubstr("adapter.target_modules[2]: a module name is 1-128 characters "
                                    "of A-Z, a-z, 0-9, '_' and '.' (got \"v proj\")"));
  EXPECT_THAT(Message(s), HasSubstr("adapter.target_modules[3]: \"q_proj\" is listed twice (also "
                                    "adapter.target_modules[0])"));
  EXPECT_THAT(Message(s), HasSubstr("adapter.target_modules[6]: \"v_proj\" is listed twice (also "
                                    "adapter.target_modules[5])"));
  s.adapter->target_modules.assign(kMaxLoraTargets, "q_proj");
  for (int i = 0; i < kMaxLoraTargets; ++i) s.adapter->target_modules[i] += std::to_string(i);
  EXPECT_THAT(Fields(s), IsEmpty());
  s.adapter->target_modules.push_back("k_proj");
  EXPECT_THAT(Fields(s), ElementsAre("adapter.target_modules"));
  EXPECT_THAT(Message(s), HasSubstr("at most 64 names (got 65)"));
}

TEST(ValidateJobSpecTest, AdapterSchedules) {
  JobSpec s = Valid();
  s.adapter = AdapterSpec{.type = "lora"};
  for (const char* ok : {"mobius", "roundrobin"}) {
    s.plan.schedule = ok;
    EXPECT_THAT(Fields(s), IsEmpty()) << ok;
  }
  s.plan.schedule = "resident";
  EXPECT_EQ(Message(s),
            "adapter: schedule resident does not train adapters yet; use mobius or roundrobin");
  s.plan.schedule = "mobius";
  s.training.optimizer_staleness = 1;
  EXPECT_THAT(Fields(s), ElementsAre("training.optimizer_staleness"));
}

TEST(ValidateJobSpecTest, PrecisionIsBf16OrFp16AndFp16NeedsTheHostOptimizer) {
  JobSpec s = Valid();
  for (const char* ok : {"bf16", "fp16"}) {
    s.training.precision = ok;
    EXPECT_THAT(Fields(s), IsEmpty()) << ok;
  }
  s.training.precision = "fp8";
  EXPECT_EQ(Message(s), "training.precision: must be one of bf16, fp16 (got \"fp8\")");
  s.training.precision = "fp16";
  s.plan.schedule = "resident";
  EXPECT_THAT(Fields(s), ElementsAre("training.precision"));
}

TEST(ValidateJobSpecTest, AdapterInitFromIsAPath) {
  JobSpec s = Valid();
  s.adapter = AdapterSpec{.type = "lora", .init_from = "adapters/start"};
  EXPECT_THAT(Fields(s), IsEmpty());
  EXPECT_THAT(Message(s, {.require_absolute_paths = true}),
              HasSubstr("adapter.init_from: must be an absolute path (got \"adapters/start\")"));
  s.adapter->init_from = std::string("/a\nb");
  EXPECT_THAT(Fields(s), ElementsAre("adapter.init_from"));
}

// A real model directory and dataset in a temporary directory.
class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/jobspec_validate_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::filesystem::create_directories(dir_ + "/model");
    Write(dir_ + "/model/config.json", "{}");
    Write(dir_ + "/model/model.safetensors", std::string(16, '\0'));
    Write(dir_ + "/train.tok", std::string("MOBTOKv1") + std::string(56, '\0'));
    Write(dir_ + "/train.jsonl", "{\"text\": \"a\"}\n");
    options_.check_files_exist = true;
    options_.require_absolute_paths = true;
    spec_ = Valid();
    spec_.model_dir = dir_ + "/model";
    spec_.dataset.path = dir_ + "/train.tok";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static void Write(const std::string& path, const std::string& data) {
    std::ofstream(path, std::ios::binary) << data;
  }

  std::string dir_;
  ValidateOptions options_;
  JobSpec spec_;
};

TEST_F(FilesTest, ExistingFilesPass) {
  EXPECT_TRUE(ValidateJobSpec(spec_, options_).ok()) << ValidateJobSpec(spec_, options_);
}

TEST_F(FilesTest, MissingModelDirectory) {
  spec_.model_dir = dir_ + "/nope";
  EXPECT_THAT(Message(spec_, options_),
              HasSubstr("model_dir: cannot access \"" + dir_ + "/nope\" (No such file or directory)"));
}

TEST_F(FilesTest, ModelDirectoryWithoutConfigOrWeights) {
  std::filesystem::remove(dir_ + "/model/config.json");
  EXPECT_THAT(Message(spec_, options_), HasSubstr("model_dir: no readable config.json in"));
  Write(dir_ + "/model/config.json", "{}");
  std::filesystem::remove(dir_ + "/model/model.safetensors");
  EXPECT_THAT(Message(spec_, options_), HasSubstr("model_dir: no *.safetensors files in"));
  spec_.model_dir = dir_ + "/train.tok";
  EXPECT_THAT(Message(spec_, options_), HasSubstr("model_dir: not a directory"));
}

TEST_F(FilesTest, DatasetMustBeAReadableTokenFile) {
  spec_.dataset.path = dir_ + "/missing.tok";
  EXPECT_THAT(Message(spec_, options_), HasSubstr("dataset.path: cannot read"));
  spec_.dataset.path = dir_;
  EXPECT_THAT(Message(spec_, options_), HasSubstr("dataset.path: not a regular file"));
  spec_.dataset.path = dir_ + "/train.jsonl";
  EXPECT_THAT(Message(spec_, options_), HasSubstr("dataset.path: not a Mobius token file"));
  if (geteuid() != 0) {  // root reads everything
    chmod((dir_ + "/train.tok").c_str(), 0);
    spec_.dataset.path = dir_ + "/train.tok";
    EXPECT_THAT(Message(spec_, options_), HasSubstr("(Permission denied)"));
  }
}

TEST_F(FilesTest, TextDatasetsNeedATokenizer) {
  spec_.dataset.path = dir_ + "/train.jsonl";
  spec_.dataset.format = "jsonl";
  EXPECT_THAT(Message(spec_, options_),
              HasSubstr("dataset.tokenizer: no tokenizer.json or tokenizer.model in \"" + dir_ +
                        "/model\" (the tokenizer defaults to model_dir)"));
  Write(dir_ + "/model/tokenizer.json", "{}");
  EXPECT_TRUE(ValidateJobSpec(spec_, options_).ok()) << ValidateJobSpec(spec_, options_);
  spec_.dataset.tokenizer = dir_ + "/sp";
  std::filesystem::create_directories(dir_ + "/sp");
  EXPECT_THAT(Fields(spec_, options_), ElementsAre("dataset.tokenizer"));
  Write(dir_ + "/sp/tokenizer.model", "x");
  EXPECT_THAT(Fields(spec_, options_), IsEmpty());
}

TEST_F(FilesTest, AdapterInitFromIsAPeftAdapterDirectory) {
  spec_.adapter = AdapterSpec{.type = "lora", .init_from = dir_ + "/adapter"};
  EXPECT_THAT(Message(spec_, options_),
              HasSubstr("adapter.init_from: cannot access \"" + dir_ +
                        "/adapter\" (No such file or directory)"));
  std::filesystem::create_directories(dir_ + "/adapter");
  Write(dir_ + "/adapter/adapter_config.json", "{}");
  EXPECT_THAT(Message(spec_, options_),
              HasSubstr("adapter.init_from: no readable adapter_model.safetensors in"));
  Write(dir_ + "/adapter/adapter_model.safetensors", std::string(16, '\0'));
  EXPECT_TRUE(ValidateJobSpec(spec_, options_).ok()) << ValidateJobSpec(spec_, options_);
  spec_.adapter->init_from = dir_ + "/train.tok";
  EXPECT_THAT(Message(spec_, options_), HasSubstr("adapter.init_from: not a directory"));
}

}  // namespace
}  // namespace mobius::jobspec
