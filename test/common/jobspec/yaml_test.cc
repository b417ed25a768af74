#include "common/jobspec/yaml.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"

namespace mobius::jobspec {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace fs = std::filesystem;

std::string Specs(const std::string& relative) {
  return fs::path(testing::SourcePath("test/data/specs/" + relative)).lexically_normal().string();
}
std::string Data(const std::string& relative) {
  return fs::path(testing::SourcePath("test/data/" + relative)).lexically_normal().string();
}

JobSpec ParseOk(absl::string_view yaml, YamlOptions options = {}) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, options);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec{};
}

std::string ParseError(absl::string_view yaml, YamlOptions options = {}) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, options);
  EXPECT_FALSE(spec.ok()) << yaml;
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << spec.status();
  return std::string(spec.status().message());
}

constexpr const char* kMinimal =
    "model_dir: /m\n"
    "dataset: {path: /d}\n"
    "training: {steps: 10, global_batch: 8, seq_len: 16}\n";

// --- The good corpus parses to exactly the expected structs. ---

TEST(JobSpecYamlTest, TinyLlamaExample) {
  absl::StatusOr<JobSpec> spec = ParseJobSpecFile(Specs("good/tiny-llama.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  JobSpec want;
  want.name = "tiny-llama-sft";
  want.labels = {{"team", "research"}, {"purpose", "example"}};
  want.priority = 10;
  want.model_dir = Data("models/tiny-llama");
  want.dataset.path = Data("datasets/text.jsonl");
  want.dataset.format = "jsonl";
  want.dataset.tokenizer = Data("models/tiny-llama");
  want.dataset.eval_fraction = 0.1;
  TrainingSpec& t = want.training;
  t.steps = 200;
  t.global_batch = 8;
  t.microbatch = 2;
  t.seq_len = 128;
  t.lr = 1e-3;
  t.min_lr = 1e-4;
  t.warmup_steps = 20;
  t.weight_decay = 0.01;
  t.grad_clip = 1.0;
  t.seed = 42;
  t.eval_every = 50;
  want.resources = {2, int64_t{8} << 30};
  want.checkpoint = {Specs("good/checkpoints/tiny-llama-sft"), 100};
  want.max_restarts = 2;
  EXPECT_EQ(*spec, want);
}

TEST(JobSpecYamlTest, MinimalTakesTheDefaults) {
  absl::StatusOr<JobSpec> spec = ParseJobSpecFile(Specs("good/minimal.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  JobSpec want;
  want.model_dir = "/models/llama-3-8b";
  want.dataset.path = "/data/train.tok";
  want.training.steps = 1000;
  want.training.global_batch = 32;
  want.training.microbatch = 32;  // normalized: = global_batch
  want.training.seq_len = 2048;
  EXPECT_EQ(*spec, want);
  // The defaults are TrainerOptions's (common/run/trainer_options.h).
  EXPECT_EQ(spec->training.lr, 3e-4);
  EXPECT_EQ(spec->training.grad_clip, 1.0);
  EXPECT_EQ(spec->training.beta2, 0.95);
  EXPECT_EQ(spec->training.lr_schedule, "cosine");
  EXPECT_EQ(spec->dataset.format, "tokens");
  EXPECT_EQ(spec->max_restarts, 1);
  EXPECT_EQ(spec->plan.schedule, "mobius");
}

TEST(JobSpecYamlTest, FlowStyleAllGpusAndRelativePaths) {
  absl::StatusOr<JobSpec> spec = ParseJobSpecFile(Specs("good/flow-style-all-gpus.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  JobSpec want;
  want.name = "qwen.flow_1";
  want.labels = {{"owner", "alice"}, {"ticket", "1234"}};
  want.model_dir = Specs("good/models/qwen3-0.6b");
  want.dataset.path = Specs("good/corpus/plain.txt");
  want.dataset.format = "text";
  want.dataset.tokenizer = Specs("good/tokenizers/qwen");
  want.training.epochs = 3;
  want.training.global_batch = 64;
  want.training.microbatch = 16;
  want.training.seq_len = 1024;
  want.training.lr_schedule = "constant";
  want.training.lr = 2.5e-5;
  want.training.optimizer_staleness = 1;
  want.resources = {0, int64_t{3} << 29};
  want.plan = {"roundrobin", "uniform", "sequential", 8, "pool"};
  EXPECT_EQ(*spec, want);
}

TEST(JobSpecYamlTest, EveryFieldSet) {
  absl::StatusOr<JobSpec> spec = ParseJobSpecFile(Specs("good/every-field.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  JobSpec want;
  want.name = "every-field";
  want.labels = {{"a", "1"}, {"b", "two"}};
  want.priority = -5;
  want.model_dir = "/m";
  want.dataset.paths = {"/d/a.jsonl", "/d/b.jsonl"};
  want.dataset.format = "chat";
  want.dataset.tokenizer = "/t";
  want.dataset.text_field = "body";
  want.dataset.prompt_field = "question";
  want.dataset.completion_field = "answer";
  want.dataset.messages_field = "turns";
  want.dataset.chat_template = "plain";
  want.dataset.skip_bad_lines = true;
  want.dataset.eval_fraction = 0.25;
  want.training = {500, 0, 12, 3, 333, 0.002, 0.0001, 50, "constant", 0.1, 0, 0.8, 0.999, 1e-6,
                   18446744073709551615ull, 25, 0};
  want.resources = {4, 21474836480};
  want.plan = {"mobius", "mip", "sequential", 4, "static"};
  want.checkpoint = {"/ckpt", 100};
  want.max_restarts = 0;
  want.adapter = AdapterSpec{"lora", 16, 32, 0.05, {"q_proj", "v_proj", "down_proj"},
                             "/adapters/start"};
  EXPECT_EQ(*spec, want);
}

// No section: full fine-tuning. A section, even an empty one, is an adapter with PEFT's defaults
// (and then needs its type); null counts as absent, like every other key.
TEST(JobSpecYamlTest, AdapterSectionPresenceAndDefaults) {
  EXPECT_FALSE(ParseOk(kMinimal).adapter.has_value());
  EXPECT_FALSE(ParseOk(std::string(kMinimal) + "adapter: ~\n").adapter.has_value());
  const JobSpec lora = ParseOk(std::string(kMinimal) + "adapter: {type: lora}\n");
  ASSERT_TRUE(lora.adapter.has_value());
  EXPECT_EQ(*lora.adapter, (AdapterSpec{"lora", 8, 8.0, 0.0, {}, ""}));  // targets: the family's
  EXPECT_EQ(ParseError(std::string(kMinimal) + "adapter: {}\n"),
            "job spec:4:10: adapter.type: required in the adapter section (one of lora)");
  EXPECT_EQ(ParseError(std::string(kMinimal) + "adapter: lora\n"),
            "job spec:4:10: adapter: must be a mapping of fields (got \"lora\")");
  EXPECT_EQ(ParseError(std::string(kMinimal) + "adapter: {type: lora, target_modules: [q_proj, "
                                               "[v_proj]]}\n"),
            "job spec:4:48: adapter.target_modules[1]: must be a string (got a sequence)");
}

TEST(JobSpecYamlTest, AdapterInitFromIsResolvedLikeModelDir) {
  YamlOptions options;
  options.base_dir = "/jobs/spec";
  const JobSpec spec = ParseOk("model_dir: ../models/m\ndataset: {path: /d}\n"
                               "training: {steps: 10, global_batch: 8, seq_len: 16}\n"
                               "adapter: {type: lora, init_from: ./runs/a/export-100/}\n",
                               options);
  EXPECT_EQ(spec.model_dir, "/jobs/models/m");
  ASSERT_TRUE(spec.adapter.has_value());
  EXPECT_EQ(spec.adapter->init_from, "/jobs/spec/runs/a/export-100");
}

// --- The bad corpus: every file fails with INVALID_ARGUMENT naming what its first line expects.

TEST(JobSpecYamlTest, BadCorpus) {
  int files = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(Specs("bad"))) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    const std::string path = entry.path().string();
    std::ifstream in(path);
    std::string first;
    std::getline(in, first);
    ASSERT_THAT(first, StartsWith("# expect: ")) << path;
    const std::string expect = first.substr(10);
    absl::StatusOr<JobSpec> spec = ParseJobSpecFile(path);
    ASSERT_FALSE(spec.ok()) << path << " parsed";
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(std::string(spec.status().message()), StartsWith(path + ":")) << path;
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(expect)) << path;
  }
  EXPECT_GE(files, 25);
}

// --- Errors: positions, field paths, every problem at once. ---

TEST(JobSpecYamlTest, ValidationErrorsCarryTheLineOfTheField) {
  const std::string yaml =
      "model_dir: /m\n"
      "dataset: {path: /d}\n"
      "training:\n"
      "  steps: 10\n"
      "  global_batch: 8\n"
      "  microbatch: 3\n"
      "  seq_len: 16\n";
  EXPECT_EQ(ParseError(yaml), "job spec:6:15: training.microbatch: must divide "
                              "training.global_batch 8 (got 3)");
  YamlOptions named;
  named.origin = "job.yaml";
  EXPECT_THAT(ParseError("training:\n  steps: 10\n", named),
              HasSubstr("\njob.yaml:2:3: training.global_batch: required"));
  EXPECT_THAT(ParseError("training:\n  steps: 10\n", named),
              StartsWith("job.yaml: model_dir: required (a path)\n"));
}

TEST(JobSpecYamlTest, StructuralErrorsAreAllReported) {
  const std::string message = ParseError(
      "model_dir: /m\n"
      "dataset: {path: /d, fromat: jsonl}\n"
      "training:\n"
      "  steps: ten\n"
      "  global_batch: \"8\"\n"
      "  seq_len: [16]\n"
      "  learning_rate: 1e-4\n");
  std::vector<std::string> lines = absl::StrSplit(message, '\n');
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "job spec:2:21: dataset.fromat: unknown key (did you mean \"format\"?)",
                       "job spec:4:10: training.steps: must be an integer (got \"ten\")",
                       "job spec:5:17: training.global_batch: must be an integer (got the quoted "
                       "string \"8\")",
                       "job spec:6:12: training.seq_len: must be an integer (got a sequence)",
                       "job spec:7:3: training.learning_rate: unknown key; expected one of steps, "
                       "epochs, global_batch, microbatch, seq_len, lr, min_lr, warmup_steps, "
                       "lr_schedule, weight_decay, grad_clip, beta1, beta2, eps, seed, "
                       "eval_every, optimizer_staleness, precision"}));
}

TEST(JobSpecYamlTest, UnknownKeyHints) {
  EXPECT_THAT(ParseError(std::string(kMinimal) + "max_restart: 2\n"),
              HasSubstr("max_restart: unknown key (did you mean \"max_restarts\"?)"));
  EXPECT_THAT(ParseError(std::string(kMinimal) + "gpus: 2\n"),
              HasSubstr("gpus: unknown key (did you mean resources.gpus?)"));
  EXPECT_THAT(ParseError(std::string(kMinimal) + "plan: {model_dir: /x}\n"),
              HasSubstr("plan.model_dir: unknown key (model_dir is a top-level field)"));
  EXPECT_THAT(ParseError(std::string(kMinimal) + "xyzzy: 1\n"),
              HasSubstr("xyzzy: unknown key; expected one of name, labels, priority, model_dir"));
}

TEST(JobSpecYamlTest, SyntaxErrorsGiveLineAndColumn) {
  EXPECT_EQ(ParseError("model_dir: /m\ndataset: {path: /d\ntraining: 1\n"),
            "job spec:3:9: YAML syntax error: end of map flow not found");
  EXPECT_THAT(ParseError("a: 1\n  b: 2\n"), StartsWith("job spec:2:4: YAML syntax error: "));
}

TEST(JobSpecYamlTest, DocumentShape) {
  EXPECT_THAT(ParseError(std::string(kMinimal) + "---\nname: x\n"),
              HasSubstr("one YAML document expected (got more)"));
  // yaml-cpp 0.7 would loop forever on these (jbeder/yaml-cpp#1040).
  EXPECT_EQ(ParseError(","), "job spec:1:1: YAML syntax error: unexpected \",\"");
  EXPECT_EQ(ParseError("# comment\n  , a\nb: c\n"), "job spec:2:3: YAML syntax error: unexpected \",\"");
  EXPECT_EQ(ParseError("[1, 2]"), "job spec:1:1: a job spec is a mapping of fields (got a sequence)");
  EXPECT_EQ(ParseError("just text"), "job spec:1:1: a job spec is a mapping of fields (got \"just text\")");
  EXPECT_THAT(ParseError(""), StartsWith("job spec: model_dir: required"));
  EXPECT_THAT(ParseError("# nothing\n"), StartsWith("job spec: model_dir: required"));
  EXPECT_THAT(ParseError("name: " + std::string(5000, '[') + "\n"),
              HasSubstr("YAML nested too deeply"));
  EXPECT_THAT(ParseError(std::string(kMaxJobSpecBytes + 1, ' ')), HasSubstr("larger than 1048576"));
}

TEST(JobSpecYamlTest, TextMustBeYamlCharactersInUtf8) {
  // yaml-cpp 0.7 allocates without bound on "# \xe6\n," (found by the fuzzer): malformed UTF-8
  // never reaches it.
  EXPECT_EQ(ParseError("# \xe6\n,"), "job spec:1:3: not valid UTF-8 (byte 0xe6)");
  EXPECT_EQ(ParseError("name: caf\xc3\xa9\nx: \xc0\xaf"), "job spec:2:4: not valid UTF-8 (byte 0xc0)");
  EXPECT_EQ(ParseError("a: \x1b[31m"), "job spec:1:4: character U+001B is not allowed in YAML");
  EXPECT_EQ(ParseError("a: \xc2\x9b"), "job spec:1:4: character U+009B is not allowed in YAML");
  EXPECT_EQ(ParseError(std::string("a: b\0", 6)), "job spec:1:5: character U+0000 is not allowed in YAML");
  // A byte order mark, tabs in values, CRLF line ends and non-ASCII text are fine.
  JobSpec spec = ParseOk("\xef\xbb\xbfname: x\r\nlabels: {team: \"\xe6\x97\xa5\xe6\x9c\xac\"}\r\n"
                         "model_dir: /m\t\ndataset: {path: /d}\n"
                         "training: {steps: 10, global_batch: 8, seq_len: 16}\n");
  EXPECT_EQ(spec.name, "x");
  EXPECT_EQ(spec.labels["team"], "\xe6\x97\xa5\xe6\x9c\xac");
  EXPECT_EQ(spec.model_dir, "/m");
}

TEST(JobSpecYamlTest, NullMeansAbsent) {
  JobSpec spec = ParseOk(std::string(kMinimal) + "name: ~\nlabels:\nplan: null\nmax_restarts:\n");
  EXPECT_EQ(spec.name, "");
  EXPECT_TRUE(spec.labels.empty());
  EXPECT_EQ(spec.plan.schedule, "mobius");
  EXPECT_EQ(spec.max_restarts, 1);
}

TEST(JobSpecYamlTest, ScalarForms) {
  JobSpec spec = ParseOk(
      "name: \"007\"\n"  // a quoted number is fine where a string is expected
      "model_dir: '/m'\n"
      "dataset: {path: /d, eval_fraction: .5}\n"
      "training: {steps: +10, global_batch: 8, seq_len: 16, lr: 1E-3, min_lr: 0, eps: 5e-9,"
      " eval_every: 5}\n"
      "resources: {gpus: \"all\", device_memory_bytes: 4194304}\n");
  EXPECT_EQ(spec.name, "007");
  EXPECT_EQ(spec.model_dir, "/m");
  EXPECT_EQ(spec.dataset.eval_fraction, 0.5);
  EXPECT_EQ(spec.training.steps, 10);
  EXPECT_EQ(spec.training.lr, 1e-3);
  EXPECT_EQ(spec.training.eps, 5e-9);
  EXPECT_EQ(spec.resources.gpus, 0);
  EXPECT_EQ(spec.resources.device_memory_bytes, 4194304);
  EXPECT_THAT(ParseError(std::string(kMinimal) + "priority: 3000000000\n"),
              HasSubstr("priority: is out of range [-2147483648, 2147483647] (got \"3000000000\")"));
  EXPECT_THAT(ParseError(std::string(kMinimal) + "resources: {device_memory_bytes: 1e400}\n"),
              HasSubstr("resources.device_memory_bytes: not a byte size: \"1e400\""));
  EXPECT_THAT(ParseError("model_dir: /m\ndataset: {path: /d}\n"
                         "training: {steps: 10, global_batch: 8, seq_len: 16, lr: 1e999}\n"),
              HasSubstr("training.lr: is out of range (got \"1e999\")"));
}

TEST(JobSpecYamlTest, RelativePathsResolveAgainstTheBaseDirectory) {
  const std::string yaml =
      "model_dir: ../models/m\n"
      "dataset: {path: ./data/../data/train.jsonl, format: jsonl}\n"
      "training: {steps: 10, global_batch: 8, seq_len: 16}\n"
      "checkpoint: {dir: /abs/ckpt}\n";
  YamlOptions options;
  options.base_dir = "/home/alice/jobs";
  JobSpec spec = ParseOk(yaml, options);
  EXPECT_EQ(spec.model_dir, "/home/alice/models/m");
  EXPECT_EQ(spec.dataset.path, "/home/alice/jobs/data/train.jsonl");
  EXPECT_EQ(spec.dataset.tokenizer, "/home/alice/models/m");  // defaults to model_dir
  EXPECT_EQ(spec.checkpoint.dir, "/abs/ckpt");

  // Without a base directory the paths stay as written, and the server-side check rejects them.
  spec = ParseOk(yaml);
  EXPECT_EQ(spec.model_dir, "../models/m");
  YamlOptions server;
  server.validate_options.require_absolute_paths = true;
  EXPECT_THAT(ParseError(yaml, server),
              HasSubstr("job spec:1:12: model_dir: must be an absolute path (got \"../models/m\")"));
}

TEST(JobSpecYamlTest, ValidationCanBeLeftToTheCaller) {
  YamlOptions options;
  options.validate = false;
  JobSpec spec = ParseOk("training: {microbatch: 3, global_batch: 8}\n", options);
  EXPECT_EQ(spec.training.microbatch, 3);
  EXPECT_THAT(ParseError("training: {microbatch: x}\n", options), HasSubstr("training.microbatch"));
}

TEST(JobSpecYamlTest, FileErrors) {
  absl::StatusOr<JobSpec> spec = ParseJobSpecFile("/nonexistent/job.yaml");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("/nonexistent/job.yaml"));

  spec = ParseJobSpecFile(Specs("good"));
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("not a regular file"));

  const std::string big = testing::BinaryPath("jobspec_yaml_test_big.yaml");
  std::ofstream(big) << std::string(kMaxJobSpecBytes + 1, '#');
  spec = ParseJobSpecFile(big);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("larger than"));
  fs::remove(big);
}

TEST(JobSpecYamlTest, FileRelativeToTheWorkingDirectory) {
  // A relative spec path: its directory is made absolute, so the paths it names are too.
  const fs::path cwd = fs::current_path();
  fs::current_path(Specs("good"));
  absl::StatusOr<JobSpec> spec = ParseJobSpecFile("flow-style-all-gpus.yaml");
  fs::current_path(cwd);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model_dir, Specs("good/models/qwen3-0.6b"));
}

}  // namespace
}  // namespace mobius::jobspec
