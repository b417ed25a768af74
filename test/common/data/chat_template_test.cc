// A model's own chat template (common/data/chat_template.h): the published templates of Llama 3.1
// Instruct, Qwen3 (thinking on and off), Gemma 3, Mistral Instruct v0.3 and Phi-4 give exactly
// the token ids of transformers' apply_chat_template (test/data/chat_templates/golden.json, made
// by test/reference/make_chat_golden.py with transformers 4.57.6), and the loss mask covers
// exactly each assistant turn's text and its end-of-turn token(s) (the golden's per-template
// oracle). Then where templates come from, and bad input.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/data/chat_template.h"
#include "common/data/documents.h"
#include "common/data/hf_tokenizer.h"
#include "common/data/sp_tokenizer.h"
#include "common/data/tokenize_job.h"
#include "nlohmann/json.hpp"
#include "test/testing/paths.h"

namespace mobius::data {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

std::string Fixture(const std::string& rel) {
  return mobius::testing::SourcePath("test/data/chat_templates/" + rel);
}

std::string Temp(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/chat_" + std::to_string(getpid()) + "_" + name;
  std::filesystem::create_directories(dir);
  return dir;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The texts of the runs of consecutive target tokens, each decoded.
std::vector<std::string> TargetRuns(const Tokenizer& tok, const TokenizedDoc& d) {
  std::vector<std::string> runs;
  std::vector<int32_t> run;
  for (size_t i = 0; i <= d.ids.size(); ++i) {
    const bool target = i < d.ids.size() && (d.target.empty() || d.target[i] != 0);
    if (target) {
      run.push_back(d.ids[i]);
    } else if (!run.empty()) {
      runs.push_back(*tok.Decode(run, false));
      run.clear();
    }
  }
  return runs;
}

TEST(ChatTemplate, PublishedTemplatesGiveTransformersIdsAndMaskTheAssistantTurns) {
  auto tok = LoadHfTokenizer(Fixture("tokenizer.json"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  const json golden = json::parse(ReadText(Fixture("golden.json")));
  int checked = 0;
  for (const json& c : golden["cases"]) {
    const std::string model = c["model"];
    SCOPED_TRACE(model + " " + c["kwargs"].dump());
    DatasetSpec spec;
    spec.path = Fixture("conversations.jsonl");
    spec.format = DatasetFormat::kJsonlChat;
    spec.template_dirs = {Fixture(model)};
    spec.chat_template_kwargs = c["kwargs"].dump();
    absl::StatusOr<ReadResult> read = ReadDocuments(spec);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->skipped_conversations, 1);  // the one without an assistant turn
    absl::StatusOr<std::vector<TokenizedDoc>> docs =
        TokenizeDocuments(**tok, read->documents, /*eos_id=*/7, /*threads=*/2);
    ASSERT_TRUE(docs.ok()) << docs.status();
    size_t d = 0;
    for (const json& conv : c["conversations"]) {
      if (conv.value("skip", false)) continue;
      ASSERT_LT(d, docs->size());
      const TokenizedDoc& doc = (*docs)[d++];
      // Exactly apply_chat_template's ids: no end-of-document id appended.
      EXPECT_EQ(doc.ids, conv["ids"].get<std::vector<int32_t>>()) << "conversation " << d - 1;
      EXPECT_EQ(TargetRuns(**tok, doc), conv["targets"].get<std::vector<std::string>>())
          << "conversation " << d - 1;
      ++checked;
    }
    EXPECT_EQ(d, docs->size());
  }
  EXPECT_EQ(checked, 6 * 4);
}

// The same through the tokenize job, as `mobius-worker tokenize` and `mobius tokenize` run it:
// the template is found in the tokenizer's directory, kwargs travel in the request's JSON.
TEST(ChatTemplate, TokenizeJobFindsTheTemplateAndCountsSkippedConversations) {
  const std::string dir = Temp("job");
  std::filesystem::copy_file(Fixture("tokenizer.json"), dir + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(Fixture("qwen3/tokenizer_config.json"),
                             dir + "/tokenizer_config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto tok = LoadHfTokenizer(dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  TokenizeRequest r;
  r.inputs = {Fixture("conversations.jsonl")};
  r.output = dir + "/out.tok";
  r.tokenizer = dir;
  r.eos_id = 3;
  r.dataset.format = DatasetFormat::kJsonlChat;
  r.dataset.chat_template_kwargs = R"({"enable_thinking": false})";
  absl::StatusOr<TokenizeRequest> back = TokenizeRequestFromJson(TokenizeRequestToJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dataset.chat_template_kwargs, r.dataset.chat_template_kwargs);
  absl::StatusOr<TokenizeSummary> s = TokenizeToFile(*back, **tok);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->documents, 4);
  EXPECT_EQ(s->skipped_conversations, 1);
  EXPECT_THAT(FormatTokenizeSummary("out", *s),
              HasSubstr("1 conversations without an assistant turn skipped"));
  const json golden = json::parse(ReadText(Fixture("golden.json")));
  int64_t tokens = 0;
  for (const json& c : golden["cases"]) {
    if (c["model"] != "qwen3" || c["kwargs"].empty()) continue;
    for (const json& conv : c["conversations"]) tokens += conv.value("ids", json::array()).size();
  }
  EXPECT_EQ(s->tokens, tokens);
  EXPECT_EQ(TokenizeSummaryFromJson(TokenizeSummaryToJson(*s))->skipped_conversations, 1);
}

TEST(ChatTemplate, WhereTheTemplateComesFrom) {
  // tokenizer_config.json's string, with its special tokens.
  absl::StatusOr<ChatTemplate> t = LoadChatTemplate(Fixture("llama31"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->source, HasSubstr("Cutting Knowledge Date"));
  EXPECT_THAT(t->origin, HasSubstr("tokenizer_config.json (chat_template)"));
  EXPECT_EQ(json::parse(t->special_tokens_json)["bos_token"], "<|begin_of_text|>");
  // chat_template.jinja beside it; a null bos_token stays undefined.
  t = LoadChatTemplate(Fixture("phi4"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->origin, HasSubstr("chat_template.jinja"));
  EXPECT_FALSE(json::parse(LoadChatTemplate(Fixture("qwen3"))->special_tokens_json)
                   .contains("bos_token"));
  // Named templates: "default" unless named; an {"content": ...} token gives its content.
  const std::string named = Temp("named");
  WriteText(named + "/tokenizer_config.json",
            R"({"eos_token": {"content": "</s>", "special": true},
                "chat_template": [{"name": "default", "template": "D"},
                                  {"name": "tool_use", "template": "T"}]})");
  t = LoadChatTemplate(named);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->source, "D");
  EXPECT_EQ(json::parse(t->special_tokens_json)["eos_token"], "</s>");
  EXPECT_EQ(LoadChatTemplate(named, "tool_use")->source, "T");
  EXPECT_THAT(LoadChatTemplate(named, "rag").status().message(),
              HasSubstr("no chat template named \"rag\" (it has: default, tool_use)"));
  // None: NOT_FOUND naming the fix; a damaged config: INVALID_ARGUMENT naming it.
  const std::string none = Temp("none");
  WriteText(none + "/tokenizer_config.json", R"({"eos_token": "</s>"})");
  absl::Status s = LoadChatTemplate(none).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("set dataset.chat_template to chatml or plain"));
  WriteText(none + "/tokenizer_config.json", "{not json");
  s = LoadChatTemplate(none).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(none + "/tokenizer_config.json: not a JSON object"));
}

TEST(ChatTemplate, DefaultIsTheModelsTemplateAndNoneIsAClearError) {
  const std::string dir = Temp("default");
  WriteText(dir + "/chat.jsonl",
            R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]})"
            "\n");
  DatasetSpec spec;
  spec.path = dir + "/chat.jsonl";
  spec.format = DatasetFormat::kJsonlChat;
  spec.template_dirs = {dir};
  absl::Status s = ReadDocuments(spec).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("has no chat template"));
  EXPECT_THAT(s.message(), HasSubstr("chatml or plain"));
  spec.chat_template = "chatml";  // explicit built-in templates stay
  absl::StatusOr<ReadResult> r = ReadDocuments(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->documents[0].whole);
  spec.chat_template = "jinja";
  EXPECT_THAT(ReadDocuments(spec).status().message(),
              HasSubstr("unknown chat template \"jinja\" (model, model:NAME, chatml, plain)"));
}

