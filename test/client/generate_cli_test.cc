// `mobius generate` end to end, as users run it: real processes (`mobius` spawns the
// `mobius-worker` next to it) on a model `mobius-worker init-model` writes into a temp directory
// (with a GPT-2 byte-level BPE tokenizer.json from test/data/tokenizers), and on the golden
// model + PEFT adapter whose greedy ids Hugging Face recorded (test/reference/golden_generate).
// Bad inputs exit with 2 and name the flag or file.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"
#include "test/testing/shell.h"

namespace mobius {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

// A fresh path under gtest's temp directory, unique to this process.
std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/mobius_" + name + "_" + std::to_string(getpid());
}

Result RunBinary(const std::string& binary, const std::string& args) {
  static int n = 0;
  const std::string err_file = TempPath("generate_cli_err_" + std::to_string(++n));
  const std::string cmd = testing::BinaryPath(binary) + " " + args + " 2>" + err_file;
  const testing::ShellResult ran = testing::RunShell(cmd);
  Result r;
  r.exit_code = ran.exit_code;
  r.out = ran.output;
  std::ifstream in(err_file);
  std::stringstream text;
  text << in.rdbuf();
  r.err = text.str();
  fs::remove(err_file);
  return r;
}

Result Mobius(const std::string& args) { return RunBinary("bin/mobius", "generate " + args); }

class GenerateCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(TempPath("generate_cli_model"));
    fs::remove_all(*dir_);
    const Result init = RunBinary("bin/mobius-worker",
                            "init-model --family llama --preset tiny --vocab 768 --seed 5 --out " +
                                *dir_ + "/llama");
    ASSERT_EQ(init.exit_code, 0) << init.err;
    fs::copy_file(testing::SourcePath("test/data/tokenizers/gpt2/tokenizer.json"),
                  *dir_ + "/llama/tokenizer.json");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string Model() { return *dir_ + "/llama"; }
  static std::string* dir_;
};
std::string* GenerateCli::dir_ = nullptr;

TEST_F(GenerateCli, PromptIdsPrintIdsAndText) {
  const Result r = Mobius(Model() + " --prompt_ids 5,17,300 --max_new_tokens 6 --backend cpu");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 1u) << r.out;
  EXPECT_THAT(lines[0], StartsWith("ids: "));
  const std::vector<std::string> ids = absl::StrSplit(lines[0].substr(5), ' ');
  EXPECT_GE(ids.size(), 1u);
  EXPECT_LE(ids.size(), 6u);  // fewer when the model's eos (2) came first
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_THAT(lines[1], StartsWith("text: "));
  // Greedy: the same again; the default backend (auto) falls back to the CPU without a GPU.
  const Result again = Mobius(Model() + " --prompt_ids 5,17,300 --max_new_tokens 6");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, r.out);
}

