// SentencePiece (Llama 2 / Mistral style) against ids written by Debian's spm_encode
// (test/data/tokenizers/make_sentencepiece.sh).
#include "common/data/sp_tokenizer.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"

namespace mobius::data {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(SentencePiece, MatchesSpmEncodeAndRoundTrips) {
  const std::string dir = mobius::testing::SourcePath("test/data/tokenizers/sentencepiece");
  auto tok = LoadTokenizer(dir);  // picks tokenizer.model: there is no tokenizer.json
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 600);
  auto cases = Lines(dir + "/cases.txt");
  auto golden = Lines(dir + "/golden_ids.txt");
  ASSERT_EQ(cases.size(), golden.size());
  ASSERT_GE(cases.size(), 7u);
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<int32_t> want;
    for (absl::string_view s : absl::StrSplit(golden[i], ' ', absl::SkipEmpty())) {
      int32_t v;
      ASSERT_TRUE(absl::SimpleAtoi(s, &v));
      want.push_back(v);
    }
    auto ids = (*tok)->Encode(cases[i], /*add_special_tokens=*/false);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*ids, want) << cases[i];
    auto with_bos = (*tok)->Encode(cases[i], true);
    EXPECT_EQ(with_bos->front(), (*tok)->TokenToId("<s>"));
    auto text = (*tok)->Decode(*with_bos, false);
    ASSERT_TRUE(text.ok());
    // Identity normalisation and kept whitespace (as Llama 2): decoding restores the text.
    EXPECT_EQ(*text, cases[i]);
  }
  EXPECT_EQ((*tok)->TokenToId("</s>"), 2);
  EXPECT_EQ((*tok)->TokenToId("definitely-not-a-piece"), -1);
}

TEST(SentencePiece, BadInputs) {
  auto tok = LoadSentencePieceTokenizer(
      mobius::testing::SourcePath("test/data/tokenizers/sentencepiece/tokenizer.model"));
  ASSERT_TRUE(tok.ok());
  EXPECT_THAT((*tok)->Encode("a\xff", true).status().message(), HasSubstr("byte offset 1"));
  EXPECT_THAT((*tok)->Decode({5, 600}, false).status().message(), HasSubstr("token id 600 at position 1"));
  auto not_model = LoadSentencePieceTokenizer(
      mobius::testing::SourcePath("test/data/tokenizers/sentencepiece/cases.txt"));
  EXPECT_EQ(not_model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadTokenizer("/nonexistent").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace mobius::data
