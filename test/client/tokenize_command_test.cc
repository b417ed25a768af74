#include "client/tokenize_command.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "client/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"
#include "common/data/hf_tokenizer.h"
#include "common/data/token_file.h"

namespace mobius::cli {
namespace {

using ::testing::HasSubstr;

TEST(TokenizeCommand, WritesATokenFileThatDecodesBackToTheDocuments) {
  std::string dir = ::testing::TempDir() + "/tok" + std::to_string(getpid());
  std::string in = dir + ".jsonl", out = dir + ".tok";
  std::ofstream(in) << "{\"text\": \"GNU General Public License\"}\n{\"text\": \"version 3 ✓\"}\n";
  TokenizeOptions o;
  o.inputs = {in};
  o.output = out;
  o.tokenizer_dir = mobius::testing::SourcePath("test/data/tokenizers/qwen2");
  std::ostringstream sout, serr;
  ASSERT_EQ(RunTokenize(o, sout, serr), kExitOk) << serr.str();
  EXPECT_THAT(sout.str(), HasSubstr("2 documents"));
  auto f = data::TokenFile::Open(out);
  ASSERT_TRUE(f.ok()) << f.status();
  auto tok = data::LoadHfTokenizer(o.tokenizer_dir);
  ASSERT_TRUE(tok.ok());
  int32_t eos = (*tok)->TokenToId("<|endoftext|>");
  ASSERT_EQ((*f)->num_docs(), 2);
  std::vector<int32_t> doc1;
  for (int64_t i = (*f)->doc_start(1); i < (*f)->doc_start(2); ++i) doc1.push_back((*f)->token(i));
  ASSERT_EQ(doc1.back(), eos);
  doc1.pop_back();
  EXPECT_EQ(*(*tok)->Decode(doc1, false), "version 3 ✓");
}

TEST(TokenizeCommand, BadInputsExitTwoWithTheLine) {
  std::string in = ::testing::TempDir() + "/bad" + std::to_string(getpid()) + ".jsonl";
  std::ofstream(in) << "{\"text\": \"ok\"}\n{\"body\": \"x\"}\n";
  TokenizeOptions o;
  o.inputs = {in};
  o.output = in + ".tok";
  o.tokenizer_dir = mobius::testing::SourcePath("test/data/tokenizers/gpt2");
  std::ostringstream sout, serr;
  EXPECT_EQ(RunTokenize(o, sout, serr), kExitUsage);
  EXPECT_THAT(serr.str(), HasSubstr("line 2: missing field \"text\""));
  o.skip_bad_lines = true;
  std::ostringstream sout2, serr2;
  EXPECT_EQ(RunTokenize(o, sout2, serr2), kExitOk) << serr2.str();
  EXPECT_THAT(sout2.str(), HasSubstr("1 bad lines skipped"));
  o.tokenizer_dir = "/nonexistent";
  std::ostringstream sout3, serr3;
  EXPECT_EQ(RunTokenize(o, sout3, serr3), kExitUsage);
}

TEST(TokenizeCommand, SentencePieceRunsInTheWorkerAndTakesSeveralInputs) {
  std::string dir = ::testing::TempDir() + "/sp" + std::to_string(getpid());
  std::ofstream(dir + "a.jsonl") << "{\"text\": \"hello world\"}\n";
  std::ofstream(dir + "b.jsonl") << "{\"text\": \"second file\"}\n{\"text\": \"third\"}\n";
  TokenizeOptions o;
  o.inputs = {dir + "a.jsonl", dir + "b.jsonl"};
  o.output = dir + ".tok";
  o.tokenizer_dir = mobius::testing::SourcePath("test/data/tokenizers/sentencepiece");
  o.worker_binary = mobius::testing::BinaryPath("bin/mobius-worker");
  std::ostringstream sout, serr;
  ASSERT_EQ(RunTokenize(o, sout, serr), kExitOk) << serr.str();
  EXPECT_THAT(sout.str(), HasSubstr("3 documents"));
  EXPECT_THAT(sout.str(), HasSubstr("vocab 600, eos 2"));
  auto f = data::TokenFile::Open(o.output);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->num_docs(), 3);

  o.worker_binary = "/nonexistent/mobius-worker";
  std::ostringstream sout2, serr2;
  EXPECT_NE(RunTokenize(o, sout2, serr2), kExitOk);
  EXPECT_THAT(serr2.str(), HasSubstr("/nonexistent/mobius-worker"));
}

}  // namespace
}  // namespace mobius::cli