TEST_F(GenerateCli, PromptTextUsesTheModelsTokenizer) {
  const Result r = Mobius(Model() + " --prompt 'Hello world' --max_new_tokens 5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.back(), '\n');
}

TEST_F(GenerateCli, SamplingIsSeeded) {
  const std::string args = Model() + " --prompt_ids 5,17 --max_new_tokens 12 --temperature 1.2 "
                                     "--top_p 0.95 --seed ";
  const Result a = Mobius(args + "11"), b = Mobius(args + "11");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  std::set<std::string> outs = {a.out};
  for (const char* seed : {"12", "13", "14"}) outs.insert(Mobius(args + seed).out);
  EXPECT_GE(outs.size(), 3u);
}

TEST_F(GenerateCli, GoldenModelWithAdapterMatchesHuggingFace) {
  std::ifstream in(testing::SourcePath("test/reference/golden_generate/generate.json"));
  const nlohmann::json golden = nlohmann::json::parse(in);
  for (const nlohmann::json& c : golden.at("cases")) {
    if (c.at("adapter").is_null() || c.at("base") != "llama_gqa") continue;
    SCOPED_TRACE(c.at("name").get<std::string>());
    const std::vector<int32_t> prompt = c.at("prompt"), want = c.at("tokens");
    const Result r = Mobius(
        testing::SourcePath("test/reference/golden/llama_gqa") + " --adapter " +
        testing::SourcePath("test/reference/golden_lora/" + c.at("adapter").get<std::string>()) +
        " --prompt_ids " + absl::StrJoin(prompt, ",") + " --max_new_tokens " +
        std::to_string(c.at("max_new_tokens").get<int>()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "ids: " + absl::StrJoin(want, " ") + "\n");  // no tokenizer: ids only
  }
}

// An adapter trained over an NF4 base (QLoRA) generates over that base: the worker quantises the
// base's linears as training did (--lora_base nf4, or the checkpoint's trainer_state.json), which
// changes what a model generates, and says so; a bad value is refused naming the flag.
TEST_F(GenerateCli, Nf4BaseIsQuantisedAsTrainingSawIt) {
  const std::string args = Model() + " --prompt_ids 5,17,300,41 --max_new_tokens 24 --backend cpu";
  const Result bf16 = Mobius(args);
  const Result nf4 = RunBinary("bin/mobius-worker", "generate " + args + " --lora_base nf4");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  ASSERT_EQ(nf4.exit_code, 0) << nf4.err;
  EXPECT_THAT(nf4.err, HasSubstr("trained over an NF4 base"));
  EXPECT_NE(nf4.out, bf16.out);  // 24 greedy tokens of a random model: the 4-bit base shows
  const Result again = Mobius(args + " --lora_base nf4");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, nf4.out);
  // An adapter checkpoint directory whose trainer_state.json names the NF4 base.
  const std::string adapter = TempPath("generate_cli_nf4_adapter");
  fs::remove_all(adapter);
  fs::create_directories(adapter);
  fs::copy(testing::SourcePath("test/reference/golden_lora/llama_gqa"), adapter,
           fs::copy_options::recursive);
  const std::string base = testing::SourcePath("test/reference/golden/llama_gqa");
  const std::string golden = base + " --prompt_ids 3,9,12 --max_new_tokens 8 --adapter " + adapter;
  const Result plain = RunBinary("bin/mobius-worker", "generate " + golden);
  std::ofstream(adapter + "/trainer_state.json") << R"({"step": 5, "adapter": "lora", "base_quantization": "nf4"})";
  const Result marked = RunBinary("bin/mobius-worker", "generate " + golden);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(marked.exit_code, 0) << marked.err;
  EXPECT_THAT(plain.err, ::testing::Not(HasSubstr("NF4 base")));
  EXPECT_THAT(marked.err, HasSubstr("trained over an NF4 base"));
  const Result bad = Mobius(args + " --lora_base int4");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--lora_base must be bf16 or nf4"));
  fs::remove_all(adapter);
}

// --chat: the prompt is a user message rendered with the model's own template (Qwen3's here, with
// the chat fixture's tokenizer); the worker says which template and end-of-turn token it uses,
// and the same prompt rendered by hand and given as ids generates the same text up to that token.
TEST_F(GenerateCli, ChatRendersTheModelsTemplate) {
  const std::string chat_model = TempPath("generate_cli_chat_model");
  fs::remove_all(chat_model);
  const Result init = RunBinary("bin/mobius-worker",
                                "init-model --family llama --preset tiny --vocab 896 --seed 3 "
                                "--out " + chat_model);
  ASSERT_EQ(init.exit_code, 0) << init.err;
  fs::copy_file(testing::SourcePath("test/data/chat_templates/tokenizer.json"),
                chat_model + "/tokenizer.json");
  fs::copy_file(testing::SourcePath("test/data/chat_templates/qwen3/tokenizer_config.json"),
                chat_model + "/tokenizer_config.json");
  const Result r = RunBinary("bin/mobius-worker",
                             "generate " + chat_model + " --chat --system 'Be brief.' --prompt "
                             "'Hello there' --chat_template_kwargs enable_thinking=false "
                             "--max_new_tokens 6 --backend cpu");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("generate --chat: " + chat_model + "/tokenizer_config.json"));
  EXPECT_THAT(r.err, HasSubstr("end of turn \"<|im_end|>\""));
  const Result cli = Mobius(chat_model + " --chat --system 'Be brief.' --prompt 'Hello there' "
                            "--chat_template_kwargs enable_thinking=false --max_new_tokens 6");
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_EQ(cli.out, r.out);
  // A model without a template: exit 2 naming --chat and the fix.
  const Result none = Mobius(Model() + " --chat --prompt hi --max_new_tokens 2");
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_THAT(none.err, HasSubstr("--chat: the model"));
  EXPECT_THAT(none.err, HasSubstr("has no chat template"));
  EXPECT_EQ(Mobius(Model() + " --prompt hi --system x --max_new_tokens 2").exit_code, 2);
  EXPECT_EQ(Mobius(Model() + " --chat --prompt_ids 1 --max_new_tokens 2").exit_code, 2);
  fs::remove_all(chat_model);
}

