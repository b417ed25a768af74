// ReadModelDirectoryBf16 (model_init.h), generation's loader: for every stored format the bits
// are exactly Fp32ToBf16 of what ReadModelDirectory gives (fp32 and bf16 files, sharded, OpenAI's
// MXFP4 experts sliced out of fused tensors, a bitsandbytes NF4 base whose exact-NF4 weights are
// named), and a bad directory is refused as ReadModelDirectory refuses it.
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "common/numeric/bf16.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"
#include "test/worker/checkpoint/test_util.h"
#include "worker/checkpoint/model_init.h"

namespace mobius::checkpoint {
namespace {

using testing::TempDir;

void ExpectSameAsTheFp32Read(const std::string& dir) {
  absl::StatusOr<LoadedModel> fp32 = ReadModelDirectory(dir);
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  absl::StatusOr<LoadedModelBf16> bf16 = ReadModelDirectoryBf16(dir);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ(bf16->config.hidden_size, fp32->config.hidden_size);
  ASSERT_EQ(bf16->tensors.size(), fp32->params.tensors.size());
  for (const auto& [name, t] : fp32->params.tensors) {
    std::vector<uint16_t> want(t.data.size());
    numeric::Fp32ToBf16(t.data.data(), want.data(), want.size());
    ASSERT_TRUE(bf16->tensors.contains(name)) << name;
    EXPECT_EQ(bf16->tensors.at(name), want) << dir << ": " << name;
  }
  std::set<std::string> nf4;
  for (const auto& [name, q] : fp32->nf4) nf4.insert(name);
  EXPECT_EQ(bf16->nf4_names, nf4);
}

TEST(ReadModelDirectoryBf16Test, Fp32AndShardedBf16Files) {
  auto config = PresetConfig(model::Family::kLlama, "tiny", {.vocab = 100});
  ASSERT_TRUE(config.ok()) << config.status();
  // Values beyond bf16's precision, so that the rounding is exercised.
  const reference::Parameters params = InitModelParameters(*config, 5);
  TempDir f32, sharded;
  ASSERT_TRUE(WriteModelDirectory(f32.path(), *config, params, {.dtype = io::DType::kF32}).ok());
  ExpectSameAsTheFp32Read(f32.path());
  ASSERT_TRUE(
      WriteModelDirectory(sharded.path(), *config, params, {.max_shard_bytes = 20000}).ok());
  ExpectSameAsTheFp32Read(sharded.path());
  EXPECT_TRUE(std::filesystem::exists(sharded.path() + "/model.safetensors.index.json"));
}

TEST(ReadModelDirectoryBf16Test, Mxfp4ExpertsAndAnNf4Base) {
  ExpectSameAsTheFp32Read(mobius::testing::SourcePath("test/reference/golden_mxfp4/gpt_oss_mxfp4"));
  const std::string nf4 = mobius::testing::SourcePath("test/reference/golden_bnb4bit/nf4");
  ExpectSameAsTheFp32Read(nf4);
  absl::StatusOr<LoadedModelBf16> b = ReadModelDirectoryBf16(nf4);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(b->nf4_names.empty());  // the golden stores QLoRA's exact NF4
}

TEST(ReadModelDirectoryBf16Test, ABadDirectoryIsRefusedAsTheFp32ReadRefusesIt) {
  TempDir empty;
  absl::StatusOr<LoadedModelBf16> r = ReadModelDirectoryBf16(empty.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), ReadModelDirectory(empty.path()).status());
}

}  // namespace
}  // namespace mobius::checkpoint