TEST(ChatTemplate, BadTemplatesAndConversationsAreClearErrors) {
  const std::string dir = Temp("bad");
  const std::string data = dir + "/chat.jsonl";
  // Mistral v0.3 raises on roles that do not alternate: file, line, the template's message.
  WriteText(data,
            R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})"
            "\n"
            R"({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]})"
            "\n");
  DatasetSpec spec;
  spec.path = data;
  spec.format = DatasetFormat::kJsonlChat;
  spec.template_dirs = {Fixture("mistral_v03")};
  absl::Status s = ReadDocuments(spec).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(data + " line 2: "));
  EXPECT_THAT(s.message(), HasSubstr("messages[1]: the template raised: "));
  EXPECT_THAT(s.message(), HasSubstr("alternate user/assistant"));
  EXPECT_THAT(s.message(), HasSubstr("mistral_v03/tokenizer_config.json"));
  spec.skip_bad_lines = true;  // skipped and counted instead
  absl::StatusOr<ReadResult> r = ReadDocuments(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->documents.size(), 1u);
  EXPECT_EQ(r->skipped_lines, 1);
  spec.skip_bad_lines = false;

  // A template that does not compile: the file and Jinja's line and message.
  WriteText(dir + "/tokenizer_config.json",
            R"({"chat_template": "{% for m in messages %}\n{{ m.content }\n{% endfor %}"})");
  spec.template_dirs = {dir};
  s = ReadDocuments(spec).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(dir + "/tokenizer_config.json (chat_template): line 2: "));

  // A content with the renderer's reserved characters, one whose template drops the content,
  // a message without a role, content that is not a string: per-conversation errors.
  WriteText(dir + "/tokenizer_config.json",
            R"({"chat_template": "{% for m in messages %}{{ m.role }}:{{ m.content if m.role != 'assistant' else 'X' }}\n{% endfor %}"})");
  WriteText(data, R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})"
                  "\n");
  s = ReadDocuments(spec).status();
  EXPECT_THAT(s.message(), HasSubstr("line 1: messages[1]: the template does not render this "
                                     "message's content"));
  std::vector<std::string> weird = {
      R"({"messages": [{"role": "user", "content": "a\ue002"}, {"role": "assistant", "content": "b"}]})",
      R"({"messages": [{"content": "a"}, {"role": "assistant", "content": "b"}]})",
      R"({"messages": [{"role": "user", "content": [1, {"x": null}]}, {"role": "assistant", "content": 5}]})",
      R"({"messages": ["text", 7, null]})",
      R"({"messages": [{"role": "assistant", "content": "only"}], "tools": {"deep": [[[[[]]]]]}})",
      R"({"messages": []})",
      R"([1, 2])",
  };
  absl::StatusOr<ChatTemplate> tmpl = LoadChatTemplate(Fixture("qwen3"));
  ASSERT_TRUE(tmpl.ok());
  absl::StatusOr<std::vector<RenderedConversation>> out = RenderConversations(*tmpl, weird);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), weird.size());
  EXPECT_THAT((*out)[0].error, HasSubstr("private-use character"));
  EXPECT_EQ((*out)[0].message, 0);
  EXPECT_THAT((*out)[1].error, HasSubstr("needs a string \"role\""));
  for (size_t i = 2; i < weird.size(); ++i) {
    EXPECT_TRUE(!(*out)[i].error.empty() || !(*out)[i].text.empty()) << i;
  }

  // No Python: FAILED_PRECONDITION naming the packages.
  ChatRenderOptions no_python;
  no_python.python = "/nonexistent/python3";
  s = RenderConversations(*tmpl, {weird[4]}, no_python).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("python3-jinja2"));
  EXPECT_EQ(RenderConversations(*tmpl, {}, {.kwargs_json = "[1]"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A tokenizer whose normalizer rewrites the rendered text cannot place the mask: a clear error,
// never a shifted mask.
TEST(ChatTemplate, TokensThatDoNotDecodeToTheTextAreRefused) {
  auto nfc = LoadHfTokenizer(mobius::testing::SourcePath("test/data/tokenizers/qwen2"));
  ASSERT_TRUE(nfc.ok());
  RawDocument doc;
  doc.whole = true;
  doc.segments = {{"<|im_start|>user\ncafe\u0301<|im_end|>\n", false}, {"ok<|im_end|>", true}};
  absl::Status s = TokenizeDocuments(**nfc, {doc}, -1, 1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("loss mask cannot be placed"));
  // SentencePiece's tokenizer.model does not match "<|im_end|>" in text: refused, naming the fix.
  auto sp = LoadSentencePieceTokenizer(
      mobius::testing::SourcePath("test/data/tokenizers/sentencepiece/tokenizer.model"));
  ASSERT_TRUE(sp.ok()) << sp.status();
  s = TokenizeDocuments(**sp, {doc}, -1, 1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("needs the model's tokenizer.json"));
}

TEST(ChatTemplate, KwargsFromTheJobSpecAndTheCommandLine) {
  EXPECT_EQ(json::parse(ChatTemplateKwargsJson({{"enable_thinking", "false"},
                                                {"n", "3"},
                                                {"x", "1.5"},
                                                {"z", "null"},
                                                {"date_string", "26 Jul 2024"}})),
            json::parse(R"({"enable_thinking": false, "n": 3, "x": 1.5, "z": null,
                            "date_string": "26 Jul 2024"})"));
  auto m = ParseChatTemplateKwargs("enable_thinking=false,date_string=1 Jan 2025");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->at("date_string"), "1 Jan 2025");
  EXPECT_THAT(ParseChatTemplateKwargs("enable_thinking").status().message(),
              HasSubstr("is not NAME=VALUE"));
}

}  // namespace
}  // namespace mobius::data
