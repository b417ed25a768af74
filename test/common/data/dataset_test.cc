// Token files, dataset readers and the packing/shuffling/sharding loader.
#include <unistd.h>

#include <fstream>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"
#include "common/data/documents.h"
#include "common/data/hf_tokenizer.h"
#include "common/data/loader.h"
#include "common/data/token_file.h"

namespace mobius::data {
namespace {

using ::testing::HasSubstr;

std::string Temp(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(getpid()) + "_" + name;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Documents of consecutive ids 0..n-1 (mod vocab) so positions are easy to check.
std::shared_ptr<const TokenFile> CountingFile(int64_t n, int64_t vocab, const std::string& name) {
  TokenizedDoc d;
  for (int64_t i = 0; i < n; ++i) d.ids.push_back(static_cast<int32_t>(i % vocab));
  std::string path = Temp(name);
  EXPECT_TRUE(WriteTokenFile(path, {d}, vocab).ok());
  auto f = TokenFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status();
  return std::shared_ptr<const TokenFile>(std::move(*f));
}

TEST(TokenFile, RoundTripWithDocumentsMaskAndWideIds) {
  std::vector<TokenizedDoc> docs = {{{1, 2, 3}, {}}, {{70000, 5}, {0, 1}}, {{}, {}}};
  std::string path = Temp("rt.tok");
  ASSERT_TRUE(WriteTokenFile(path, docs, 100000).ok());
  auto f = TokenFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->token_bytes(), 4);
  EXPECT_EQ((*f)->num_tokens(), 5);
  EXPECT_EQ((*f)->num_docs(), 3);
  EXPECT_EQ((*f)->doc_start(1), 3);
  EXPECT_EQ((*f)->doc_start(3), 5);
  EXPECT_EQ((*f)->token(3), 70000u);
  EXPECT_TRUE((*f)->has_mask());
  EXPECT_TRUE((*f)->is_target(0));
  EXPECT_FALSE((*f)->is_target(3));
  EXPECT_TRUE((*f)->is_target(4));
}

TEST(TokenFile, BadInputs) {
  EXPECT_THAT(WriteTokenFile(Temp("x.tok"), {{{1, 99}, {}}}, 50).message(),
              HasSubstr("document 0 position 1: token id 99 outside the vocabulary"));
  EXPECT_EQ(TokenFile::Open("/nonexistent.tok").status().code(), absl::StatusCode::kNotFound);
  std::string p = Temp("bad.tok");
  WriteText(p, "not a token file at all, definitely longer than sixty-four bytes............");
  EXPECT_THAT(TokenFile::Open(p).status().message(), HasSubstr("bad magic"));
  WriteText(p, "short");
  EXPECT_THAT(TokenFile::Open(p).status().message(), HasSubstr("shorter than"));
  // Truncate a valid file by one byte.
  std::string good = Temp("good.tok");
  ASSERT_TRUE(WriteTokenFile(good, {{{1, 2, 3}, {}}}, 10).ok());
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  WriteText(p, bytes.substr(0, bytes.size() - 1));
  EXPECT_THAT(TokenFile::Open(p).status().message(), HasSubstr("bytes after the header"));
  WriteText(p, "abc");
  EXPECT_THAT(TokenFile::OpenRaw(p, 2, 10).status().message(), HasSubstr("not a multiple of 2"));
}

TEST(Loader, PackingShiftsTargetsAndMasksPrompts) {
  // Two documents: prompt tokens (mask 0) then completion (mask 1).
  std::string path = Temp("mask.tok");
  ASSERT_TRUE(WriteTokenFile(path, {{{10, 11, 12, 13}, {0, 0, 1, 1}}, {{20, 21, 22}, {0, 1, 1}}}, 64).ok());
  auto f = TokenFile::Open(path);
  ASSERT_TRUE(f.ok());
  auto loader = TokenLoader::Create(std::shared_ptr<const TokenFile>(std::move(*f)),
                                    {.seq_len = 3, .batch_size = 1, .seed = 1});
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ((*loader)->num_train_sequences(), 2);  // (7 - 1) / 3
  std::set<std::vector<int32_t>> seen;
  for (int i = 0; i < 2; ++i) {
    auto b = (*loader)->NextTrainBatch();
    ASSERT_TRUE(b.ok());
    if (b->tokens[0] == 10) {
      EXPECT_THAT(b->tokens, ::testing::ElementsAre(10, 11, 12));
      EXPECT_THAT(b->targets, ::testing::ElementsAre(kIgnoreIndex, 12, 13));
    } else {
      EXPECT_THAT(b->tokens, ::testing::ElementsAre(13, 20, 21));
      EXPECT_THAT(b->targets, ::testing::ElementsAre(kIgnoreIndex, 21, 22));  // 20 is a prompt token
    }
    seen.insert(b->tokens);
  }
  EXPECT_EQ(seen.size(), 2u);
}

TEST(Loader, SameSeedSameOrderOtherSeedOtherOrderAndEpochsDiffer) {
  auto file = CountingFile(4097, 50000, "order.tok");
  auto order = [&](uint64_t seed, int batches) {
    auto l = *TokenLoader::Create(file, {.seq_len = 16, .batch_size = 4, .seed = seed});
    std::vector<int32_t> firsts;
    for (int i = 0; i < batches; ++i) firsts.push_back(l->NextTrainBatch()->tokens[0]);
    return firsts;
  };
  EXPECT_EQ(order(7, 20), order(7, 20));
  EXPECT_NE(order(7, 20), order(8, 20));
  auto l = *TokenLoader::Create(file, {.seq_len = 16, .batch_size = 4, .seed = 7});
  const int64_t per_epoch = l->batches_per_epoch();
  EXPECT_EQ(per_epoch, 64);  // 256 sequences / 4
  std::multiset<int32_t> epoch0, epoch1;
  std::vector<int32_t> seq0, seq1;
  for (int64_t i = 0; i < 2 * per_epoch; ++i) {
    auto b = l->NextTrainBatch();
    ASSERT_TRUE(b.ok());
    for (int64_t r = 0; r < b->b; ++r) {
      (i < per_epoch ? epoch0 : epoch1).insert(b->tokens[r * b->t]);
      (i < per_epoch ? seq0 : seq1).push_back(b->tokens[r * b->t]);
    }
  }
  EXPECT_EQ(epoch0, epoch1) << "each epoch visits every sequence once";
  EXPECT_EQ(epoch0.size(), 256u);
  EXPECT_NE(seq0, seq1) << "epochs are shuffled differently";
  EXPECT_EQ(l->position().epoch, 1);
}

TEST(Loader, ResumeContinuesExactlyWhereItStopped) {
  auto file = CountingFile(3001, 50000, "resume.tok");
  LoaderOptions o{.seq_len = 8, .batch_size = 3, .seed = 99};
  auto a = *TokenLoader::Create(file, o);
  std::vector<std::vector<int32_t>> straight;
  for (int i = 0; i < 300; ++i) straight.push_back(a->NextTrainBatch()->tokens);
  auto b = *TokenLoader::Create(file, o);
  for (int i = 0; i < 137; ++i) ASSERT_EQ(b->NextTrainBatch()->tokens, straight[i]);
  LoaderPosition saved = b->position();
  auto c = *TokenLoader::Create(file, o);
  c->Seek(saved);
  for (int i = 137; i < 300; ++i) ASSERT_EQ(c->NextTrainBatch()->tokens, straight[i]) << i;
}

TEST(Loader, ShardsAreDisjointAndCoverTheEpoch) {
  auto file = CountingFile(8 * 120 + 1, 50000, "shard.tok");
  std::multiset<int32_t> all;
  for (int rank = 0; rank < 3; ++rank) {
    auto l = *TokenLoader::Create(file, {.seq_len = 8, .batch_size = 5, .seed = 3, .rank = rank, .world = 3});
    EXPECT_EQ(l->batches_per_epoch(), 8);  // 120 / 3 = 40 sequences per rank
    for (int i = 0; i < l->batches_per_epoch(); ++i) {
      auto b = l->NextTrainBatch();
      for (int64_t r = 0; r < b->b; ++r) all.insert(b->tokens[r * b->t]);
    }
  }
  EXPECT_EQ(all.size(), 120u);
  EXPECT_EQ(std::set<int32_t>(all.begin(), all.end()).size(), 120u) << "no sequence twice";
}

TEST(Loader, EvalSplitIsHeldOutAndTooLittleDataIsAClearError) {
  auto file = CountingFile(8 * 100 + 1, 50000, "eval.tok");
  auto l = *TokenLoader::Create(file, {.seq_len = 8, .batch_size = 4, .seed = 1, .eval_fraction = 0.1});
  EXPECT_EQ(l->num_eval_sequences(), 10);
  auto eval = l->EvalBatches();
  ASSERT_TRUE(eval.ok());
  ASSERT_EQ(eval->size(), 3u);  // 4 + 4 + 2
  EXPECT_EQ(eval->back().b, 2);
  EXPECT_EQ((*eval)[0].tokens[0], (8 * 90) % 50000);
  for (int i = 0; i < 30; ++i) EXPECT_LT(l->NextTrainBatch()->tokens[0], 8 * 90);
  auto tiny = TokenLoader::Create(CountingFile(20, 100, "tiny.tok"), {.seq_len = 8, .batch_size = 4});
  EXPECT_THAT(tiny.status().message(), HasSubstr("fewer than one batch needs"));
}

TEST(Loader, TokenOutsideVocabularyNamesThePosition) {
  std::string path = Temp("raw.bin");
  std::vector<uint16_t> ids(100, 3);
  ids[42] = 999;
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(ids.data()), 200);
  auto f = TokenFile::OpenRaw(path, 2, 500);
  ASSERT_TRUE(f.ok());
  auto l = *TokenLoader::Create(std::shared_ptr<const TokenFile>(std::move(*f)),
                                {.seq_len = 99, .batch_size = 1});
  auto b = l->NextTrainBatch();
  EXPECT_THAT(b.status().message(), HasSubstr("token id 999 at token position 42"));
}

TEST(Documents, JsonlTextPromptCompletionAndBadLines) {
  std::string p = Temp("d.jsonl");
  WriteText(p, "{\"text\": \"hello\"}\n\n{\"text\": \"world\", \"x\": 1}\n");
  auto r = ReadDocuments({.path = p});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->documents.size(), 2u);
  EXPECT_EQ(r->documents[1].segments[0].text, "world");

