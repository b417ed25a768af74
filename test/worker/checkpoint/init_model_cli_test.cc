// `mobius-worker init-model`, run as users run it: output directory and exit codes.

#include <filesystem>
#include <string>

#include "common/numeric/bf16.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"
#include "test/testing/shell.h"
#include "test/worker/checkpoint/test_util.h"
#include "worker/checkpoint/model_init.h"

namespace mobius::checkpoint {
namespace {

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Result RunWorker(const std::string& args) {
  const mobius::testing::ShellResult ran = mobius::testing::RunShell(
      mobius::testing::BinaryPath("bin/mobius-worker") + " " + args + " 2>&1");
  return Result{ran.exit_code, ran.output};
}

TEST(InitModelCliTest, WritesTheModelTheLibraryWould) {
  testing::TempDir tmp;
  const std::string out = tmp / "llama";
  Result r = RunWorker("init-model --family=llama --preset=tiny --seed=3 --vocab=300 --out=" + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* f : {"config.json", "model.safetensors", "generation_config.json"}) {
    EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << f;
  }
  auto loaded = ReadModelDirectory(out);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->config.vocab_size, 300);
  auto config = PresetConfig(model::Family::kLlama, "tiny", {.vocab = 300});
  ASSERT_TRUE(config.ok());
  const reference::Parameters expected = InitModelParameters(*config, 3);
  for (const auto& [name, t] : expected.tensors) {
    const auto& got = loaded->params.at(name).data;
    ASSERT_EQ(got.size(), t.data.size()) << name;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], numeric::Bf16ToFp32(numeric::Fp32ToBf16(t.data[i]))) << name;
    }
  }

  // A non-empty directory is refused without --force (exit 2), replaced with it.
  r = RunWorker("init-model --family=llama --out=" + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--force"), std::string::npos) << r.output;
  r = RunWorker("init-model --family qwen3 --dtype fp32 --layers 1 --force --out " + out);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  auto replaced = ReadModelDirectory(out);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(replaced->config.family, model::Family::kQwen3);
  EXPECT_EQ(replaced->config.num_layers, 1);
}

TEST(InitModelCliTest, BadUsageExitsTwo) {
  testing::TempDir tmp;
  const std::string out = " --out=" + (tmp / "m");
  for (const std::string& args : {
           "init-model --family=bert" + out,
           "init-model --family=gpt2 --preset=huge" + out,
           "init-model --family=gpt2 --dtype=fp16" + out,
           "init-model --family=llama --heads=6 --kv-heads=4" + out,
           "init-model --family=llama --layers=-1" + out,
           std::string("init-model --family=llama"),
           "init-model extra --family=llama" + out,
           std::string("frobnicate"),
       }) {
    Result r = RunWorker(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(tmp / "m/config.json")) << args;
  }
}

TEST(InitModelCliTest, DevicesStillWorks) {
  Result r = RunWorker("devices");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("backend: "), std::string::npos) << r.output;
}

}  // namespace
}  // namespace mobius::checkpoint