// A mixture of experts: routed experts (only the experts a step routes to uploaded) give the
// resident model's ids; auto routes when the device cap cannot hold the resident model, and says
// how much it moved.
TEST_F(GenerateCli, MixtureOfExpertsRoutesItsExpertsWhenTheyDoNotFit) {
  const std::string moe = *dir_ + "/qwen3_moe";
  const Result init = RunBinary("bin/mobius-worker",
                                "init-model --family qwen3_moe --preset tiny --vocab 512 --experts "
                                "16 --experts_per_token 2 --seed 9 --out " + moe);
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const std::string args = moe + " --prompt_ids 5,17,300,41 --max_new_tokens 8 --backend cpu";
  const Result resident = Mobius(args + " --expert_residency resident");
  ASSERT_EQ(resident.exit_code, 0) << resident.err;
  EXPECT_THAT(resident.err, ::testing::Not(HasSubstr("routed experts")));
  const Result routed = Mobius(args + " --expert_residency routed");
  ASSERT_EQ(routed.exit_code, 0) << routed.err;
  EXPECT_EQ(routed.out, resident.out);
  // The worker's log (`mobius` relays its error line only) says what moved.
  const Result logged = RunBinary("bin/mobius-worker", "generate " + args +
                                                           " --expert_residency routed");
  ASSERT_EQ(logged.exit_code, 0) << logged.err;
  EXPECT_EQ(logged.out, resident.out);
  EXPECT_THAT(logged.err, HasSubstr("generate: routed experts (--expert_residency routed)"));
  EXPECT_THAT(logged.err, HasSubstr("copying every expert of each block would have moved"));
  // auto under a cap: the worker's --device_memory_bytes (the CPU backend's), set by hand.
  const Result tight =
      RunBinary("bin/mobius-worker", "generate " + args + " --device_memory_bytes 700000");
  ASSERT_EQ(tight.exit_code, 0) << tight.err;
  EXPECT_EQ(tight.out, resident.out);
  EXPECT_THAT(tight.err, HasSubstr("generate: routed experts (the resident model needs"));
  const Result roomy = RunBinary("bin/mobius-worker", "generate " + args);
  EXPECT_THAT(roomy.err, ::testing::Not(HasSubstr("routed experts")));
  for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {moe + " --prompt_ids 1 --max_new_tokens 2 --expert_residency sometimes",
            "--expert_residency must be auto, resident or routed"},
           {Model() + " --prompt_ids 1 --max_new_tokens 2 --expert_residency routed",
            "--expert_residency routed: the model has no experts"},
           {moe + " --prompt_ids 1 --max_new_tokens 2 --expert_residency resident "
                  "--expert_cache_bytes 100000",
            "--expert_cache_bytes needs routed experts"}}) {
    SCOPED_TRACE(flags);
    const Result r = Mobius(flags);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr(says));
  }
}

TEST_F(GenerateCli, BadInputExitsTwoNamingTheFlagOrFile) {
  struct Bad {
    std::string args, says;
  };
  const std::string m = Model();
  const std::string other_adapter = testing::SourcePath("test/reference/golden_lora/llama_gqa");
  for (const Bad& b : std::vector<Bad>{
           {"--prompt_ids 1 --max_new_tokens 2", "expected one MODEL_DIR"},
           {m + "/nope --prompt_ids 1 --max_new_tokens 2", "does not exist"},
           {m + " --max_new_tokens 2", "--prompt"},
           {m + " --prompt hi --prompt_ids 1 --max_new_tokens 2", "--prompt_ids"},
           {m + " --prompt_ids 1,x --max_new_tokens 2", "--prompt_ids: \"x\""},
           {m + " --prompt_ids 1,768 --max_new_tokens 2", "--prompt_ids: id 768"},
           {m + " --prompt_ids 1 --max_new_tokens 0", "--max_new_tokens"},
           {m + " --prompt_ids 1 --max_new_tokens 2 --temperature -1", "--temperature"},
           {m + " --prompt_ids 1 --max_new_tokens 2 --temperature 1 --top_p 1.5", "--top_p"},
           {m + " --prompt_ids 1 --max_new_tokens 2 --adapter " + m + "/none", "--adapter"},
           {m + " --prompt_ids 1 --max_new_tokens 2 --adapter " + other_adapter,
            "does not fit the model"},
           {testing::SourcePath("test/reference/golden/gpt2") + " --prompt 'hi' --max_new_tokens 2",
            "--prompt needs the tokenizer"},
           {testing::SourcePath("test/reference/golden/gpt2") +
                " --prompt_ids 1,2 --max_new_tokens 40",
            "positions"},
       }) {
    SCOPED_TRACE(b.args);
    const Result r = Mobius(b.args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr("mobius generate: "));
    EXPECT_THAT(r.err, HasSubstr(b.says));
  }
}

}  // namespace
}  // namespace mobius