  WriteText(p, "{\"text\": \"ok\"}\n{not json\n{\"txt\": 1}\n[1]\n{\"text\": 5}\n");
  auto bad = ReadDocuments({.path = p});
  EXPECT_THAT(bad.status().message(), HasSubstr("line 2: invalid JSON"));
  auto skipped = ReadDocuments({.path = p, .skip_bad_lines = true});
  ASSERT_TRUE(skipped.ok());
  EXPECT_EQ(skipped->skipped_lines, 4);
  WriteText(p, "{\"text\": \"ok\"}\n{\"txt\": \"x\"}\n");
  EXPECT_THAT(ReadDocuments({.path = p}).status().message(), HasSubstr("line 2: missing field \"text\""));
  WriteText(p, "{\"text\": \"\xff\"}\n");
  EXPECT_THAT(ReadDocuments({.path = p}).status().message(), HasSubstr("line 1: invalid UTF-8"));
  WriteText(p, "\n\n");
  EXPECT_THAT(ReadDocuments({.path = p}).status().message(), HasSubstr("has no documents"));
  EXPECT_EQ(ReadDocuments({.path = "/nonexistent.jsonl"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(ParseDatasetFormat("csv").ok());
}

TEST(Documents, TokenizePromptCompletionMasksThePrompt) {
  auto tok = LoadHfTokenizer(mobius::testing::SourcePath("test/data/tokenizers/llama3"));
  ASSERT_TRUE(tok.ok());
  int32_t eos = (*tok)->TokenToId("<|end_of_text|>");
  int32_t bos = (*tok)->TokenToId("<|begin_of_text|>");
  std::vector<RawDocument> docs = {{{{"Question: why?", false}, {" Because.", true}}}};
  auto t = TokenizeDocuments(**tok, docs, eos, 2);
  ASSERT_TRUE(t.ok());
  const TokenizedDoc& d = (*t)[0];
  auto prompt = *(*tok)->Encode("Question: why?", true);
  auto completion = *(*tok)->Encode(" Because.", false);
  ASSERT_EQ(d.ids.size(), prompt.size() + completion.size() + 1);
  EXPECT_EQ(d.ids.front(), bos);
  EXPECT_EQ(d.ids.back(), eos);
  for (size_t i = 0; i < d.ids.size(); ++i) EXPECT_EQ(d.target[i], i >= prompt.size() ? 1 : 0) << i;
  // Plain documents: BOS + text + EOS, no mask.
  auto plain = TokenizeDocuments(**tok, {{{{"hi", true}}}}, eos, 1);
  EXPECT_TRUE((*plain)[0].target.empty());
  EXPECT_EQ((*plain)[0].ids.front(), bos);
}

TEST(Documents, ChatMessagesTrainOnAssistantTurnsOnly) {
  std::string p = Temp("chat.jsonl");
  WriteText(p, R"({"messages": [{"role": "system", "content": "Be brief."},
 {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})"
                   "\n");
  // One JSON object per line: join the literal above onto one line.
  std::string line;
  {
    std::ifstream in(p);
    std::string part;
    while (std::getline(in, part)) line += part;
  }
  WriteText(p, line + "\n");
  auto r = ReadDocuments({.path = p, .format = DatasetFormat::kJsonlChat, .chat_template = "chatml"});
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& segs = r->documents[0].segments;
  ASSERT_EQ(segs.size(), 6u);
  EXPECT_EQ(segs[0].text, "<|im_start|>system\n");
  EXPECT_EQ(segs[5].text, "hello<|im_end|>\n");
  EXPECT_TRUE(segs[5].target);
  EXPECT_FALSE(segs[3].target);

  auto tok = LoadHfTokenizer(mobius::testing::SourcePath("test/data/tokenizers/qwen2"));
  ASSERT_TRUE(tok.ok());
  int32_t im_end = (*tok)->TokenToId("<|im_end|>");
  auto t = TokenizeDocuments(**tok, r->documents, (*tok)->TokenToId("<|endoftext|>"), 2);
  ASSERT_TRUE(t.ok());
  const TokenizedDoc& d = (*t)[0];
  ASSERT_EQ(d.ids.size(), d.target.size());
  // Targets: the assistant's content, its <|im_end|>, the newline and the EOS; nothing before.
  std::string trained;
  std::vector<int32_t> target_ids;
  for (size_t i = 0; i < d.ids.size(); ++i) {
    if (d.target[i]) target_ids.push_back(d.ids[i]);
  }
  EXPECT_EQ(target_ids[target_ids.size() - 3], im_end);
  target_ids.pop_back();  // EOS
  EXPECT_EQ(*(*tok)->Decode(target_ids, false), "hello<|im_end|>\n");
  EXPECT_EQ(*(*tok)->Decode(d.ids, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
            "<|im_start|>assistant\nhello<|im_end|>\n<|endoftext|>");

  WriteText(p, R"({"messages": [{"role": "robot", "content": "x"}]})" "\n");
  EXPECT_THAT(ReadDocuments({.path = p, .format = DatasetFormat::kJsonlChat, .chat_template = "chatml"}).status().message(),
              HasSubstr("line 1: \"messages[0].role\": unknown role \"robot\""));
  WriteText(p, R"({"messages": []})" "\n");
  EXPECT_THAT(ReadDocuments({.path = p, .format = DatasetFormat::kJsonlChat, .chat_template = "chatml"}).status().message(),
              HasSubstr("must be a non-empty list"));
}

}  // namespace
}  // namespace mobius::data
