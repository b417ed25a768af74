// Byte-level BPE against golden encodings written by the Hugging Face `tokenizers` library
// (test/data/tokenizers/make_fixtures.py): exact ids, exact decode, and the bad-input paths.
#include "common/data/hf_tokenizer.h"

#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/paths.h"

namespace mobius::data {
namespace {

using ::testing::HasSubstr;

std::string Fixture(const std::string& rel) {
  return mobius::testing::SourcePath("test/data/tokenizers/" + rel);
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, IdsAndDecodeMatchHuggingFace) {
  auto tok = LoadHfTokenizer(Fixture(GetParam()));  // a model directory works too
  ASSERT_TRUE(tok.ok()) << tok.status();
  nlohmann::json golden = ReadJson(Fixture(GetParam() + "/golden.json"));
  EXPECT_EQ((*tok)->vocab_size(), golden["vocab_size"].get<int64_t>());
  int cases = 0;
  for (const auto& c : golden["cases"]) {
    std::string text = c["text"].get<std::string>();
    auto ids = (*tok)->Encode(text, /*add_special_tokens=*/true);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << "text: " << text;
    auto decoded = (*tok)->Decode(*ids, /*skip_special_tokens=*/false);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, c["decoded"].get<std::string>()) << "text: " << text;
    ++cases;
  }
  EXPECT_GE(cases, 15);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden, ::testing::Values("gpt2", "llama3", "qwen2"));

TEST(HfTokenizer, RoundTripIsExactWithoutNormalisation) {
  auto tok = LoadHfTokenizer(Fixture("gpt2/tokenizer.json"));
  ASSERT_TRUE(tok.ok());
  for (const char* text : {"", "a", "  \t\n  ", "héllo wörld 👋🏽 日本語 1234567890", "<|endoftext|>x",
                           "\x01\x02 control \x7f bytes"}) {
    auto ids = (*tok)->Encode(text, false);
    ASSERT_TRUE(ids.ok());
    auto back = (*tok)->Decode(*ids, false);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, text);
  }
}

TEST(HfTokenizer, SpecialTokensAndBos) {
  auto tok = LoadHfTokenizer(Fixture("llama3/tokenizer.json"));
  ASSERT_TRUE(tok.ok());
  int32_t bos = (*tok)->TokenToId("<|begin_of_text|>");
  ASSERT_GE(bos, 0);
  auto with = (*tok)->Encode("hi", true);
  auto without = (*tok)->Encode("hi", false);
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_EQ(with->front(), bos);
  EXPECT_EQ(with->size(), without->size() + 1);
  auto skipped = (*tok)->Decode(*with, /*skip_special_tokens=*/true);
  EXPECT_EQ(*skipped, "hi");
  EXPECT_EQ((*tok)->TokenToId("no-such-token"), -1);
}

TEST(HfTokenizer, InvalidUtf8IsRejectedWithOffset) {
  auto tok = LoadHfTokenizer(Fixture("gpt2/tokenizer.json"));
  ASSERT_TRUE(tok.ok());
  for (auto [text, offset] : std::vector<std::pair<std::string, int>>{
           {"ok\xff", 2}, {"\xc3", 0}, {"ab\xed\xa0\x80", 2} /* surrogate */, {"\xc0\xaf", 0}}) {
    auto ids = (*tok)->Encode(text, true);
    EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(ids.status().message(), HasSubstr("byte offset " + std::to_string(offset)));
  }
}

TEST(HfTokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  auto tok = LoadHfTokenizer(Fixture("gpt2/tokenizer.json"));
  ASSERT_TRUE(tok.ok());
  auto d = (*tok)->Decode({1, 2, 70000}, false);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("token id 70000 at position 2"));
  EXPECT_FALSE((*tok)->Decode({-1}, false).ok());
}

TEST(HfTokenizer, BatchEqualsSequentialAndReportsTheFailingDocument) {
  auto tok = LoadHfTokenizer(Fixture("qwen2/tokenizer.json"));
  ASSERT_TRUE(tok.ok());
  std::vector<std::string> docs;
  for (int i = 0; i < 200; ++i) docs.push_back("document " + std::to_string(i) + " café ✓ " + std::string(i % 17, 'x'));
  auto batch = (*tok)->EncodeBatch(docs, true, 4);
  ASSERT_TRUE(batch.ok());
  for (size_t i = 0; i < docs.size(); ++i) EXPECT_EQ((*batch)[i], *(*tok)->Encode(docs[i], true));
  docs[123] = "bad \xff";
  auto bad = (*tok)->EncodeBatch(docs, true, 3);
  EXPECT_THAT(bad.status().message(), HasSubstr("document 123"));
}

TEST(HfTokenizer, BadTokenizerFilesNameTheField) {
  struct Case {
    std::string json;
    std::string expect;
  };
  std::vector<Case> cases = {
      {"", "not a JSON object"},
      {"[1,2]", "not a JSON object"},
      {R"({"model": {"type": "Unigram"}})", "field \"model.type\""},
      {R"({"model": {"type": "BPE", "vocab": [], "merges": []}})", "field \"model.vocab\""},
      {R"({"model": {"type": "BPE", "vocab": {"a": -3}, "merges": []}})", "model.vocab[\"a\"]"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [7]}})", "model.merges[0]"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})", "no ByteLevel step"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "pre_tokenizer": {"type": "Metaspace"}})", "unsupported pre_tokenizer \"Metaspace\""},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}}})",
       "field \"pre_tokenizer.pattern\": regex does not compile"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "ByteLevel"}})",
       "unsupported normalizer \"Lowercase\""},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "pre_tokenizer": {"type": "ByteLevel"}, "added_tokens": [{"id": 1}]})",
       "added_tokens[0]"},
  };
  for (const Case& c : cases) {
    auto tok = ParseHfTokenizer(c.json, "t.json");
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(tok.status().message(), HasSubstr(c.expect)) << c.json;
    EXPECT_THAT(tok.status().message(), HasSubstr("tokenizer t.json"));
  }
  auto missing = LoadHfTokenizer("/nonexistent/dir");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace mobius::data
