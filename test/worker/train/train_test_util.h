// Helpers shared by the trainer tests: temp directories, tiny model directories, token files.
#ifndef MOBIUS_TEST_WORKER_TRAIN_TRAIN_TEST_UTIL_H_
#define MOBIUS_TEST_WORKER_TRAIN_TRAIN_TEST_UTIL_H_

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/checkpoint/model_init.h"
#include "common/data/token_file.h"

namespace mobius::train::testing {

// A fresh directory under the test's temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "/mobius_train_XXXXXX";
    path_ = mkdtemp(pattern.data()) ? pattern : "";
    EXPECT_FALSE(path_.empty());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A seeded tiny model ("gpt2" or "llama" preset "tiny") written as a bf16 HF directory.
inline std::string WriteTinyModel(const std::string& dir, const std::string& family,
                                  int64_t vocab = 512, uint64_t seed = 1) {
  std::filesystem::create_directories(dir);
  auto fam = checkpoint::ParseFamily(family);
  EXPECT_TRUE(fam.ok());
  auto config = checkpoint::PresetConfig(*fam, "tiny", {.vocab = vocab});
  EXPECT_TRUE(config.ok()) << config.status();
  auto params = checkpoint::InitModelParameters(*config, seed);
  absl::Status s = checkpoint::WriteModelDirectory(dir, *config, params, {});
  EXPECT_TRUE(s.ok()) << s;
  return dir;
}

// `docs` documents of `len` uniformly random ids in [0, vocab).
inline std::string WriteRandomTokens(const std::string& path, int64_t vocab, int docs, int len,
                                     uint64_t seed = 7) {
  std::mt19937_64 rng(seed);
  std::vector<data::TokenizedDoc> d(docs);
  for (auto& doc : d) {
    for (int i = 0; i < len; ++i) doc.ids.push_back(static_cast<int32_t>(rng() % vocab));
  }
  absl::Status s = data::WriteTokenFile(path, d, vocab);
  EXPECT_TRUE(s.ok()) << s;
  return path;
}

// Counting sequences: each document counts up from a random start, mod vocab. After its first
// token every next token is determined, so a model that learns "+1" reaches a loss near 0.
inline std::string WriteCountingTokens(const std::string& path, int64_t vocab, int docs, int len,
                                       uint64_t seed = 7) {
  std::mt19937_64 rng(seed);
  std::vector<data::TokenizedDoc> d(docs);
  for (auto& doc : d) {
    const int64_t start = static_cast<int64_t>(rng() % vocab);
    for (int i = 0; i < len; ++i) doc.ids.push_back(static_cast<int32_t>((start + i) % vocab));
  }
  absl::Status s = data::WriteTokenFile(path, d, vocab);
  EXPECT_TRUE(s.ok()) << s;
  return path;
}

}  // namespace mobius::train::testing

#endif  // MOBIUS_TEST_WORKER_TRAIN_TRAIN_TEST_UTIL_H_
